"""Build Tansu (a Kafka-compatible broker in Rust) once, and cache it.

Why a module: ``./setup.sh --tansu`` builds it, and the harness must find the
binary again (``binary``) without knowing how it was made.  Tansu publishes
no Debian package; its crate ``tansu`` on the Rust crate registry is the
release, so ``cargo install`` at a pinned version with the features the
harness uses (``postgres``: brokers keep their data in PostgreSQL) is the
build.  ``--locked`` takes the crate's own Cargo.lock, so every machine
compiles the same dependency versions.

Cache layout, ``${KAFKA_CHAOS_CACHE:-~/.cache/kafka-chaos}/tansu/``::

    <version>-<features>/bin/tansu    the broker (``tansu broker ...``)
    <version>-<features>/BUILD.json   version, features, seconds the build took
    target/                           cargo's build directory, kept so that an
                                      interrupted build resumes where it stopped
    src/<version>-010-schema.sql      the PostgreSQL schema (``schema``)

The crate does not ship the PostgreSQL schema its storage needs (its
``ddl/`` is SQLite's); upstream applies ``etc/initdb.d/010-schema.sql`` of the
release tag by hand.  ``schema`` finds that file, first found wins:
``KC_TANSU_SCHEMA`` (a path), ``../shared/sources/tansu-<version>-010-schema.sql``,
the cache, then the tag's raw file on GitHub; each is checked against the
pinned sha256 before it is kept or used.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from kafka_chaos.harness import cache
from kafka_chaos.harness.errors import HarnessError

TANSU_VERSION = "0.6.0"
TANSU_FEATURES = ("postgres",)
SCHEMAS = {  # version: (the release tag's etc/initdb.d/010-schema.sql, its sha256)
    "0.6.0": (
        "https://raw.githubusercontent.com/tansu-io/tansu/v0.6.0/etc/initdb.d/010-schema.sql",
        "e4941efd0bb20bbadc16db1a8d52d4d3aed10d9f12147fea1a116d47cbce626e",
    ),
}
DOWNLOAD_TIMEOUT_S = 60.0
CHECKOUT = Path(__file__).resolve().parent.parent
# A cold build compiles about 450 crates; on two busy cores that is most of an hour.
BUILD_TIMEOUT_S = 5400.0


def cache_dir(version: str = TANSU_VERSION, features: tuple[str, ...] = TANSU_FEATURES) -> Path:
    return cache.cache_root("tansu") / f"{version}-{'+'.join(sorted(features)) or 'default'}"


def binary(version: str = TANSU_VERSION, features: tuple[str, ...] = TANSU_FEATURES) -> Path:
    """The cached tansu binary; a HarnessError in one line when it was never built."""
    path = cache_dir(version, features) / "bin" / "tansu"
    if not path.is_file():
        raise HarnessError(
            f"tansu {version} is not built ({path} is missing): run ./setup.sh --tansu "
            "or `python3 -m kafka_chaos.harness.tansu_build`"
        )
    return path


def schema(version: str = TANSU_VERSION) -> Path:
    """The PostgreSQL schema of Tansu ``version``, checked and kept in the cache."""
    if version not in SCHEMAS:
        raise HarnessError(f"no PostgreSQL schema is known for tansu {version}")
    url, sha = SCHEMAS[version]
    kept = cache.cache_root("tansu") / "src" / f"{version}-010-schema.sql"
    name = f"tansu-{version}-010-schema.sql"
    given = os.environ.get("KC_TANSU_SCHEMA")
    if given:
        if not Path(given).is_file():
            raise HarnessError(f"KC_TANSU_SCHEMA={given}: no such file")
        return _keep(Path(given).read_bytes(), given, sha, kept)
    for source in (CHECKOUT.parent / "shared" / "sources" / name, kept):
        if source.is_file():
            return _keep(source.read_bytes(), str(source), sha, kept)
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as res:
            data = res.read()
    except OSError as e:
        raise HarnessError(
            f"tansu's PostgreSQL schema: {url} could not be fetched ({e}); "
            f"put the file at KC_TANSU_SCHEMA or ../shared/sources/{name}"
        ) from e
    return _keep(data, url, sha, kept)


def _keep(data: bytes, source: str, sha: str, kept: Path) -> Path:
    """``data`` at ``kept``, once its sha256 is the pinned one."""
    got = hashlib.sha256(data).hexdigest()
    if got != sha:
        raise HarnessError(f"tansu's PostgreSQL schema from {source}: sha256 {got}, not {sha}")
    if not kept.is_file():
        kept.parent.mkdir(parents=True, exist_ok=True)
        tmp = kept.with_suffix(".part")
        tmp.write_bytes(data)
        tmp.rename(kept)
    return kept


def build_record(version: str = TANSU_VERSION, features: tuple[str, ...] = TANSU_FEATURES) -> dict:
    """What BUILD.json says of the cached build (empty when there is none)."""
    path = cache_dir(version, features) / "BUILD.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def build(
    version: str = TANSU_VERSION, features: tuple[str, ...] = TANSU_FEATURES, force: bool = False
) -> Path:
    """The cached binary, built first if it is not there yet (never rebuilt otherwise)."""
    out = cache_dir(version, features)
    if (out / "bin" / "tansu").is_file() and not force:
        return out / "bin" / "tansu"
    if shutil.which("cargo") is None:
        raise HarnessError("building tansu needs `cargo` (Rust): see https://rustup.rs")
    started = time.monotonic()
    out.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    # A target directory the user chose is cargo's own setting, kept; else one in the cache.
    env.setdefault("CARGO_TARGET_DIR", str(out.parent / "target"))
    with tempfile.TemporaryDirectory(prefix="kafka-chaos-tansu-", dir=out.parent) as tmp:
        staged = Path(tmp) / "out"
        log = out.parent / f"build-{version}.log"
        args = [
            "cargo",
            "install",
            "tansu",
            "--version",
            version,
            "--locked",
            "--root",
            str(staged),
        ]
        if features:
            args += ["--features", ",".join(features)]
        cache.run_step(args, Path(tmp), f"building tansu {version}", log, BUILD_TIMEOUT_S, env)
        took = round(time.monotonic() - started, 1)
        record = {"version": version, "features": list(features), "build_s": took}
        (staged / "BUILD.json").write_text(json.dumps(record, indent=2) + "\n")
        for leftover in (".crates.toml", ".crates2.json"):  # cargo's own bookkeeping
            (staged / leftover).unlink(missing_ok=True)
        cache.replace_whole(staged, out)
    return out / "bin" / "tansu"


def main() -> None:
    parser = argparse.ArgumentParser(description="build Tansu into the kafka-chaos cache")
    parser.add_argument("--force", action="store_true", help="rebuild even when cached")
    args = parser.parse_args()
    try:
        path = build(force=args.force)
        schema()
    except HarnessError as e:
        print(f"tansu: {e}", file=sys.stderr)
        sys.exit(3)
    took = build_record().get("build_s")
    print(f"{path} (built in {took} s)" if took is not None else str(path))


if __name__ == "__main__":
    main()
