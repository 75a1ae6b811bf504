"""Elle's classpath: the generated pom, the cache, and the one-line failure."""

from __future__ import annotations

import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from kafka_chaos.harness import elle_classpath as ec
from kafka_chaos.harness.errors import ElleResolveError

NS = {"m": "http://maven.apache.org/POM/4.0.0"}


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("KAFKA_CHAOS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "elle"


def repo_urls(pom: str) -> list[tuple[str, str]]:
    root = ET.fromstring(pom)
    return [
        (r.find("m:id", NS).text, r.find("m:url", NS).text)
        for r in root.iterfind("m:repositories/m:repository", NS)
    ]


def test_extra_repositories_split_on_spaces_and_commas_without_repeats():
    value = " file:///a, https://b.example/m2  file:///a,,file:///c "
    assert ec.extra_repositories(value) == ["file:///a", "https://b.example/m2", "file:///c"]
    assert ec.extra_repositories("") == []


def test_pom_lists_central_clojars_and_the_extra_repos(monkeypatch):
    monkeypatch.setenv(ec.EXTRA_REPOS_ENV, "file:///srv/mirror https://m.example/r")
    repos = repo_urls(ec.render_pom())
    assert [url for _, url in repos] == [
        ec.CENTRAL_URL,
        ec.CLOJARS_URL,
        "file:///srv/mirror",
        "https://m.example/r",
    ]
    # Ids are unique and stable, so Maven keeps trusting what it downloaded before.
    assert len({rid for rid, _ in repos}) == 4
    assert repos == repo_urls(ec.render_pom())


def test_pom_asks_for_clojure_elle_and_unilog():
    root = ET.fromstring(ec.render_pom("0.2.5", []))
    deps = {
        (d.findtext("m:groupId", namespaces=NS), d.findtext("m:artifactId", namespaces=NS)): (
            d.findtext("m:version", namespaces=NS)
        )
        for d in root.iterfind("m:dependencies/m:dependency", NS)
    }
    assert deps == {
        ("org.clojure", "clojure"): ec.CLOJURE_VERSION,
        ("elle", "elle"): "0.2.5",
        ("spootnik", "unilog"): ec.UNILOG_VERSION,
    }


def test_a_cached_classpath_is_used_without_mvn(cache, tmp_path, monkeypatch):
    jars = [tmp_path / "a.jar", tmp_path / "b.jar"]
    for j in jars:
        j.write_bytes(b"")
    (cache / "9.9.9").mkdir(parents=True)
    (cache / "9.9.9" / "classpath.txt").write_text(os.pathsep.join(map(str, jars)))

    def no_mvn(*args, **kwargs):
        raise AssertionError("mvn ran although the classpath was cached")

    monkeypatch.setattr(ec.subprocess, "run", no_mvn)
    assert ec.classpath("9.9.9") == [str(j) for j in jars]


def test_a_cached_classpath_with_a_missing_jar_is_stale(cache, tmp_path):
    (cache / "9.9.9").mkdir(parents=True)
    (cache / "9.9.9" / "classpath.txt").write_text(str(tmp_path / "gone.jar"))
    assert ec.cached_classpath("9.9.9") is None


@pytest.mark.skipif(shutil.which("mvn") is None, reason="mvn is not installed")
def test_an_unresolvable_elle_is_one_line_naming_the_repositories(cache, tmp_path, monkeypatch):
    # mvn always consults Central (and Clojars, which the pom names), so the
    # failure comes from a version no repository has; the only extra
    # repository is an empty directory.
    empty = tmp_path / "empty-repo"
    empty.mkdir()
    monkeypatch.setenv(ec.EXTRA_REPOS_ENV, empty.as_uri())
    with pytest.raises(ElleResolveError) as e:
        ec.classpath("0.0.0-nope", timeout_s=120)
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("Elle 0.0.0-nope could not be resolved from ")
    assert empty.as_uri() in message and ec.CLOJARS_URL in message
    assert "0.0.0-nope" in message.split(": ", 1)[1]  # mvn's own first error line
    assert not (cache / "0.0.0-nope" / "classpath.txt").exists()
