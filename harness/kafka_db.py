"""Kafka (and ZooKeeper) lifecycle on nodes, over SSH only.

Each broker and ZooKeeper is a ``harness.services.Service``: a launcher
script written by ``configure``, a pid file, and every signal guarded by the
node's ownership tag (see that module).

Harness-side state (the KRaft cluster id, the installed distribution) is
kept in ``<state_dir>/kafka.json``, so a restarted harness formats nothing
twice and finds the tools classpath without re-resolving anything.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import socket
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from kafka_chaos.harness import admin, fan_out, lazyfs, services
from kafka_chaos.harness import kafka_config as kc
from kafka_chaos.harness.cluster import ZOOKEEPER_PORT, Cluster
from kafka_chaos.harness.distribution import Distribution, for_spec, major
from kafka_chaos.harness.distribution import install as install_dist
from kafka_chaos.harness.errors import CommandFailed, HarnessError
from kafka_chaos.harness.node import Node, RunResult, quote
from kafka_chaos.harness.services import Service
from kafka_chaos.harness.spec import ClusterSpec

log = logging.getLogger(__name__)

CLUSTER_STOP_GRACE_S = 10.0
HEALTHY_TIMEOUT_S = 120.0
FORMAT_TIMEOUT_S = 120.0
TOOL_HEAP_MB = 256
# Backstop for one node's share of a whole-cluster step (install, configure,
# format, start, stop, revive): each ends by its own command timeouts well
# within this, and a node still busy after it is reported, not waited for.
NODE_STEP_TIMEOUT_S = 600.0


KAFKA = Service("kafka")
ZOOKEEPER = Service("zookeeper")
STOP_TIMEOUT_S = services.STOP_TIMEOUT_S


def _cluster_services(cluster: Cluster) -> tuple[Service, ...]:
    """The processes each node runs, in start order: ZooKeeper (zk mode only), then Kafka."""
    return (ZOOKEEPER, KAFKA) if cluster.mode == "zk" else (KAFKA,)


# --- public per-node verbs ----------------------------------------------------------


def is_running(node: Node) -> bool:
    return services.running(KAFKA, node)


def start(node: Node) -> bool:
    """Start the broker; False if it was already running."""
    return services.start(KAFKA, node)


def stop(node: Node, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """Clean broker shutdown; False if it was not running."""
    return services.stop(KAFKA, node, timeout_s)


def kill(node: Node) -> bool:
    """SIGKILL the broker (a crash); False if it was not running."""
    return services.kill(KAFKA, node)


def pause(node: Node) -> bool:
    return services.signal(KAFKA, node, "STOP")


def resume(node: Node) -> bool:
    return services.signal(KAFKA, node, "CONT")


def zookeeper_running(node: Node) -> bool:
    return services.running(ZOOKEEPER, node)


def start_zookeeper(node: Node) -> bool:
    return services.start(ZOOKEEPER, node)


def stop_zookeeper(node: Node, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    return services.stop(ZOOKEEPER, node, timeout_s)


def kill_zookeeper(node: Node) -> bool:
    return services.kill(ZOOKEEPER, node)


def pause_zookeeper(node: Node) -> bool:
    return services.signal(ZOOKEEPER, node, "STOP")


def resume_zookeeper(node: Node) -> bool:
    return services.signal(ZOOKEEPER, node, "CONT")


def unfaked_services(cluster: Cluster, node: Node) -> list[str]:
    """The node's running JVMs that do not take their clock from the node's offset file.

    A clock fault on a ``faketime`` node checks this first: a JVM started
    by an older launcher, or on a machine without libfaketime, would ignore
    the offset, and the fault must fail rather than claim a clock moved.
    """
    setting = f"FAKETIME_TIMESTAMP_FILE={kc.faketime_file(node)}"
    lib = Path(kc.FAKETIME_LIB).name
    unfaked = []
    for service in _cluster_services(cluster):
        script = (
            services.owned_pid_script(service, node)
            + f"grep -qF -- {quote(lib)} /proc/$pid/maps || exit 5; "
            + f"tr '\\0' '\\n' < /proc/$pid/environ | grep -qxF -- {quote(setting)} || exit 5; "
            + "exit 0"
        )
        res = node.run(script, timeout=15, check=False)
        if res.exit_code == 5:
            unfaked.append(service.name)
        elif res.exit_code not in (0, 3):  # 3: not running, it reads the file when started
            raise CommandFailed(
                f"{node.name}: checking {service.name}'s clock exited {res.exit_code}: "
                f"{(res.stderr or res.stdout).strip()}"
            )
    return unfaked


def install(node: Node, dist: Distribution) -> str:
    """Ship the distribution to the node if it lacks it; return its directory."""
    return install_dist(node, dist)


def wipe(node: Node) -> None:
    """Delete the node's Kafka and ZooKeeper data; refuses while either runs."""
    for service in (KAFKA, ZOOKEEPER):
        if services.running(service, node):
            raise HarnessError(f"{node.name}: stop {service.name} before wiping its data")
    kafka_dir = quote(node.path("data", "kafka"))
    node.run(
        # on lazyfs the directory is a mount point: empty it, keep it
        f"if mountpoint -q {kafka_dir}; then find {kafka_dir} -mindepth 1 -delete; "
        f"else rm -rf {kafka_dir}; fi; rm -rf {quote(node.path('data', 'zookeeper'))}",
        timeout=60,
    )


