"""Distribution assembly that needs no Maven: poms, caching, tarballs."""

from __future__ import annotations

import io
import json
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from kafka_chaos.harness import distribution as d
from kafka_chaos.harness.errors import ConfigError

NS = {"m": "http://maven.apache.org/POM/4.0.0"}


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("KAFKA_CHAOS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "dist"


def coordinates(pom: str) -> list[tuple[str, str, str]]:
    root = ET.fromstring(pom)
    return [
        tuple(dep.find(f"m:{tag}", NS).text for tag in ("groupId", "artifactId", "version"))
        for dep in root.iterfind("m:dependencies/m:dependency", NS)
    ]


def test_pom_lists_exactly_the_requested_dependencies():
    deps = d.broker_dependencies("4.4.0")
    assert coordinates(d.render_pom(deps)) == deps


def test_pom_escapes_xml():
    assert coordinates(d.render_pom([("g", "a<b", "1&2")])) == [("g", "a<b", "1&2")]


def test_3x_logs_through_reload4j():
    names = {a for _, a, _ in d.broker_dependencies("3.9.2")}
    assert {"kafka_2.13", "reload4j", "slf4j-reload4j"} <= names
    assert not any(a.startswith("log4j-") for a in names)


def test_4x_logs_through_log4j2_with_matching_versions():
    deps = d.broker_dependencies("4.4.0")
    names = {a for _, a, _ in deps}
    assert {"kafka_2.13", "log4j-core", "log4j-api", "log4j-slf4j2-impl", "slf4j-api"} <= names
    assert "reload4j" not in names
    assert len({v for g, _, v in deps if g == "org.apache.logging.log4j"}) == 1
    # Logging first, so Maven's nearest-first rule picks our pinned versions.
    assert deps[-1] == ("org.apache.kafka", "kafka_2.13", "4.4.0")


def test_tools_resolve_separately_from_the_broker():
    deps = d.tools_dependencies("4.4.0", "4.3.1")
    assert ("org.apache.kafka", "kafka-tools", "4.3.1") in deps
    assert not any(a == "kafka_2.13" for _, a, _ in deps)


@pytest.mark.parametrize("bad", ["4.4", "latest", "4.4.0-rc1", ""])
def test_malformed_versions_are_rejected(bad):
    with pytest.raises(ConfigError, match="MAJOR.MINOR.PATCH"):
        d.fetch(bad)


def test_mvn_error_extraction_keeps_the_reason():
    out = "[INFO] x\n\x1b[1;31m[ERROR] Failed to execute goal: Could not find artifact k:1\x1b[m\n"
    assert d._mvn_error(out) == "Failed to execute goal: Could not find artifact k:1"


def _fake_dist(cache: Path, version: str) -> Path:
    work = cache.parent / "work"
    (work / "libs").mkdir(parents=True)
    (work / "libs" / "a.jar").write_bytes(b"jar a")
    return work


def test_seal_caches_and_is_reproducible(cache):
    first = d._seal(_fake_dist(cache, "4.4.0"), cache / "4.4.0", "4.4.0", "4.3.1")
    assert first.tarball.exists() and len(first.sha256) == 64
    assert d.load_cached("4.4.0") == first
    assert d.list_cached() == [first]
    assert first.node_dir() == f"/opt/kafka-chaos/dist/4.4.0-{first.sha256[:12]}"
    assert first.node_classpath() == f"{first.node_dir()}/libs/*"
    assert first.node_classpath(tools=True) == f"{first.node_dir()}/tools/*"
    manifest = json.loads((cache / "4.4.0" / "MANIFEST.json").read_text())
    assert manifest == {"version": "4.4.0", "sha256": first.sha256, "tools_version": "4.3.1"}
    # Packing the same files again gives the same checksum (no times/owners inside).
    again = cache.parent / "again"
    d._pack(cache / "4.4.0", ["libs"], again)
    assert d.sha256_file(again) == first.sha256
    # fetch() serves the cache without calling Maven.
    assert d.fetch("4.4.0") == first


def test_a_second_sealer_keeps_the_first_copy(cache):
    first = d._seal(_fake_dist(cache, "3.9.2"), cache / "3.9.2", "3.9.2", None)
    other = cache.parent / "other"
    (other / "libs").mkdir(parents=True)
    (other / "libs" / "b.jar").write_bytes(b"different")
    assert d._seal(other, cache / "3.9.2", "3.9.2", None) == first


def official_tarball(path: Path, version: str, jar_version: str | None = None) -> Path:
    jar_version = jar_version or version
    top = f"kafka_2.13-{version}"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in (
            (f"{top}/libs/kafka_2.13-{jar_version}.jar", b"core"),
            (f"{top}/libs/kafka-tools-{jar_version}.jar", b"tools"),
            (f"{top}/bin/kafka-server-start.sh", b"#!/bin/sh"),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_official_tarball_libs_are_used(tmp_path):
    dist = d.from_tarball(official_tarball(tmp_path / "k.tgz", "3.9.2"))
    assert dist.version == "3.9.2" and dist.tools_version is None
    assert sorted(p.name for p in (dist.root / "libs").iterdir()) == [
        "kafka-tools-3.9.2.jar",
        "kafka_2.13-3.9.2.jar",
    ]
    assert dist.node_classpath(tools=True) == f"{dist.node_dir()}/libs/*"
    assert d.for_spec("3.9.2", str(tmp_path / "k.tgz")) == dist


def test_tarball_version_must_match_the_spec(tmp_path):
    tgz = official_tarball(tmp_path / "k.tgz", "3.9.2")
    with pytest.raises(ConfigError, match="holds Kafka 3.9.2, but kafka_version is 4.4.0"):
        d.for_spec("4.4.0", str(tgz))


def test_bad_tarballs_are_named(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        d.from_tarball(tmp_path / "missing.tgz")
    junk = tmp_path / "junk.tgz"
    junk.write_bytes(b"not a tarball")
    with pytest.raises(ConfigError, match="not a readable tarball"):
        d.from_tarball(junk)
    empty = tmp_path / "empty.tgz"
    with tarfile.open(empty, "w:gz"):
        pass
    with pytest.raises(ConfigError, match="no libs/kafka_2"):
        d.from_tarball(empty)
