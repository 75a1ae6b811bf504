"""A class-data-sharing archive of the JVM classes a check loads, so later checks start faster.

Every check starts a JVM that loads and verifies the same few thousand Spark
classes before it does any work.  Java's dynamic class-data-sharing archive
records them once (``-XX:ArchiveClassesAtExit``); a JVM started with
``-XX:SharedArchiveFile`` maps them in ready-made.  Side by side on a 1e5-op
history: 26 s without it, 21.5 s with it (Spark session start 4.5 s -> 2.5 s).

``setup.sh`` builds it (``python -m testkit.class_archive_build``) by
judging a small synthetic history, and keeps it only if a JVM starts with it
(a damaged archive crashes the JVM).  This module only says where the
archive is and which JVM options use it: the Spark session reads it, so it
stays below the checks that the build runs.  Nothing depends on it: without one,
checks run as before, and Java checks an archive against its own version and
class path and ignores one it cannot use (a warning on stderr).

The archive is named by the Spark version and the exact JDK build, because
Java ignores an archive that another build of HotSpot wrote: after a JDK
update (a Debian security release, say) the old name would stay "built"
while every check silently started without it; under the new name the
archive is missing, and ``setup.sh`` builds it again.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pyspark
from kafka_chaos.harness import cache

RECORD_ENV = "KC_CLASS_ARCHIVE_RECORD"  # when set, the JVM writes its classes there at exit
_RUNTIME = re.compile(r'^JAVA_RUNTIME_VERSION="?([^"\n]+)"?$', re.MULTILINE)


def java_home() -> Path | None:
    """The JDK Spark starts: ``$JAVA_HOME``, else the ``java`` on PATH (as spark-class picks)."""
    home = os.environ.get("JAVA_HOME")
    if home:
        return Path(home)
    java = shutil.which("java")
    return Path(java).resolve().parent.parent if java else None


def java_build(home: Path | None = None) -> str:
    """The JDK's exact build (``17.0.15+6-Debian-1deb12u1``) from its ``release`` file.

    Read from the file, not from ``java -version``: a check must not start a
    JVM just to find its archive.  ``unknown`` when there is no such file.
    """
    home = home or java_home()
    try:
        found = _RUNTIME.search((home / "release").read_text()) if home else None
    except OSError:
        found = None
    return re.sub(r"[^\w.+-]", "_", found.group(1)) if found else "unknown"


def archive_path() -> Path:
    """Per Spark version and JDK build: an upgrade of either gets a new archive."""
    return cache.cache_root("classes") / f"spark-{pyspark.__version__}-java-{java_build()}.jsa"


def java_options() -> list[str]:
    """Driver JVM options: record an archive (during ``build``), use one, or nothing."""
    record = os.environ.get(RECORD_ENV)
    if record:
        return [f"-XX:ArchiveClassesAtExit={record}"]
    archive = archive_path()
    return [f"-XX:SharedArchiveFile={archive}"] if archive.is_file() else []