def collect_logs(node: Node, dest_dir: str | Path) -> list[Path]:
    """Copy the node's logs/ and config/ into ``dest_dir``; return the files.

    The backend's sshd host keys live in config/ too and are left out: run
    directories get shared, private keys must not travel with them.
    """
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    remote = node.path("run", f"logs-{uuid.uuid4().hex[:8]}.tar.gz")
    # A live broker keeps writing its logs: tar then says "file changed as
    # we read it" and exits 1, though the archive holds what was there.
    packed = node.run(
        f"cd {quote(node.root_dir)} && tar -czf {quote(remote)} --warning=no-file-changed "
        "--exclude='config/ssh_host_*' --exclude='config/sshd_config' "
        "$(ls -d logs config 2>/dev/null)",
        timeout=120,
        check=False,
    )
    if packed.exit_code not in (0, 1):
        raise CommandFailed(
            f"{node.name}: packing the logs exited {packed.exit_code}: {packed.stderr.strip()}"
        )
    try:
        with tempfile.TemporaryDirectory() as tmp:
            local = Path(tmp, "logs.tar.gz")
            node.get(remote, local)
            with tarfile.open(local) as tar:
                tar.extractall(dest, filter="data")
    finally:
        node.run(f"rm -f {quote(remote)}", timeout=30, check=False)
    return sorted(p for p in dest.rglob("*") if p.is_file())


# --- configuration ------------------------------------------------------------------


