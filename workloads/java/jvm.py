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

import hashlib
import logging
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from harness import distribution
from harness.errors import ConfigError, HarnessError

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


def client_jars(version: str, libs: Path | None = None) -> list[Path]:
    """The jars the Java client of ``version`` needs, from its cached distribution."""
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
    return jars


def start(version: str, log_dir: Path) -> None:
    """Start this process's JVM with the Java client of ``version`` (once), its
    log in ``log_dir``/java-client.log.

    A second call for the same version does nothing; for another version it
    is refused, since the classpath cannot change.
    """
    global _started
    with _lock:
        if _started == version:
            return
        if _started is not None:
            raise HarnessError(
                f"this process already holds Kafka {_started}'s Java client; "
                f"one process runs one client version (asked for {version})"
            )
        import jpype  # only a run that uses the Java client pays for loading JPype

        if jpype.isJVMStarted():
            raise HarnessError(
                "a JVM without Kafka's client is already running in this process "
                "(Elle's?); start the Java client before anything else uses JPype"
            )
        jars = client_jars(version)
        classpath = [str(helper_classes(jars)), *map(str, jars)]
        log_file = f"-Dkafka.chaos.client.log={log_dir / CLIENT_LOG}"
        jpype.startJVM(HEAP, log_file, *LOG_SETTINGS, classpath=classpath, convertStrings=False)
        _started = version
        log.info("started the JVM with Kafka %s's Java client (%d jars)", version, len(jars))


def helper_classes(jars: list[Path]) -> Path:
    """The compiled helpers for these jars, compiled into the cache on first use."""
    digest = hashlib.sha256()
    for source in HELPER_SOURCES:
        digest.update(source.name.encode() + source.read_bytes())
    for jar in jars:
        digest.update(jar.name.encode())
    out = distribution.cache_root().parent / "java-client" / digest.hexdigest()[:16]
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
