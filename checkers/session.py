"""One SparkSession factory, so every caller gets the same quiet, small-footprint setup.

The machine is shared and small: a 4g driver, few shuffle partitions (one
per core: a stage's fixed cost is per task, and hashed keys split evenly; at
1e7 ops 63.3/63.5 s against 65.9/67.9 s with two per core) and WARN logging
keep Spark from crowding out the Kafka brokers under test.  Adaptive query
execution is off: it runs every query stage as a job of its own, and with
few, evenly split partitions it had nothing to re-plan (1e7 ops: 93 s
without it, 100 s with it; 1e5: 52 jobs became 17).
The JVMs use the parallel garbage collector, built for throughput rather
than short pauses, and cached tables are kept uncompressed (memory is
plentiful here, CPU is not).  Side by side at 1e7 ops: 86-87 s with the
default collector, 72-76 s with the parallel one; the cache setting is worth
about 2 s more; kept tables are written with Kryo, not Java's serializer
(``KRYO``).  Small histories get the quick JIT compiler only
(``QUICK_JIT_MAX_OPS``).  The driver maps the Spark classes from a
class-data-sharing archive when setup.sh made one (checkers/class_archive.py).
Spark keeps the classes it generates for plans and expressions
(``CODEGEN_CACHE_ENTRIES``), so a warm engine does not compile a check's
code again for every history.
KC_SPARK_CONF="key=value,..." adds settings, for tuning runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator

from kafka_chaos.checkers import class_archive
from kafka_chaos.checkers.remote import LOCAL_HERE_ENV, REMOTE_ENV, connect
from kafka_chaos.harness.errors import HarnessError
from pyspark import SparkContext
from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[*]"
THROUGHPUT_GC = "-XX:+UseParallelGC"
# JVM log lines (a class archive it cannot use, say) go to stderr, never into
# the JSON that ``kafka-chaos check --json`` prints on stdout.
JVM_LOG_TO_STDERR = "-Xlog:disable -Xlog:all=warning:stderr"
# Below this many operations a check is mostly JVM warm-up, and the optimising
# (C2) compiler's code arrives too late to pay for itself: with the quick (C1)
# compiler alone, side by side, 1e5 ops took 17.3 s instead of 22.5 s and 1e6
# ops 22.7 s instead of 28.4 s, but 1e7 ops 72.5 s instead of 62.5 s.
QUICK_JIT_MAX_OPS = 2_000_000
# With C1 alone the JVM reserves a client VM's 48 MB of code cache, not the 240 MB
# of tiered compilation.  A warm engine keeps CODEGEN_CACHE_ENTRIES generated
# classes alive, and a suite's second Tansu check died with "Out of space in
# CodeCache for adapters" (bench/brokers.py, 2026-11-28); so the full size back.
QUICK_JIT = ["-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m"]
# Above it, methods must run three times as often as the JVM's default before
# they are compiled.  Spark makes the JIT compilers busy: in the 15 s per-value
# job alone, C2 spent 11 s compiling 1,766 methods, on a machine with 2 cores.
# Side by side at 1e7 ops: 51.7 s by default, 48.5 s with 3 (0.94x); 2 and 5
# were as good as 3, 10 cost 13 % and 30 cost 41 % (code stays slow too long).
FEWER_COMPILES = "-XX:CompileThresholdScaling=3"
# And the optimising compiler's own thresholds three times higher again (9x
# the default; the quick compiler stays at 3x).  C2 was the JVM's largest
# single consumer of CPU: 19-20 of the 85 CPU-seconds of a 1e7-op check,
# against 28-41 s in Spark's tasks (per-thread CPU from /proc).  Side by side,
# warm, five alternating rounds each: 44.5-46.1 s (mean 44.8) by default,
# 38.7-44.8 s (mean 41.4) with these; six times (18x) was no better.
LATER_C2 = [
    "-XX:Tier4InvocationThreshold=15000",
    "-XX:Tier4CompileThreshold=45000",
    "-XX:Tier4BackEdgeThreshold=120000",
]
# And C2 inlines less: calls at most 6 deep (JDK 17: 15), hot callees of at
# most 100 bytecodes (325), none already compiled to more than 500 bytes of
# code (2500).  C2's compiles of Spark's code were still 14-15 of a 1e7-op
# check's 82-86 JVM CPU-seconds (per-thread CPU from /proc), and most of a
# compile is the inlined code; Spark's hot loops are generated code calling
# through interfaces, which gains little from deep inlining.  Side by side,
# recorded rows of a 1e7-op queue history, cold, alternating: C2 6.4-6.9
# CPU-s, the tasks' threads unchanged (49.8-51.3 against 49.3-50.6), the
# JVM 75-79 CPU-s against 82-86 (about 0.91x).  Three deep, 250 and 50
# made the tasks' own code slow (64-70 CPU-s); 9 deep, 1000 and 150 saved
# less; with C2's default thresholds it saved less too.
SHALLOW_C2_INLINING = [
    "-XX:MaxInlineLevel=6",
    "-XX:InlineSmallCode=500",
    "-XX:FreqInlineSize=100",
]

# Generated classes Spark keeps (its default is 100).  One queue check
# compiles about 490 (whole-stage and expression code), so with the default
# a warm engine compiled every one of them again for each history.  Side by
# side on a 121k-line run, warm: about 485 compiles and 14.3-17.6 CPU-s a
# check with 100, 2-6 compiles and 9.2-13.6 CPU-s with 5000.  Room for the
# transactional and share-group checks' classes too.
CODEGEN_CACHE_ENTRIES = 5000

# Kept tables (``Tables.keep``) are stored serialized, as every storage level
# PySpark offers is, and Spark's default serializer is Java's: a Java-flight-
# recorder profile of a 1e7-op check put a fifth of the tasks' samples in
# ObjectInputStream and ObjectOutputStream, reading and writing those rows.
# Kryo reads and writes an UnsafeRow as its bytes.  Side by side, recorded
# rows of a 1e7-op queue history, cold, alternating: the JVM 71.0-75.5 CPU-s
# against 76.2-79.3, the tasks' threads 46-50 against 50-53, the same
# memory.  (Keeping them deserialized saved the tasks more, 37-41 CPU-s, but
# the collector spent 8-14 CPU-s on the rows, and 1.4 GiB more.)  Without
# reference tracking: Kryo otherwise remembers every object it writes, to
# write a repeated one as a back-reference; rows share no objects, and
# clearing its identity maps after each row was 5 % of the tasks' samples.
KRYO = {
    "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
    "spark.kryo.referenceTracking": "false",
}
# Aggregations that collect lists (the availability timeline's ack times per
# second) keep a hash map of at most 128 groups by default, then sort every
# row instead; a history has a group per second, thousands.  Side by side as
# above, with the settings before it: the JVM 69.2-70.4 CPU-s against
# 74.3-78.7, the tasks' threads 42.1-43.5 against 47.4-50.7, of which Kryo's
# reference tracking is at most a CPU-second or two (bench/check_ab.py
# --threads).
HASHED_COLLECTS = {"spark.sql.objectHashAggregate.sortBased.fallbackThreshold": "65536"}


def _overrides() -> dict[str, str]:
    """Extra Spark settings from KC_SPARK_CONF="key=value,key=value" (for tuning runs)."""
    raw = os.environ.get("KC_SPARK_CONF", "")
    return dict(item.split("=", 1) for item in raw.split(",") if "=" in item)


def _java_options(expected_ops: int) -> list[str]:
    jit = (
        QUICK_JIT
        if expected_ops < QUICK_JIT_MAX_OPS
        else [FEWER_COMPILES, *LATER_C2, *SHALLOW_C2_INLINING]
    )
    return [THROUGHPUT_GC, JVM_LOG_TO_STDERR, *jit]


def settings(expected_ops: int = 0) -> dict[str, str]:
    """The Spark settings of a check's engine: a local session's, and a Connect
    server's that the harness starts (checkers/connect_server.py), alike."""
    jvm = _java_options(expected_ops)
    conf = {
        "spark.driver.memory": "4g",
        "spark.executor.memory": "1g",
        "spark.driver.extraJavaOptions": " ".join(jvm + class_archive.java_options()),
        "spark.executor.extraJavaOptions": " ".join(jvm),
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        "spark.sql.shuffle.partitions": str(os.cpu_count() or 2),
        "spark.sql.adaptive.enabled": "false",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.parquet.compression.codec": "snappy",
        "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES),
        **KRYO,
        **HASHED_COLLECTS,
    }
    return {**conf, **_overrides()}


