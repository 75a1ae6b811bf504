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
"""

from __future__ import annotations

import os
from pathlib import Path

import pyspark

RECORD_ENV = "KC_CLASS_ARCHIVE_RECORD"  # when set, the JVM writes its classes there at exit


def archive_path() -> Path:
    """Per Spark version: an upgrade gets a new archive instead of an unusable one."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "kafka-chaos" / f"spark-{pyspark.__version__}-classes.jsa"


def java_options() -> list[str]:
    """Driver JVM options: record an archive (during ``build``), use one, or nothing."""
    record = os.environ.get(RECORD_ENV)
    if record:
        return [f"-XX:ArchiveClassesAtExit={record}"]
    archive = archive_path()
    return [f"-XX:SharedArchiveFile={archive}"] if archive.is_file() else []
