"""Elle's runtime classpath, resolved with ``mvn`` and cached.

Elle (Jepsen's cycle checker, ``elle:elle``) is published only on Clojars, so
it cannot be a Python dependency; its jars are resolved like the Kafka
distributions (harness/distribution.py): ``mvn dependency:build-classpath`` on
a small generated pom.  The repositories are Maven Central, Clojars and any
extra URLs in ``KC_EXTRA_MAVEN_REPOS`` (space- or comma-separated), e.g. an
offline mirror ``file:///srv/maven`` on machines that cannot reach Clojars.

Cache layout, ``${KAFKA_CHAOS_CACHE:-~/.cache/kafka-chaos}/elle/<version>/``::

    pom.xml         the generated pom (kept: it says what was resolved, from where)
    classpath.txt   the jars, separated by ``os.pathsep``, as mvn wrote them

A cached classpath whose jars all still exist is used without running mvn.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from pathlib import Path
from xml.sax.saxutils import escape

from kafka_chaos.harness import cache
from kafka_chaos.harness.errors import ElleResolveError

ELLE_VERSION = "0.2.5"
CLOJURE_VERSION = "1.12.3"
# elle.txn requires unilog.config when it loads, but Elle's pom lists unilog
# only for development: without it loading fails (notes/elle.md, gotcha 2).
UNILOG_VERSION = "0.7.32"

CENTRAL_URL = "https://repo.maven.apache.org/maven2"
CLOJARS_URL = "https://repo.clojars.org"
EXTRA_REPOS_ENV = "KC_EXTRA_MAVEN_REPOS"
MVN_TIMEOUT_S = 600.0

Coordinate = tuple[str, str, str]  # group, artifact, version


def cache_dir(version: str = ELLE_VERSION) -> Path:
    """Where Elle ``version``'s classpath is cached; ``KAFKA_CHAOS_CACHE`` moves it."""
    return cache.cache_root("elle") / version


def extra_repositories(value: str | None = None) -> list[str]:
    """The URLs named in ``KC_EXTRA_MAVEN_REPOS`` (or ``value``), in order, without repeats."""
    if value is None:
        value = os.environ.get(EXTRA_REPOS_ENV, "")
    urls = [u for u in re.split(r"[\s,]+", value) if u]
    return list(dict.fromkeys(urls))


def repositories(extra: list[str] | None = None) -> list[tuple[str, str]]:
    """``(id, url)`` of every repository the pom names: Central, Clojars, then the extras.

    An extra repository's id is derived from its URL, so it stays the same from
    run to run: Maven remembers which repository each downloaded jar came from
    and ignores local copies whose repository is not in the current pom.
    """
    extra = extra_repositories() if extra is None else extra
    repos = [("central", CENTRAL_URL), ("clojars", CLOJARS_URL)]
    for url in extra:
        digest = hashlib.sha256(url.encode()).hexdigest()[:10]
        repos.append((f"kc-extra-{digest}", url))
    return repos


def dependencies(version: str = ELLE_VERSION) -> list[Coordinate]:
    """Direct dependencies of Elle's runtime classpath (transitives follow)."""
    return [
        ("org.clojure", "clojure", CLOJURE_VERSION),
        ("elle", "elle", version),
        ("spootnik", "unilog", UNILOG_VERSION),
    ]


def render_pom(version: str = ELLE_VERSION, repos: list[tuple[str, str]] | None = None) -> str:
    """A minimal pom whose only purpose is resolving Elle ``version``."""
    repos = repositories() if repos is None else repos
    deps = "\n".join(
        "    <dependency><groupId>{}</groupId><artifactId>{}</artifactId>"
        "<version>{}</version></dependency>".format(*(escape(x) for x in c))
        for c in dependencies(version)
    )
    repo_xml = "\n".join(
        f"    <repository><id>{escape(rid)}</id><url>{escape(url)}</url></repository>"
        for rid, url in repos
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>kafka-chaos</groupId><artifactId>elle-classpath</artifactId>"
        "<version>1</version><packaging>pom</packaging>\n"
        f"  <repositories>\n{repo_xml}\n  </repositories>\n"
        f"  <dependencies>\n{deps}\n  </dependencies>\n"
        "</project>\n"
    )


def cached_classpath(version: str = ELLE_VERSION) -> list[str] | None:
    """The cached classpath of ``version`` if every jar in it still exists, else None."""
    try:
        text = (cache_dir(version) / "classpath.txt").read_text().strip()
    except FileNotFoundError:
        return None
    jars = [j for j in text.split(os.pathsep) if j]
    if not jars or not all(Path(j).is_file() for j in jars):
        return None
    return jars


def classpath(version: str = ELLE_VERSION, timeout_s: float = MVN_TIMEOUT_S) -> list[str]:
    """Elle ``version``'s runtime classpath (jar paths), resolving it with mvn once."""
    cached = cached_classpath(version)
    if cached:
        return cached
    repos = repositories()
    where = cache_dir(version)
    where.mkdir(parents=True, exist_ok=True)
    pom = where / "pom.xml"
    pom.write_text(render_pom(version, repos))
    # mvn writes the file itself; a temp name keeps a half-written one out of the cache.
    fd, tmp_name = tempfile.mkstemp(prefix=".classpath-", suffix=".txt", dir=where)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        _run_mvn(pom, tmp, version, repos, timeout_s)
        tmp.replace(where / "classpath.txt")
    finally:
        tmp.unlink(missing_ok=True)
    jars = cached_classpath(version)
    if not jars:
        raise ElleResolveError(f"Elle {version}: mvn wrote an empty or stale classpath")
    return jars


def _run_mvn(
    pom: Path, out: Path, version: str, repos: list[tuple[str, str]], timeout_s: float
) -> None:
    """Run ``dependency:build-classpath``; any failure is ONE line naming the repositories."""
    urls = ", ".join(url for _, url in repos)
    cmd = [
        "mvn",
        "-q",
        "-B",
        # Retry artifacts an earlier attempt did not find: a mirror may have been added since.
        "-U",
        "-f",
        str(pom),
        "dependency:build-classpath",
        f"-Dmdep.outputFile={out}",
        "-Dmdep.includeScope=runtime",
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError as e:
        raise ElleResolveError(f"Elle {version}: `mvn` is not installed; it resolves Elle") from e
    except subprocess.TimeoutExpired as e:
        raise ElleResolveError(
            f"Elle {version} could not be resolved from {urls}: mvn took over {timeout_s:.0f}s"
        ) from e
    if proc.returncode != 0:
        raise ElleResolveError(
            f"Elle {version} could not be resolved from {urls}: "
            f"{_mvn_error(proc.stdout + proc.stderr)}"
        )


def _mvn_error(output: str) -> str:
    """mvn's first informative ``[ERROR]`` line, on one line."""
    for line in output.splitlines():
        line = re.sub(r"\x1b\[[0-9;]*m", "", line).strip()
        if line.startswith("[ERROR]") and len(line) > len("[ERROR] "):
            line = line.removeprefix("[ERROR] ").removesuffix(" -> [Help 1]")
            return line[:600]
    tail = " ".join(output.split())
    return tail[-600:] or "no output"


def describe(jars: list[str], version: str = ELLE_VERSION) -> str:
    """One line for the CLI: version, jar count, size, where the list is cached."""
    size = sum(Path(j).stat().st_size for j in jars)
    return (
        f"elle {version}: {len(jars)} jars, {size / 1e6:.1f} MB "
        f"(classpath in {cache_dir(version) / 'classpath.txt'})"
    )
