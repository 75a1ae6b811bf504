"""Build the class-data-sharing archive (``checkers.class_archive``): judge a small
synthetic history in a JVM that records the classes it loads.

Apart from ``class_archive`` because building runs a whole check (the top of
the checkers), while the archive's path and options are read by the Spark
session at the bottom; one module holding both made an import cycle.  In
``testkit`` (not shipped), not ``checkers``, because it needs the synthetic
history generator (``testkit.synthetic``) and only setup runs it:
``setup.sh`` runs ``python3 -m testkit.class_archive_build`` from the checkout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafka_chaos.checkers.class_archive import RECORD_ENV, archive_path
from kafka_chaos.harness.errors import HarnessError

CHECKOUT = Path(__file__).resolve().parent.parent
WARM_UP_OPS = 20_000  # enough for every check's plans; seconds to judge
JVM_EXIT_TIMEOUT_S = 120.0


def build(force: bool = False, timeout: float = 600.0) -> Path:
    """Make the archive unless it exists: judge a small history in a recording JVM."""
    from testkit.synthetic import generate

    archive = archive_path()
    if archive.is_file() and not force:
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kafka-chaos-classes-") as tmp:
        history, recorded = Path(tmp) / "history.jsonl", Path(tmp) / "classes.jsa"
        generate(WARM_UP_OPS, history)
        proc = subprocess.run(
            [sys.executable, "-m", "testkit.class_archive_build", "--record", str(history)],
            cwd=CHECKOUT,  # testkit is not installed: ``-m`` finds it from the checkout
            env={**os.environ, RECORD_ENV: str(recorded)},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if proc.returncode != 0:
            raise HarnessError(f"class archive: the warm-up check failed: {proc.stderr[-1500:]}")
        _wait_for_exit(int(proc.stdout.split()[-1]))
        if not recorded.is_file():
            raise HarnessError(f"class archive: the JVM wrote no archive ({proc.stderr[-1500:]})")
        partial = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
        shutil.move(recorded, partial)
        if not _loads(partial):
            partial.unlink()
            raise HarnessError(f"class archive: Java cannot load the archive it wrote ({partial})")
        os.replace(partial, archive)  # readers never see half an archive
    _drop_stale(archive)
    return archive


def _drop_stale(archive: Path) -> None:
    """Remove the archives of other Spark or JDK builds (about 180 MB each, never used
    again), and the one kept before archives were named by JDK build too."""
    legacy = archive.parent.parent.glob("spark-*-classes.jsa")
    for old in [*archive.parent.glob("*.jsa"), *legacy]:
        if old != archive:
            old.unlink(missing_ok=True)


def _loads(archive: Path) -> bool:
    """Whether a JVM starts with ``archive`` (a damaged one crashes it, hence the check)."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else "java"  # as Spark picks it
    # A crash report would land in the working directory: it says nothing we need.
    probe = [java, f"-XX:SharedArchiveFile={archive}", "-XX:ErrorFile=/dev/null", "-version"]
    proc = subprocess.run(probe, capture_output=True, timeout=60)
    return proc.returncode == 0


def _wait_for_exit(pid: int) -> None:
    """The JVM writes the archive as it exits, after the Python process that ran it."""
    deadline = time.monotonic() + JVM_EXIT_TIMEOUT_S
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            raise HarnessError(f"class archive: JVM {pid} still up after {JVM_EXIT_TIMEOUT_S} s")
        time.sleep(0.2)


def _record(history: Path) -> None:
    """Judge ``history`` in this process, then print the JVM's pid for ``build`` to wait on."""
    from kafka_chaos.checkers.api import check_history  # Spark only in the recording process
    from kafka_chaos.checkers.session import get_spark

    check_history(history, {})
    spark = get_spark()
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    spark.stop()
    print(pid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild an existing archive")
    parser.add_argument("--record", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.record:
        _record(args.record)
        return
    print(build(force=args.force))


if __name__ == "__main__":
    main()
