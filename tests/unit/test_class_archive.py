"""The class-data-sharing archive: which JVM options a check gets, and that a
damaged archive is refused (a JVM started with one crashes)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from kafka_chaos.checkers import class_archive

from testkit import class_archive_build


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KAFKA_CHAOS_CACHE", str(tmp_path))
    monkeypatch.delenv(class_archive.RECORD_ENV, raising=False)
    return tmp_path


def test_no_archive_no_option(cache: Path) -> None:
    assert class_archive.java_options() == []


def test_an_archive_is_used_once_it_exists(cache: Path) -> None:
    archive = class_archive.archive_path()
    assert archive.is_relative_to(cache)
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"x")
    assert class_archive.java_options() == [f"-XX:SharedArchiveFile={archive}"]


def test_the_archive_is_named_by_spark_and_the_exact_jdk_build(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Java ignores an archive another HotSpot build wrote: a JDK update needs a new one."""
    real = subprocess.run(
        [str(class_archive.java_home() / "bin" / "java"), "-XshowSettings:properties", "-version"],
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    runtime = re.search(r"java.runtime.version = (\S+)", real).group(1)
    assert class_archive.java_build() == runtime
    assert runtime in class_archive.archive_path().name
    other = tmp_path / "jdk"
    other.mkdir()
    (other / "release").write_text('JAVA_VERSION="17.0.99"\nJAVA_RUNTIME_VERSION="17.0.99+1-x"\n')
    monkeypatch.setenv("JAVA_HOME", str(other))
    assert class_archive.archive_path().name.endswith("-java-17.0.99+1-x.jsa")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    assert class_archive.java_build() == "unknown"


def test_a_new_archive_drops_the_stale_ones(cache: Path) -> None:
    archive = class_archive.archive_path()
    archive.parent.mkdir(parents=True)
    stale = [archive.with_name("spark-4.2.0-java-17.0.1.jsa"), cache / "spark-4.2.0-classes.jsa"]
    for path in [archive, *stale]:
        path.write_bytes(b"x")
    class_archive_build._drop_stale(archive)
    assert archive.is_file() and not any(p.exists() for p in stale)


def test_recording_wins(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(class_archive.RECORD_ENV, "/somewhere/classes.jsa")
    assert class_archive.java_options() == ["-XX:ArchiveClassesAtExit=/somewhere/classes.jsa"]


def test_built_archive_loads_and_damaged_ones_do_not(tmp_path: Path) -> None:
    real = class_archive.archive_path()
    assert real.is_file(), "setup.sh builds the archive (python -m testkit.class_archive_build)"
    assert class_archive_build._loads(real)
    cut = tmp_path / "cut.jsa"
    with real.open("rb") as src, cut.open("wb") as dst:
        dst.write(src.read(1_000_000))
    assert not class_archive_build._loads(cut)
    # A file without an archive's header is ignored: Java starts without it.
    garbage = tmp_path / "garbage.jsa"
    garbage.write_bytes(b"not an archive" * 1000)
    assert class_archive_build._loads(garbage)
