"""Kafka distributions: assembled from Maven Central, cached, shipped to nodes.

There is no tarball download here: a distribution is the runtime classpath of
``kafka_2.13`` plus a logging backend, resolved by ``mvn`` from a throw-away
pom.  The Kafka tools (``kafka-tools``: VerifiableProducer, LeaderElection,
and in 4.x DumpLogSegments) get a classpath of their own under ``tools/``:
they are a separate JVM, so a tools release that differs from the broker's
(when Maven lacks the exact one) can never leak into the broker.

Cache layout, ``${KAFKA_CHAOS_CACHE:-~/.cache/kafka-chaos}/dist/<version>/``::

    libs/*.jar              broker classpath
    tools/*.jar             tools classpath (absent: use libs/)
    kafka-<version>.tar.gz  the two above, packed once, what nodes receive
    MANIFEST.json           version, sha256 of the tarball, tools version

Nodes get the tarball over SFTP only when their installed copy's checksum
differs; local nodes share the host's filesystem, so the first upload serves
them all, and the temp-name + atomic-rename install makes racing nodes safe.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from kafka_chaos.harness import cache
from kafka_chaos.harness.errors import ConfigError, KafkaFetchError
from kafka_chaos.harness.node import Node, quote

log = logging.getLogger(__name__)

KAFKA_GROUP = "org.apache.kafka"
NODE_DIST_ROOT = "/opt/kafka-chaos/dist"
MVN_TIMEOUT_S = 900.0
UPLOAD_TIMEOUT_S = 300.0

# Logging backends: Kafka's Maven artifacts ship none (the tarball does).
RELOAD4J_VERSION = "1.2.25"
SLF4J1_VERSION = "1.7.36"
LOG4J2_VERSION = "2.25.5"
SLF4J2_VERSION = "2.0.17"

# Maven Central lacks some kafka-tools releases (4.4.0 at the time of
# writing); the tools only talk to brokers over the wire protocol or read
# segment files, so the nearest older release of the same major serves.
TOOLS_FALLBACK = {"4.4.0": "4.3.1"}

Coordinate = tuple[str, str, str]  # group, artifact, version


def cache_root() -> Path:
    """Where distributions are cached; override with ``KAFKA_CHAOS_CACHE``."""
    return cache.cache_root("dist")


def major(version: str) -> int:
    """The major number of a Kafka version, rejecting malformed versions."""
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", version)
    if not m:
        raise ConfigError(f"kafka version {version!r} is not of the form MAJOR.MINOR.PATCH")
    return int(m.group(1))


def logging_dependencies(version: str) -> list[Coordinate]:
    """The SLF4J binding and backend matching the Kafka release line.

    3.x logs through SLF4J 1 to log4j 1 (reload4j); 4.x moved to log4j2 and
    we pin log4j-api/core to the binding's version so they always match.
    """
    if major(version) < 4:
        return [
            ("ch.qos.reload4j", "reload4j", RELOAD4J_VERSION),
            ("org.slf4j", "slf4j-reload4j", SLF4J1_VERSION),
        ]
    return [
        ("org.slf4j", "slf4j-api", SLF4J2_VERSION),
        ("org.apache.logging.log4j", "log4j-api", LOG4J2_VERSION),
        ("org.apache.logging.log4j", "log4j-core", LOG4J2_VERSION),
        ("org.apache.logging.log4j", "log4j-slf4j2-impl", LOG4J2_VERSION),
    ]


def broker_dependencies(version: str) -> list[Coordinate]:
    """Direct dependencies of the broker classpath (transitives follow).

    Logging comes first: Maven's nearest-first-declared rule then makes our
    pinned SLF4J/log4j versions win over the ones Kafka pulls in.
    """
    return [*logging_dependencies(version), (KAFKA_GROUP, "kafka_2.13", version)]


def tools_dependencies(version: str, tools_version: str) -> list[Coordinate]:
    return [*logging_dependencies(version), (KAFKA_GROUP, "kafka-tools", tools_version)]


def render_pom(dependencies: list[Coordinate]) -> str:
    """A minimal pom whose only purpose is resolving ``dependencies``."""
    deps = "\n".join(
        "    <dependency><groupId>{}</groupId><artifactId>{}</artifactId>"
        "<version>{}</version></dependency>".format(*(escape(x) for x in c))
        for c in dependencies
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>kafka-chaos</groupId><artifactId>dist</artifactId>"
        "<version>1</version><packaging>pom</packaging>\n"
        f"  <dependencies>\n{deps}\n  </dependencies>\n"
        "</project>\n"
    )


@dataclass(frozen=True)
class Distribution:
    """A cached distribution on the harness host."""

    version: str
    root: Path
    sha256: str
    tools_version: str | None  # None: tools live in libs/ (official tarball)

    @property
    def tarball(self) -> Path:
        return self.root / f"kafka-{self.version}.tar.gz"

    @property
    def sha12(self) -> str:
        return self.sha256[:12]

    def node_dir(self) -> str:
        """Where this distribution lives on a node."""
        return f"{NODE_DIST_ROOT}/{self.version}-{self.sha12}"

    def node_classpath(self, tools: bool = False) -> str:
        """The JVM ``-cp`` value on a node (the shell must not glob it)."""
        return f"{self.node_dir()}/{self.jars_dir(tools)}/*"

    def host_classpath(self, tools: bool = False) -> str:
        """The same jars in this host's cache, for a tool run here."""
        return f"{self.root / self.jars_dir(tools)}/*"

    def jars_dir(self, tools: bool) -> str:
        """``tools`` when a tool's jars were resolved apart from the broker's."""
        return "tools" if tools and self.tools_version else "libs"


