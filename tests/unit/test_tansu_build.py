"""Tansu's cached build: where it lives, and the one line a missing build or cargo gets.

The build itself (cargo, most of an hour cold) runs in ``./setup.sh --tansu``
and the opt-in Tansu tier, never here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness import tansu_build
from harness.errors import HarnessError


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KAFKA_CHAOS_CACHE", str(tmp_path))
    return tmp_path


def test_the_build_is_kept_by_version_and_features(cache: Path) -> None:
    assert tansu_build.cache_dir("0.6.0", ("postgres",)) == cache / "tansu" / "0.6.0-postgres"
    assert tansu_build.cache_dir("0.6.0", ("postgres", "libsql")).name == "0.6.0-libsql+postgres"
    assert tansu_build.cache_dir("0.6.0", ()).name == "0.6.0-default"


def test_a_missing_build_says_how_to_make_it(cache: Path) -> None:
    with pytest.raises(HarnessError, match=r"tansu 0\.6\.0 is not built .*setup\.sh --tansu"):
        tansu_build.binary()


def test_a_cached_build_is_used_as_it_is(cache: Path) -> None:
    out = tansu_build.cache_dir()
    (out / "bin").mkdir(parents=True)
    (out / "bin" / "tansu").write_text("#!/bin/sh\n")
    (out / "BUILD.json").write_text(json.dumps({"build_s": 1234.5}))
    assert tansu_build.build() == out / "bin" / "tansu"  # no cargo run: it returns at once
    assert tansu_build.binary() == out / "bin" / "tansu"
    assert tansu_build.build_record()["build_s"] == 1234.5


def test_without_cargo_the_build_fails_in_one_line(cache: Path, tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path / "empty"), "KAFKA_CHAOS_CACHE": str(cache)}
    res = subprocess.run(
        [sys.executable, "-m", "harness.tansu_build"],
        capture_output=True, text=True, env=env, cwd=Path(tansu_build.__file__).parent.parent,
        timeout=60,
    )  # fmt: skip
    assert res.returncode == 3
    assert res.stderr.strip().splitlines() == [
        "tansu: building tansu needs `cargo` (Rust): see https://rustup.rs"
    ]
    assert not (cache / "tansu" / "0.6.0-postgres").exists()  # nothing half-made is cached
