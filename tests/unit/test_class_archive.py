"""The class-data-sharing archive: which JVM options a check gets, and that a
damaged archive is refused (a JVM started with one crashes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from checkers import class_archive
from testkit import class_archive_build


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
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