def node_files(
    cluster: Cluster, node: Node, spec: ClusterSpec, dist: Distribution
) -> dict[str, str]:
    """Every file ``configure`` writes on ``node``, by absolute path."""
    version, nodes = cluster.kafka_version, cluster.nodes
    cfg = node.path("config")
    # Every JVM of a node shares its clock, as on a real machine (ZooKeeper too).
    faketime = kc.faketime_file(node) if cluster.clock == "faketime" else None
    files: dict[str, str] = {
        f"{cfg}/tools-log.properties": kc.logging_config(version, None),
        f"{cfg}/kafka-log.properties": kc.logging_config(version, node.path("logs", "server.log")),
    }
    scale = cluster.time_scale  # slow guests: Kafka's failure detection waits longer
    if cluster.backend_state.get("disk") == "lazyfs":  # the run's own settings win
        spec = replace(spec, broker_config={**lazyfs.BROKER_CONFIG, **spec.broker_config})
    if cluster.mode == "zk":
        files[f"{cfg}/server.properties"] = kc.zk_server_properties(
            node, nodes, spec.broker_config, scale
        )
        files[f"{cfg}/zookeeper.properties"] = kc.zookeeper_properties(node, nodes, scale)
        files[f"{cfg}/zookeeper-log.properties"] = kc.logging_config(
            version, node.path("logs", "zookeeper.log")
        )
        files[node.path("data", "zookeeper", "myid")] = f"{kc.zookeeper_myid(node, nodes)}\n"
        zk_cmd = kc.java_command(
            node.root_dir,
            kc.ZOOKEEPER_HEAP_MB,
            dist.node_classpath(),
            kc.logging_flag(version, f"{cfg}/zookeeper-log.properties"),
            kc.ZOOKEEPER_MAIN,
            [f"{cfg}/zookeeper.properties"],
        )
        files[ZOOKEEPER.launcher(node)] = kc.launcher_script(
            ZOOKEEPER.pid_file(node), zk_cmd, faketime
        )
    else:
        files[f"{cfg}/server.properties"] = kc.kraft_server_properties(
            node, nodes, spec.broker_config, scale, version
        )
    kafka_cmd = kc.java_command(
        node.root_dir,
        spec.broker_heap_mb,
        dist.node_classpath(),
        kc.logging_flag(version, f"{cfg}/kafka-log.properties"),
        kc.KAFKA_MAIN,
        [f"{cfg}/server.properties"],
    )
    files[KAFKA.launcher(node)] = kc.launcher_script(KAFKA.pid_file(node), kafka_cmd, faketime)
    return files


def configure(cluster: Cluster, spec: ClusterSpec, dist: Distribution) -> None:
    """Render and write every node's configs and launchers (running JVMs keep theirs)."""
    fan_out.on_nodes(
        cluster.nodes,
        lambda n: n.write_files(node_files(cluster, n, spec, dist)),
        timeout_s=NODE_STEP_TIMEOUT_S,
        what="writing configs",
    ).values()


def _tool_command(node: Node, dist: Distribution, main: str, args: list[str], tools: bool) -> str:
    """A short-lived Kafka JVM on the node, logging WARN to stderr."""
    return kc.java_command(
        node.root_dir,
        TOOL_HEAP_MB,
        dist.node_classpath(tools=tools),
        kc.logging_flag(dist.version, node.path("config", "tools-log.properties")),
        main,
        args,
    )


def format_storage(node: Node, cluster_id: str, dist: Distribution) -> None:
    """KRaft: format the node's log dir with the cluster id (no-op if formatted)."""
    marker = node.path("data", "kafka", "meta.properties")
    if node.run(f"test -f {quote(marker)}", timeout=15, check=False).ok:
        return
    config = node.path("config", "server.properties")
    args = ["format", "-t", cluster_id, "-c", config, "--ignore-formatted"]
    node.run(
        _tool_command(node, dist, "kafka.tools.StorageTool", args, tools=False),
        timeout=FORMAT_TIMEOUT_S,
    )


def _state_file(cluster: Cluster) -> Path:
    return cluster.state_dir / "kafka.json"