def get_spark(
    master: str | None = None, expected_ops: int = 0, remote: str | None = None
) -> SparkSession:
    """Return the process-wide session, creating it for ``master`` on first use.

    ``expected_ops`` (about how many operations it will judge) picks the JIT
    compilers.  Spark allows one active session per JVM; a later call with
    another master gets the existing session (the CLI runs in its own
    process, so this only matters inside tests, whose histories are small).
    ``remote`` (else ``KC_SPARK_REMOTE``), ``sc://HOST:PORT``: attach to that
    Spark Connect server instead (checkers/remote.py), starting nothing here.
    """
    if remote:
        return connect(remote)
    shared = shared_remote(master)
    if shared:
        try:
            return connect(shared)
        except HarnessError as e:  # the check still runs, on a Spark of its own
            log.warning("shared Spark engine gone (%s): starting a local one", e)
    os.environ.setdefault("PYSPARK_PYTHON", "python3")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # never bind beyond this machine
    builder = SparkSession.builder.master(master or DEFAULT_MASTER).appName("kafka-chaos-check")
    for key, value in settings(expected_ops).items():
        builder = builder.config(key, value)
    with _jvm_output_to_log():
        fresh = SparkContext._active_spark_context is None
        spark = builder.getOrCreate()
    if fresh:
        log.info("engine start: local Spark session (%s)", master or DEFAULT_MASTER)
    spark.sparkContext.setLogLevel("WARN")
    return spark


