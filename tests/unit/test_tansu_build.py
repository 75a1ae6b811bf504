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
from kafka_chaos.harness import tansu_build
from kafka_chaos.harness.errors import HarnessError


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
        [sys.executable, "-m", "kafka_chaos.harness.tansu_build"],
        capture_output=True, text=True, env=env, cwd=Path(tansu_build.__file__).parent.parent,
        timeout=60,
    )  # fmt: skip
    assert res.returncode == 3
    assert res.stderr.strip().splitlines() == [
        "tansu: building tansu needs `cargo` (Rust): see https://rustup.rs"
    ]
    assert not (cache / "tansu" / "0.6.0-postgres").exists()  # nothing half-made is cached


def test_the_schema_is_checked_then_kept(cache: Path, tmp_path: Path, monkeypatch) -> None:
    good = tmp_path / "good.sql"
    good.write_bytes(b"-- not the schema\n")
    monkeypatch.setenv("KC_TANSU_SCHEMA", str(good))
    with pytest.raises(HarnessError, match=r"sha256 [0-9a-f]{64}, not e4941efd"):
        tansu_build.schema()
    assert not (cache / "tansu" / "src").exists()  # a wrong file is never kept
    monkeypatch.setenv("KC_TANSU_SCHEMA", str(tmp_path / "absent.sql"))
    with pytest.raises(HarnessError, match="KC_TANSU_SCHEMA=.*absent.sql: no such file"):
        tansu_build.schema()
    with pytest.raises(HarnessError, match="no PostgreSQL schema is known for tansu 9.9.9"):
        tansu_build.schema("9.9.9")


def test_a_good_schema_is_kept_and_found_again(cache: Path, monkeypatch) -> None:
    real = Path.home() / ".cache" / "kafka-chaos" / "tansu" / "src" / "0.6.0-010-schema.sql"
    if not real.is_file():
        pytest.skip("Tansu's schema was never fetched here (./setup.sh --tansu)")
    monkeypatch.setenv("KC_TANSU_SCHEMA", str(real))
    kept = tansu_build.schema()
    assert kept == cache / "tansu" / "src" / "0.6.0-010-schema.sql"
    assert kept.read_bytes() == real.read_bytes()
    monkeypatch.delenv("KC_TANSU_SCHEMA")
    assert tansu_build.schema() == kept  # from the cache now, nothing fetched
