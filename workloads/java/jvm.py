"""Kafka's own Java client, loaded into this process through JPype.

Why in this process: a Java worker then shares everything a librdkafka
worker has (the history writer, the value and process counters, the crash
loop, the stop event), so the two clients write the same history by the
same code.  A blocking Java call holds only its own Python thread: JPype
releases the GIL while Java runs.

Why the client's jars alone: JPype starts one JVM per process and fixes its
classpath at the start, so the process that runs a Java client holds exactly
the client of the run's Kafka version (``kafka-clients`` plus its logging and
compression jars, from the distribution the cluster was installed from).
Elle, which also runs through JPype, then runs in a child process
(docs/java-client.md says why that side moves, not this one).

The JVM ends with the process, SIGTERM and SIGKILL included: nothing to stop.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from kafka_chaos.harness import cache, distribution
from kafka_chaos.harness.errors import ConfigError, HarnessError
from kafka_chaos.harness.spec import DebugSpec

log = logging.getLogger(__name__)

# The client's runtime jars in a distribution's libs/: the client, SLF4J and
# its binding (log4j 2 from Kafka 4.0, reload4j before), and the codecs.
# Without a logging binding ``new KafkaProducer`` fails (NoClassDefFoundError).
CLIENT_JAR_PREFIXES = (
    "kafka-clients-",
    "slf4j-",
    "log4j-",
    "reload4j-",
    "lz4-java-",
    "snappy-java-",
    "zstd-jni-",
)
HEAP = "-Xmx512m"
# The client's own log (INFO: producer ids, epochs, rebalances) goes to a file
# of the run, by these settings; the terminal shows the run's progress only.
HERE = Path(__file__).parent
LOG_SETTINGS = (
    f"-Dlog4j2.configurationFile={HERE / 'log4j2.properties'}",  # Kafka 4: log4j 2
    f"-Dlog4j.configuration=file:{HERE / 'log4j.properties'}",  # Kafka 3: reload4j
)
CLIENT_LOG = "java-client.log"
# Our own Java classes batch Python's calls into the client (BurstSender.java
# says why), compiled once per set of sources and client jars into the cache.
HELPER_SOURCES = tuple(sorted(HERE.glob("*.java")))
JAVAC_TIMEOUT_S = 120

_lock = threading.Lock()
_started: str | None = None  # the Kafka version whose client this process holds
# ``--client-debug``: the client's debug log (client-logs/java-client.log) while
# this process's JVM writes it; finish_debug_log closes and compresses it.
DEBUG_LOG = "java-client.log"
DEBUG_SEGMENTS = 5  # the active file and 4 rolled ones: the newest stretch of the log is kept
_debug_log: Path | None = None


def client_jars(
    version: str, libs: Path | None = None, client_jar: str | None = None
) -> list[Path]:
    """The jars the Java client of ``version`` needs, from its cached distribution;
    ``client_jar`` (a patched kafka-clients) takes the released client's place."""
    if libs is None:
        dist = distribution.load_cached(version)
        if dist is None:
            raise ConfigError(
                f"the Java client needs Kafka {version}'s jars, which are not cached; "
                f"run: kafka-chaos dist fetch {version}"
            )
        libs = dist.root / "libs"
    jars = sorted(p for p in libs.glob("*.jar") if p.name.startswith(CLIENT_JAR_PREFIXES))
    if not any(p.name == f"kafka-clients-{version}.jar" for p in jars):
        found = ", ".join(p.name for p in jars if p.name.startswith("kafka-clients-")) or "none"
        raise ConfigError(
            f"the Java client needs kafka-clients-{version}.jar in {libs} (found: {found})"
        )
    if client_jar is not None:
        released = f"kafka-clients-{version}.jar"
        jars = [Path(client_jar).resolve() if p.name == released else p for p in jars]
    return jars