def _load_state(cluster: Cluster) -> dict:
    try:
        return json.loads(_state_file(cluster).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _save_state(cluster: Cluster, **updates: object) -> None:
    state = {**_load_state(cluster), **updates}
    path = _state_file(cluster)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(path)


def new_cluster_id() -> str:
    """A random id as Kafka makes them (base64url of a UUID), never starting with "-".

    ``kafka-storage format -t -abc...`` reads such an id as an option and
    fails; Kafka's own ``Uuid.randomUuid`` redraws those for the same reason.
    """
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def kafka_cluster_id(cluster: Cluster) -> str:
    """The KRaft cluster id, created once and kept with the cluster's state."""
    cid = _load_state(cluster).get("cluster_id")
    if not cid:
        cid = new_cluster_id()
        _save_state(cluster, cluster_id=cid)
    return cid


def installed_distribution(cluster: Cluster) -> Distribution:
    """The distribution ``start_cluster`` installed on this cluster's nodes."""
    d = _load_state(cluster).get("dist")
    if not d:
        raise HarnessError(f"cluster {cluster.name!r} has no Kafka installed; run start_cluster")
    return Distribution(d["version"], Path(d["cache"]), d["sha256"], d.get("tools_version"))


def dump_log_segments_class(version: str) -> str:
    """DumpLogSegments moved from core (Scala) to the tools module in 4.0."""
    if major(version) < 4:
        return "kafka.tools.DumpLogSegments"
    return "org.apache.kafka.tools.DumpLogSegments"


def finalized_features(cluster: Cluster, timeout_s: float = 60.0) -> dict[str, str]:
    """Each feature's finalized level, as ``kafka-features.sh describe`` prints it
    (``{"transaction.version": "2", "metadata.version": "4.4-IV2", ...}``).

    Why: which transaction protocol a Java client speaks depends on the
    cluster's finalized ``transaction.version`` (KIP-890 part 2 needs 2), so a
    transactional run records it beside the versions.
    """
    result = run_tool(
        cluster,
        cluster.nodes[0],
        "org.apache.kafka.tools.FeatureCommand",
        ["--bootstrap-server", cluster.bootstrap_servers(), "describe"],
        timeout_s=timeout_s,
    )
    return parse_features(result.stdout)


def parse_features(text: str) -> dict[str, str]:
    """``Feature: NAME ... FinalizedVersionLevel: LEVEL ...`` lines, as a mapping."""
    out = {}
    for line in text.splitlines():
        fields = dict(re.findall(r"(\w+):\s+(\S+)", line))
        if "Feature" in fields and "FinalizedVersionLevel" in fields:
            out[fields["Feature"]] = fields["FinalizedVersionLevel"]
    return out


def run_tool(
    cluster: Cluster, node: Node, main: str, args: list[str], timeout_s: float = 120.0
) -> RunResult:
    """Run a Kafka tool class (e.g. DumpLogSegments, VerifiableProducer) on ``node``.

    Uses the installed distribution's classpath for that class (``tool_command``);
    non-zero exit raises ``CommandFailed`` with the tool's stderr.
    """
    return node.run(tool_command(cluster, node, main, args), timeout=timeout_s)


def tool_command(cluster: Cluster, node: Node, main: str, args: list[str]) -> str:
    """The shell command ``run_tool`` runs, for callers that pipe its output on the node.

    Scala tools (``kafka.*``, e.g. 3.x's ``kafka.tools.DumpLogSegments``) live
    in the broker's core jar; ``org.apache.kafka.tools.*`` in the tools jars.
    """
    return _tool_command(
        node, installed_distribution(cluster), main, args, tools=in_tools_jars(main)
    )


def in_tools_jars(main: str) -> bool:
    """Whether a tool's class is in the tools jars, not the broker's core jar."""
    return not main.startswith("kafka.")


# --- whole-cluster operations -------------------------------------------------------


def start_cluster(
    cluster: Cluster, spec: ClusterSpec, timeout_s: float = HEALTHY_TIMEOUT_S
) -> None:
    """Install, configure, format and start every node, then wait until healthy.

    Idempotent: when every process already runs only health is checked
    (running brokers keep the config they started with); otherwise a node
    that already has the distribution, storage or a running process is left
    as it is and only what is missing is done.
    """
    kc.validate(cluster.kafka_version, cluster.mode, len(cluster.nodes), spec.broker_heap_mb)
    state = _load_state(cluster)
    if state.get("dist") and all(
        fan_out.on_nodes(
            cluster.nodes,
            _all_running(cluster),
            timeout_s=NODE_STEP_TIMEOUT_S,
            what="checking processes",
        ).values()
    ):
        had = state.get("broker_config", {})
        if had == dict(spec.broker_config):
            wait_healthy(cluster, timeout_s)  # already up: nothing to install, format or start
            return
        # Running brokers keep the config they started with: a run that wants
        # another one (a flush setting) would otherwise silently get the old.
        log.info(
            "cluster %s: restarting its brokers for broker config %s (they run with %s)",
            cluster.name,
            dict(spec.broker_config),
            had,
        )
        stop_cluster(cluster)
    t0 = time.monotonic()
    dist = for_spec(cluster.kafka_version, spec.kafka_tarball)
    # One node first: local nodes share a filesystem, so the rest find it installed.
    install(cluster.nodes[0], dist)
    fan_out.on_nodes(
        cluster.nodes[1:],
        lambda n: install(n, dist),
        timeout_s=NODE_STEP_TIMEOUT_S,
        what="installing Kafka",
    ).values()
    configure(cluster, spec, dist)
    _save_state(
        cluster,
        dist={
            "version": dist.version,
            "sha256": dist.sha256,
            "tools_version": dist.tools_version,
            "cache": str(dist.root),
        },
        broker_config=dict(spec.broker_config),
    )
    t1 = time.monotonic()
    if cluster.mode == "zk":
        fan_out.on_nodes(
            cluster.nodes, start_zookeeper, timeout_s=NODE_STEP_TIMEOUT_S, what="starting ZooKeeper"
        ).values()
        wait_zookeeper(cluster, timeout_s)
    else:
        cid = kafka_cluster_id(cluster)
        fan_out.on_nodes(
            cluster.nodes,
            lambda n: format_storage(n, cid, dist),
            timeout_s=NODE_STEP_TIMEOUT_S,
            what="formatting storage",
        ).values()
    t2 = time.monotonic()
    fan_out.on_nodes(
        cluster.nodes, start, timeout_s=NODE_STEP_TIMEOUT_S, what="starting Kafka"
    ).values()
    wait_healthy(cluster, timeout_s)
    log.info(
        "cluster %s up: install+configure %.1fs, %s %.1fs, brokers healthy %.1fs",
        cluster.name,
        t1 - t0,
        "zookeeper" if cluster.mode == "zk" else "format",
        t2 - t1,
        time.monotonic() - t2,
    )


def _all_running(cluster: Cluster) -> Callable[[Node], bool]:
    return lambda node: all(services.running(s, node) for s in _cluster_services(cluster))


def stop_cluster(cluster: Cluster, timeout_s: float = CLUSTER_STOP_GRACE_S) -> list[str]:
    """Stop every broker, then ZooKeeper; best effort. Returns problems seen.

    ``timeout_s`` is each process's grace before SIGKILL.  It is short on
    purpose: when a whole KRaft cluster stops at once the last brokers lose
    the controller quorum and their controlled shutdown waits forever.
    """
    problems: list[str] = []
    for service in _cluster_services(cluster)[::-1]:  # brokers first
        stopped = fan_out.on_nodes(
            cluster.nodes,
            lambda n, s=service: services.stop(s, n, timeout_s, True),
            timeout_s=NODE_STEP_TIMEOUT_S + timeout_s,
            what=f"stopping {service.name}",
        )
        problems += [str(o.error) for o in stopped.failures()]  # best effort: on to the next
    for p in problems:
        log.warning("stop_cluster %s: %s", cluster.name, p)
    return problems


def recover_cluster(cluster: Cluster, timeout_s: float = HEALTHY_TIMEOUT_S) -> None:
    """Undo process faults: resume paused JVMs, start stopped ones, wait healthy.

    What tests and heal steps call after breaking a cluster on purpose; it
    does not touch network faults (those belong to the nemeses).
    """

    def revive(node: Node) -> None:
        for service in _cluster_services(cluster):
            if services.running(service, node):
                services.signal(service, node, "CONT")
            else:
                services.start(service, node)

    fan_out.on_nodes(
        cluster.nodes, revive, timeout_s=NODE_STEP_TIMEOUT_S, what="reviving processes"
    ).values()
    if cluster.mode == "zk":
        wait_zookeeper(cluster, timeout_s)
    wait_healthy(cluster, timeout_s)


def wait_zookeeper(cluster: Cluster, timeout_s: float) -> None:
    """Until every ZooKeeper answers ``srvr`` as leader or follower."""
    timeout_s *= cluster.time_scale
    deadline = time.monotonic() + timeout_s
    while True:
        modes = {n.name: _zk_mode(n.address) for n in cluster.nodes}
        if all(m in ("leader", "follower", "standalone") for m in modes.values()):
            return
        if time.monotonic() >= deadline:
            raise HarnessError(f"ZooKeeper ensemble not formed within {timeout_s}s: {modes}")
        time.sleep(1.0)


def _zk_mode(address: str) -> str:
    """A ZooKeeper server's role from the ``srvr`` four-letter word, or the error."""
    try:
        with socket.create_connection((address, ZOOKEEPER_PORT), timeout=3) as s:
            s.settimeout(3)
            s.sendall(b"srvr")
            data = b""
            while chunk := s.recv(4096):
                data += chunk
    except OSError as e:
        return f"unreachable ({e})"
    for line in data.decode(errors="replace").splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return "no quorum yet"


def controller_id(cluster: Cluster, timeout_s: float = 10.0) -> int | None:
    """The active controller: the ZK controller, or the KRaft quorum leader.

    KRaft brokers do not expose the quorum leader to clients, so read each
    voter's ``quorum-state`` file and trust the highest epoch that names a
    leader (a partitioned voter may lag behind, never ahead with a leader).
    """
    if cluster.mode == "zk":
        return admin.controller_id(cluster.bootstrap_servers(), timeout_s)

    def quorum_state(node: Node) -> dict:
        path = node.path("data", "kafka", "__cluster_metadata-0", "quorum-state")
        res = node.run(f"cat {quote(path)}", timeout=timeout_s, check=False)
        try:
            return json.loads(res.stdout) if res.ok else {}
        except json.JSONDecodeError:
            return {}

    # A voter that does not answer (its command is tried up to three times) names no leader.
    read = fan_out.on_nodes(
        cluster.nodes, quorum_state, timeout_s=3 * timeout_s, what="reading the quorum state"
    )
    best: tuple[int, int] | None = None
    for outcome in read:
        state = outcome.value or {}
        leader, epoch = state.get("leaderId", -1), state.get("leaderEpoch", -1)
        if leader is not None and leader >= 0 and (best is None or epoch > best[0]):
            best = (epoch, leader)
    return None if best is None else best[1]


def health_problems(cluster: Cluster, topic: str | None, timeout_s: float) -> list[str]:
    """What keeps the cluster from being healthy right now (empty: healthy)."""
    bootstrap = cluster.bootstrap_servers()
    want = {n.node_id for n in cluster.nodes}
    try:
        have = set(admin.broker_ids(bootstrap, timeout_s))
    except admin.AdminError as e:
        return [str(e)]
    problems = []
    if want - have:
        problems.append(f"brokers not registered: {sorted(want - have)}")
    try:
        controller = controller_id(cluster, timeout_s)
    except admin.AdminError as e:
        return [str(e)]
    if controller is None or controller not in have:
        problems.append(f"no live controller (last known: {controller})")
    if topic and not problems:
        try:
            parts = admin.describe_topics(bootstrap, [topic], timeout_s)
        except admin.AdminError as e:
            return [str(e)]
        for p in parts:
            if p.leader is None:
                problems.append(f"{p.topic}-{p.partition}: no leader")
            elif set(p.isr) != set(p.replicas):
                problems.append(f"{p.topic}-{p.partition}: isr {list(p.isr)} of {list(p.replicas)}")
    return problems


def wait_healthy(
    cluster: Cluster, timeout_s: float = HEALTHY_TIMEOUT_S, topic: str | None = None
) -> None:
    """Until all brokers are registered, a controller exists and (with ``topic``)
    every partition of it has a leader and a full ISR."""
    timeout_s *= cluster.time_scale
    deadline = time.monotonic() + timeout_s
    while True:
        problems = health_problems(cluster, topic, timeout_s=min(10.0, timeout_s))
        if not problems:
            return
        if time.monotonic() >= deadline:
            down = [n.name for n in cluster.nodes if not _safe_running(n)]
            extra = f"; broker process down on {down} (see logs/server.log)" if down else ""
            raise HarnessError(
                f"cluster {cluster.name!r} not healthy after {timeout_s}s: "
                f"{'; '.join(problems[:10])}{extra}"
            )
        time.sleep(1.0)


def _safe_running(node: Node) -> bool:
    try:
        return is_running(node)
    except HarnessError:
        return False