def _manifest_path(root: Path) -> Path:
    return root / "MANIFEST.json"


def load_cached(version: str, root: Path | None = None) -> Distribution | None:
    """The cached distribution for ``version``, or None if not fetched yet."""
    root = root or cache_root() / version
    try:
        data = json.loads(_manifest_path(root).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    dist = Distribution(data["version"], root, data["sha256"], data.get("tools_version"))
    return dist if dist.tarball.exists() else None


def list_cached() -> list[Distribution]:
    root = cache_root()
    if not root.is_dir():
        return []
    found = (load_cached(p.name, p) for p in sorted(root.iterdir()) if p.is_dir())
    return [d for d in found if d is not None]


def fetch(version: str, timeout_s: float = MVN_TIMEOUT_S) -> Distribution:
    """Return the cached distribution for ``version``, assembling it if needed."""

    def build(work: Path) -> Distribution:
        _resolve(broker_dependencies(version), work / "libs", version, timeout_s)
        tools_version = _resolve_tools(version, work / "tools", timeout_s)
        return _seal(work, cache_root() / version, version, tools_version)

    return _cached_or_built(version, version, build)


def fetch_mirror(version: str, timeout_s: float = MVN_TIMEOUT_S) -> Distribution:
    """MirrorMaker 2 of Kafka ``version`` (``connect-mirror`` and its closure), cached apart.

    A JVM of its own on its own node, so its jars never meet the broker's;
    cached as ``mirror-<version>``, its ``tools_version`` the release used
    (Maven Central lacks some: the nearest older one of the line serves, as
    for kafka-tools).
    """
    label = f"mirror-{version}"

    def build(work: Path) -> Distribution:
        errors = []
        for mv in [v for v in (version, TOOLS_FALLBACK.get(version)) if v]:
            deps = [*logging_dependencies(version), (KAFKA_GROUP, "connect-mirror", mv)]
            try:
                _resolve(deps, work / "libs", mv, timeout_s)
            except KafkaFetchError as e:
                shutil.rmtree(work / "libs", ignore_errors=True)
                errors.append(str(e))
                continue
            if mv != version:
                log.warning("connect-mirror %s not on Maven Central; using %s", version, mv)
            return _seal(work, cache_root() / label, label, mv)
        raise KafkaFetchError(f"MirrorMaker 2 for Kafka {version}: {'; '.join(errors)}")

    return _cached_or_built(version, label, build)


def _cached_or_built(
    version: str, label: str, build: Callable[[Path], Distribution]
) -> Distribution:
    """The cached ``label`` of Kafka ``version``, else ``build`` in a scratch dir beside it."""
    major(version)
    cached = load_cached(label)
    if cached:
        return cached
    final = cache_root() / label
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{label}-", dir=final.parent))
    try:
        return build(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _resolve_tools(version: str, dest: Path, timeout_s: float) -> str | None:
    """Resolve kafka-tools; a missing tools release is a warning, not fatal."""
    override = os.environ.get("KAFKA_CHAOS_TOOLS_VERSION")
    candidates = [override] if override else [version, TOOLS_FALLBACK.get(version)]
    errors = []
    for tv in [c for c in candidates if c]:
        try:
            _resolve(tools_dependencies(version, tv), dest, tv, timeout_s)
            if tv != version:
                log.warning("kafka-tools %s not on Maven Central; using %s", version, tv)
            return tv
        except KafkaFetchError as e:
            shutil.rmtree(dest, ignore_errors=True)
            errors.append(str(e))
    log.warning("no kafka-tools for %s; tools unavailable: %s", version, "; ".join(errors))
    return None


def _resolve(deps: list[Coordinate], dest: Path, version: str, timeout_s: float) -> None:
    """Copy the runtime closure of ``deps`` into ``dest`` with ``mvn``."""
    with tempfile.TemporaryDirectory(prefix="kafka-chaos-pom-") as tmp:
        Path(tmp, "pom.xml").write_text(render_pom(deps))
        cmd = [
            "mvn",
            "-q",
            "-B",
            "-f",
            str(Path(tmp, "pom.xml")),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={dest}",
            "-DincludeScope=runtime",
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except FileNotFoundError as e:
            raise KafkaFetchError("`mvn` is not installed; it assembles Kafka") from e
        except subprocess.TimeoutExpired as e:
            raise KafkaFetchError(f"Kafka {version}: mvn took over {timeout_s:.0f}s") from e
    if proc.returncode != 0:
        raise KafkaFetchError(
            f"Kafka {version}: Maven could not resolve it: {_mvn_error(proc.stdout + proc.stderr)}"
        )


def _mvn_error(output: str) -> str:
    """The informative part of mvn's output: its first [ERROR] line."""
    for line in output.splitlines():
        line = re.sub(r"\x1b\[[0-9;]*m", "", line).strip()
        if line.startswith("[ERROR]") and len(line) > len("[ERROR] "):
            return line.removeprefix("[ERROR] ")[:600]
    return output.strip()[-600:] or "no output"


def _seal(work: Path, final: Path, version: str, tools_version: str | None) -> Distribution:
    """Pack the tarball, write the manifest, and move ``work`` into place."""
    tarball = work / f"kafka-{version}.tar.gz"
    _pack(work, [d for d in ("libs", "tools") if (work / d).is_dir()], tarball)
    sha = sha256_file(tarball)
    manifest = {"version": version, "sha256": sha, "tools_version": tools_version}
    _manifest_path(work).write_text(json.dumps(manifest, indent=2) + "\n")
    if final.exists():  # a concurrent fetch won; keep its copy
        found = load_cached(version, final)
        if found:
            return found
        shutil.rmtree(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    work.rename(final)
    return Distribution(version, final, sha, tools_version)


def _pack(base: Path, subdirs: list[str], out: Path) -> None:
    """A reproducible tar.gz: sorted names, fixed times and owners, bare gzip header."""

    def normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        return info

    with (
        open(out, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=1) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
        for sub in subdirs:
            for path in sorted((base / sub).rglob("*")):
                tar.add(path, path.relative_to(base).as_posix(), False, filter=normalise)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def from_tarball(path: str | Path) -> Distribution:
    """Use an official Kafka tarball's ``libs/`` (tools included there)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"kafka_tarball {path}: no such file")
    sha = sha256_file(path)
    root = cache_root() / f"tarball-{sha[:12]}"
    existing = _load_any(root)
    if existing:
        return existing
    root.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".tarball-", dir=root.parent))
    try:
        version = _extract_libs(path, work / "libs")
        return _seal(work, root, version, None)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _load_any(root: Path) -> Distribution | None:
    try:
        version = json.loads(_manifest_path(root).read_text())["version"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return None
    return load_cached(version, root)


def _extract_libs(tarball: Path, dest: Path) -> str:
    """Copy ``*/libs/*.jar`` out of an official tarball; return its version."""
    dest.mkdir(parents=True)
    version = None
    try:
        with tarfile.open(tarball) as tar:
            for member in tar:
                parts = member.name.split("/")
                if len(parts) == 3 and parts[1] == "libs" and parts[2].endswith(".jar"):
                    src = tar.extractfile(member)
                    if src is None:
                        continue
                    with src, open(dest / parts[2], "wb") as out:
                        shutil.copyfileobj(src, out)
                    m = re.fullmatch(r"kafka_2\.\d+-(\d+\.\d+\.\d+)\.jar", parts[2])
                    version = m.group(1) if m else version
    except tarfile.TarError as e:
        raise ConfigError(f"kafka_tarball {tarball}: not a readable tarball: {e}") from e
    if version is None:
        raise ConfigError(f"kafka_tarball {tarball}: no libs/kafka_2.*-<version>.jar inside")
    return version


def for_spec(kafka_version: str, kafka_tarball: str | None) -> Distribution:
    """The distribution a cluster spec asks for (tarball wins over Maven)."""
    if kafka_tarball:
        dist = from_tarball(kafka_tarball)
        if dist.version != kafka_version:
            raise ConfigError(
                f"kafka_tarball {kafka_tarball} holds Kafka {dist.version}, "
                f"but kafka_version is {kafka_version}"
            )
        return dist
    return fetch(kafka_version)


def install(node: Node, dist: Distribution, timeout_s: float = UPLOAD_TIMEOUT_S) -> str:
    """Make ``dist`` present on ``node``; return its directory there.

    The marker file holds the tarball's sha256; a node whose marker matches is
    left alone.  Otherwise upload to a unique temp name, extract beside the
    final directory and rename atomically (``mv -T`` refuses to replace a
    non-empty directory, so a racing installer simply discards its copy).
    """
    target = dist.node_dir()
    marker = f"{target}/.sha256"
    have = node.run(f"cat {quote(marker)} 2>/dev/null || true", timeout=30).stdout.strip()
    if have == dist.sha256:
        return target
    tmp = f"{NODE_DIST_ROOT}/.tmp-{dist.sha12}-{os.urandom(4).hex()}"
    node.run(f"mkdir -p {quote(tmp)}", timeout=30)
    try:
        node.put(dist.tarball, f"{tmp}.tar.gz")
        script = (
            f"set -e; tar -xzf {quote(tmp)}.tar.gz -C {quote(tmp)}; "
            f"echo {dist.sha256} > {quote(tmp)}/.sha256; "
            f"mv -T {quote(tmp)} {quote(target)} 2>/dev/null || true; "
            f'test "$(cat {quote(marker)})" = {dist.sha256} '
            f'|| {{ echo "{target} exists with another checksum; remove it" >&2; exit 1; }}'
        )
        node.run(script, timeout=timeout_s)
    finally:
        node.run(f"rm -rf {quote(tmp)} {quote(tmp)}.tar.gz", timeout=60, check=False)
    log.info("%s: installed Kafka %s at %s", node.name, dist.version, target)
    return target


def describe(dist: Distribution) -> str:
    """One line for ``dist list``."""
    jars = len(list((dist.root / "libs").glob("*.jar")))
    tools = dist.tools_version or "in libs"
    return f"{dist.version}  sha256:{dist.sha12}  {jars} jars  tools:{tools}  {dist.root}"


__all__ = [
    "Distribution",
    "cache_root",
    "fetch",
    "fetch_mirror",
    "for_spec",
    "from_tarball",
    "install",
    "list_cached",
    "load_cached",
    "render_pom",
    "broker_dependencies",
    "tools_dependencies",
    "logging_dependencies",
]