def _sha256_prefix(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def start(
    version: str,
    log_dir: Path,
    debug: DebugSpec | None = None,
    client_jar: str | None = None,
) -> None:
    """Start this process's JVM with the Java client of ``version`` (once), its
    log in ``log_dir``/java-client.log; with ``debug.client`` set, the loggers
    of ``debug.java_loggers`` at DEBUG in ``log_dir``/client-logs/java-client.log.
    ``client_jar``: a patched kafka-clients jar in place of the released one.

    A second call for the same client does nothing; for another one it is
    refused, since the classpath cannot change.
    """
    global _started
    wanted = version if client_jar is None else f"{version} ({client_jar})"
    with _lock:
        if _started == wanted:
            return
        if _started is not None:
            raise HarnessError(
                f"this process already holds Kafka {_started}'s Java client; "
                f"one process runs one client (asked for {wanted})"
            )
        import jpype  # only a run that uses the Java client pays for loading JPype

        if jpype.isJVMStarted():
            raise HarnessError(
                "a JVM without Kafka's client is already running in this process "
                "(Elle's?); start the Java client before anything else uses JPype"
            )
        jars = client_jars(version, client_jar=client_jar)
        if client_jar is not None:
            log.info(
                "the Java client is %s (sha256 %s), not the released kafka-clients-%s.jar",
                client_jar,
                _sha256_prefix(Path(client_jar)),
                version,
            )
        classpath = [str(helper_classes(jars)), *map(str, jars)]
        log_file = f"-Dkafka.chaos.client.log={log_dir / CLIENT_LOG}"
        settings = LOG_SETTINGS
        if debug is not None and debug.client is not None:
            settings = _debug_settings(version, Path(log_dir) / "client-logs", debug)
        jpype.startJVM(HEAP, log_file, *settings, classpath=classpath, convertStrings=False)
        _started = wanted
        log.info("started the JVM with Kafka %s's Java client (%d jars)", version, len(jars))


def debug_log_config(version: str, log_file: Path, debug: DebugSpec) -> str:
    """The client's log config with a debug appender: the packaged one (INFO to
    java-client.log) plus ``debug.java_loggers`` at DEBUG into ``log_file`` alone.

    Bounded by the appender's own rotation: DEBUG_SEGMENTS files of a fifth
    of ``debug.client_max_mb`` each (uncompressed), the oldest deleted; log4j 2
    compresses the rolled ones as it rolls them.
    """
    segment_mb = max(1, int(debug.client_max_mb / DEBUG_SEGMENTS))
    rolled = DEBUG_SEGMENTS - 1
    stem = str(log_file).removesuffix(".log")
    if version.split(".")[0] in ("2", "3"):
        lines = (HERE / "log4j.properties").read_text().splitlines()
        lines += [
            "log4j.appender.debug=org.apache.log4j.RollingFileAppender",
            f"log4j.appender.debug.File={log_file}",
            f"log4j.appender.debug.MaxFileSize={segment_mb}MB",
            f"log4j.appender.debug.MaxBackupIndex={rolled}",
            "log4j.appender.debug.layout=org.apache.log4j.PatternLayout",
            "log4j.appender.debug.layout.ConversionPattern=%d{ISO8601} %t %p %c{1} %m%n",
        ]
        for name, level in _levels(debug.java_loggers):
            lines += [f"log4j.logger.{name}={level}, debug", f"log4j.additivity.{name}=false"]
        return "\n".join(lines) + "\n"
    lines = (HERE / "log4j2.properties").read_text().splitlines()
    lines += [
        "appender.debug.type = RollingFile",
        "appender.debug.name = debug",
        f"appender.debug.fileName = {log_file}",
        f"appender.debug.filePattern = {stem}.%i.log.gz",
        "appender.debug.layout.type = PatternLayout",
        "appender.debug.layout.pattern = %d{ISO8601}{UTC} %t %p %c{1} %m%n",
        "appender.debug.policies.type = Policies",
        "appender.debug.policies.size.type = SizeBasedTriggeringPolicy",
        f"appender.debug.policies.size.size = {segment_mb}MB",
        "appender.debug.strategy.type = DefaultRolloverStrategy",
        f"appender.debug.strategy.max = {rolled}",
    ]
    for i, (name, level) in enumerate(_levels(debug.java_loggers)):
        lines += [
            f"logger.debug{i}.name = {name}",
            f"logger.debug{i}.level = {level.lower()}",
            f"logger.debug{i}.additivity = false",
            f"logger.debug{i}.appenderRef.debug.ref = debug",
        ]
    return "\n".join(lines) + "\n"


def _levels(loggers: list[str]) -> list[tuple[str, str]]:
    """``name`` or ``name=LEVEL`` as (name, LEVEL); DEBUG when none is given."""
    out = []
    for entry in loggers:
        name, _, level = entry.partition("=")
        out.append((name.strip(), (level.strip() or "DEBUG").upper()))
    return out


def _debug_settings(version: str, directory: Path, debug: DebugSpec) -> tuple[str, ...]:
    """The JVM's log settings pointing at a debug config written into ``directory``."""
    global _debug_log
    directory.mkdir(parents=True, exist_ok=True)
    _debug_log = directory / DEBUG_LOG
    config = directory / "java-log4j.properties"
    config.write_text(debug_log_config(version, _debug_log, debug))
    if version.split(".")[0] in ("2", "3"):
        return (f"-Dlog4j.configuration=file:{config}",)
    return (f"-Dlog4j2.configurationFile={config}",)


def finish_debug_log(directory: Path) -> None:
    """Stop the client's logging and gzip its debug log (``java-client.log.gz``).

    Called at the end of a run: a process holds one run's JVM, and nothing of
    the Java client logs after its workload stopped.  A run killed before
    this leaves the plain file, complete up to the kill.
    """
    global _debug_log
    if _debug_log is None or _debug_log.parent != Path(directory):
        return
    import jpype

    if jpype.isJVMStarted():
        try:
            if _started is not None and _started.split(".")[0] in ("2", "3"):
                jpype.JClass("org.apache.log4j.LogManager").shutdown()
            else:
                jpype.JClass("org.apache.logging.log4j.LogManager").shutdown()
        except Exception as e:  # its file stays plain text, complete as flushed
            log.warning("could not stop the Java client's logging: %s", e)
            return
    for plain in sorted(_debug_log.parent.glob(f"{DEBUG_LOG}*")):
        if plain.suffix == ".gz":
            continue
        with plain.open("rb") as src, gzip.open(f"{plain}.gz", "wb", compresslevel=6) as out:
            shutil.copyfileobj(src, out)
        plain.unlink()
    _debug_log = None


def helper_classes(jars: list[Path]) -> Path:
    """The compiled helpers for these jars, compiled into the cache on first use."""
    digest = hashlib.sha256()
    for source in HELPER_SOURCES:
        digest.update(source.name.encode() + source.read_bytes())
    for jar in jars:
        digest.update(jar.name.encode())
    out = cache.cache_root("java-client") / digest.hexdigest()[:16]
    if all((out / "kafkachaos" / f"{s.stem}.class").is_file() for s in HELPER_SOURCES):
        return out
    javac = shutil.which("javac")
    if javac is None:
        raise ConfigError(
            "the Java client needs javac (a JDK) to build its helper; ./setup.sh installs one"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{out.name}-", dir=out.parent))
    done = subprocess.run(
        [javac, "-nowarn", "-d", str(work), "-cp", ":".join(map(str, jars))]
        + [str(s) for s in HELPER_SOURCES],
        capture_output=True,
        text=True,
        timeout=JAVAC_TIMEOUT_S,
    )
    if done.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        first = (done.stderr.strip().splitlines() or ["no output"])[0]
        raise HarnessError(f"compiling {HERE}/*.java failed: {first}")
    try:
        work.rename(out)  # atomic: a concurrent start either wins or finds it done
    except OSError:
        shutil.rmtree(work, ignore_errors=True)
    return out
