"""Build lazyfs (the FUSE file system that drops unsynced writes) once, and cache it.

Why a module: ``setup.sh`` builds it, and the harness must find the binary
again (``binary``) without knowing how it was made.  lazyfs has no release
binaries and no Debian package, so it is built from its public source at a
pinned commit with its own build (libs/libpcache, then lazyfs, both CMake).

Its CMake fetches two libraries from GitHub at configure time (toml11 v3.7.1
and spdlog v1.10.0); Debian ships exactly those versions (``libtoml11-dev``,
``libspdlog-dev``), so the build points CMake's FetchContent at two tiny
shim projects that take Debian's copies instead, and needs no network.

Where the source comes from, first found wins:

1. ``KC_LAZYFS_SOURCE``: a source tarball (``lazyfs-<commit>/...`` inside) or
   a checkout of the repository;
2. ``../shared/sources/lazyfs-<commit>.tar.gz`` beside the checkout (the
   project's shared folder, as ``../shared/maven`` serves Maven);
3. a tarball already in the cache;
4. ``git clone`` of the public repository (machines that reach GitHub).

Cache layout, ``${KAFKA_CHAOS_CACHE:-~/.cache/kafka-chaos}/lazyfs/<commit>/``::

    bin/lazyfs           the file system (runs as ``lazyfs MOUNT --config-path CFG ...``)
    bin/libpcache.so.0   its cache library, found through the binary's $ORIGIN rpath
    BUILD.json           commit, source, seconds the build took
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from kafka_chaos.harness import cache
from kafka_chaos.harness.errors import HarnessError

# dsrhaslab/lazyfs is the upstream of jepsen-io/lazyfs (Jepsen's fork adds
# packaging only); this commit is its main branch as mirrored here.
LAZYFS_REPO = "https://github.com/dsrhaslab/lazyfs"
LAZYFS_COMMIT = "a47a5baea559020f29902662de77764b0cbd62ce"
DEBIAN_PACKAGES = ("fuse3", "libfuse3-dev", "libtoml11-dev", "libspdlog-dev", "cmake", "g++")
BUILD_TIMEOUT_S = 1200.0
CHECKOUT = Path(__file__).resolve().parent.parent

_TOML_SHIM = """cmake_minimum_required(VERSION 3.24)
project(toml_shim NONE)
find_package(toml11 REQUIRED GLOBAL)
"""
# libpcache sets a property on target ``spdlog`` and links ``spdlog``; Debian's is spdlog::spdlog.
_SPDLOG_SHIM = """cmake_minimum_required(VERSION 3.24)
project(spdlog_shim NONE)
find_package(spdlog REQUIRED GLOBAL)
add_library(spdlog INTERFACE)
target_link_libraries(spdlog INTERFACE spdlog::spdlog)
"""


def cache_dir(commit: str = LAZYFS_COMMIT) -> Path:
    return cache.cache_root("lazyfs") / commit


def binary(commit: str = LAZYFS_COMMIT) -> Path:
    """The cached lazyfs binary; a HarnessError in one line when it was never built."""
    path = cache_dir(commit) / "bin" / "lazyfs"
    if not path.is_file():
        raise HarnessError(
            f"lazyfs is not built ({path} is missing): run ./setup.sh "
            "or `python3 -m kafka_chaos.harness.lazyfs_build`"
        )
    return path


def _source_tarball_name(commit: str) -> str:
    return f"lazyfs-{commit}.tar.gz"


def _find_source(commit: str) -> Path | None:
    """A tarball or checkout of lazyfs at ``commit``, or None."""
    given = os.environ.get("KC_LAZYFS_SOURCE")
    if given:
        path = Path(given)
        if not path.exists():
            raise HarnessError(f"KC_LAZYFS_SOURCE={given}: no such file or directory")
        return path
    for candidate in (
        CHECKOUT.parent / "shared" / "sources" / _source_tarball_name(commit),
        cache_dir(commit).parent / "src" / _source_tarball_name(commit),
    ):
        if candidate.is_file():
            return candidate
    return None


def _unpack(source: Path, dest: Path, commit: str) -> Path:
    """The source tree of ``source`` (tarball or checkout) below ``dest``."""
    if source.is_dir():
        tree = dest / f"lazyfs-{commit}"
        shutil.copytree(source, tree, ignore=shutil.ignore_patterns(".git", "build"))
        return tree
    with tarfile.open(source) as tar:
        tar.extractall(dest, filter="data")
    trees = [p for p in dest.iterdir() if p.is_dir() and (p / "lazyfs").is_dir()]
    if len(trees) != 1:
        raise HarnessError(f"{source}: expected one lazyfs source tree inside, found {len(trees)}")
    return trees[0]


def _clone(dest: Path, commit: str) -> Path:
    tree = dest / f"lazyfs-{commit}"
    for args in (
        ["git", "clone", "--quiet", LAZYFS_REPO, str(tree)],
        ["git", "-C", str(tree), "checkout", "--quiet", commit],
    ):
        _step(args, dest, "fetching lazyfs's source")
    return tree


def _step(args: list[str], cwd: Path, what: str, log: Path | None = None) -> None:
    cache.run_step(args, cwd, what, log, timeout_s=BUILD_TIMEOUT_S)


def build(commit: str = LAZYFS_COMMIT, force: bool = False) -> Path:
    """The cached binary, built first if it is not there yet (never rebuilt otherwise)."""
    out = cache_dir(commit)
    if (out / "bin" / "lazyfs").is_file() and not force:
        return out / "bin" / "lazyfs"
    for tool in ("cmake", "g++"):
        if shutil.which(tool) is None:
            raise HarnessError(f"building lazyfs needs `{tool}`: apt-get install {tool}")
    if not Path("/usr/share/cmake/toml11").is_dir() or not Path("/usr/include/spdlog").is_dir():
        raise HarnessError(
            "building lazyfs needs Debian's libtoml11-dev and libspdlog-dev: "
            f"apt-get install {' '.join(DEBIAN_PACKAGES)}"
        )
    started = time.monotonic()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kafka-chaos-lazyfs-", dir=out.parent) as tmp:
        work = Path(tmp)
        source = _find_source(commit)
        tree = _unpack(source, work, commit) if source else _clone(work, commit)
        log = work / "build.log"
        for name, text in (("toml", _TOML_SHIM), ("spdlog", _SPDLOG_SHIM)):
            (work / "shim" / name).mkdir(parents=True)
            (work / "shim" / name / "CMakeLists.txt").write_text(text)
        pcache = tree / "libs" / "libpcache" / "build"
        pcache.mkdir(parents=True, exist_ok=True)
        _step(
            [
                "cmake", "-DFETCHCONTENT_FULLY_DISCONNECTED=ON",
                f"-DFETCHCONTENT_SOURCE_DIR_TOML={work / 'shim' / 'toml'}",
                f"-DFETCHCONTENT_SOURCE_DIR_SPDLOG={work / 'shim' / 'spdlog'}", "..",
            ],
            pcache, "configuring libpcache", log,
        )  # fmt: skip
        _step(["cmake", "--build", ".", "-j2"], pcache, "building libpcache", log)
        fs = tree / "lazyfs" / "build"
        fs.mkdir(parents=True, exist_ok=True)
        _step(
            [
                "cmake", "-DLAZYFS_BUILD_TESTS=OFF",
                # lazyfs.cpp logs through spdlog with Debian's external fmt
                "-DCMAKE_CXX_STANDARD_LIBRARIES=-lspdlog -lfmt",
                "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath,$ORIGIN",
                "-DCMAKE_SKIP_BUILD_RPATH=ON", "..",
            ],
            fs, "configuring lazyfs", log,
        )  # fmt: skip
        _step(["cmake", "--build", ".", "-j2"], fs, "building lazyfs", log)
        staged = work / "out"
        (staged / "bin").mkdir(parents=True)
        shutil.copy2(fs / "lazyfs", staged / "bin" / "lazyfs")
        shutil.copy2(pcache / "libpcache.so.0", staged / "bin" / "libpcache.so.0")
        took = round(time.monotonic() - started, 1)
        record = {"commit": commit, "source": str(source or LAZYFS_REPO), "build_s": took}
        (staged / "BUILD.json").write_text(json.dumps(record, indent=2) + "\n")
        if source is not None and source.is_file():  # keep the source beside the builds
            kept = out.parent / "src" / _source_tarball_name(commit)
            if not kept.exists():
                kept.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, kept)
        cache.replace_whole(staged, out)
    return out / "bin" / "lazyfs"


def main() -> None:
    parser = argparse.ArgumentParser(description="build lazyfs into the kafka-chaos cache")
    parser.add_argument("--force", action="store_true", help="rebuild even when cached")
    args = parser.parse_args()
    try:
        path = build(force=args.force)
    except HarnessError as e:
        print(f"lazyfs: {e}", file=sys.stderr)
        sys.exit(3)
    print(path)


if __name__ == "__main__":
    main()