def shared_remote(master: str | None) -> str | None:
    """The shared engine (``KC_SPARK_REMOTE``) a check without a remote of its own attaches to.

    None for a check given a Spark master of its own (it runs there), in a
    process that already runs a local session (one engine per process), and
    in the one that keeps its local session for itself (``KC_SPARK_LOCAL_PID``).
    """
    url = os.environ.get(REMOTE_ENV)
    if not url or not (master or DEFAULT_MASTER).startswith("local"):
        return None
    if SparkContext._active_spark_context is not None:
        return None
    return None if os.environ.get(LOCAL_HERE_ENV) == str(os.getpid()) else url


@contextlib.contextmanager
def _jvm_output_to_log() -> Iterator[None]:
    """Give the JVM a stderr that feeds Python logging (``spark.jvm``), not the terminal.

    Spark's WARN lines and the JVM's own warnings belong in harness.log; the
    terminal shows the run's progress and results.  The JVM inherits fd 2
    while it is launched, so fd 2 points at a pipe for just that moment and
    a reader thread turns what arrives into log records for as long as the
    JVM lives.
    """
    if SparkSession.getActiveSession() is not None:
        yield
        return
    read_fd, write_fd = os.pipe()
    saved = os.dup(2)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    restored = threading.Event()
    threading.Thread(
        target=_log_lines, args=(read_fd, restored), name="spark-jvm-log", daemon=True
    ).start()
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        restored.set()


def _log_lines(fd: int, restored: threading.Event) -> None:
    """Log the JVM's lines, but only once fd 2 is the real stderr again.

    While the pipe is fd 2, a log handler writing to stderr writes into it:
    logging what arrives then would be read back and logged again, forever
    (seen when a bench script gave the root logger a stderr handler).
    """
    jvm_log = logging.getLogger("spark.jvm")
    restored.wait()
    with os.fdopen(fd, "rb") as pipe:
        for raw in pipe:
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                jvm_log.info("%s", line)
