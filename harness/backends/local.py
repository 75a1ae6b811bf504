"""The local backend: each node is a network namespace on this machine.

Node ``n<i>`` of the cluster in slot ``s`` is namespace ``kc<s>-n<i>`` with
address 10.251.<s>.<10+i>, a veth into bridge ``kcbr<s>`` (10.251.<s>.1,
through which the harness reaches it) and its own sshd.  Nodes share the
filesystem and PID namespace with the host, so every node has its own
root_dir and teardown ends processes on the host by pid, which keeps working
when a node is partitioned or paused.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from kafka_chaos.harness import lazyfs, tmpfs_disk
from kafka_chaos.harness.backends import guard_routes
from kafka_chaos.harness.backends import local_net as net
from kafka_chaos.harness.backends.hostcmd import host_run
from kafka_chaos.harness.backends.keys import (
    generate_keypair,
    known_hosts_line,
    public_key,
    write_known_hosts,
)
from kafka_chaos.harness.backends.local_plan import (
    MAX_NODES,
    LocalPlan,
    choose_slot,
    leg_address,
    leg_names,
    plan_cluster,
    slots_from_links,
    slots_from_namespaces,
    slots_from_routes,
    slots_from_states,
)
from kafka_chaos.harness.backends.local_sshd import (
    SSHD,
    config_path,
    host_key_path,
    render_sshd_config,
    start_sshd,
)
from kafka_chaos.harness.backends.procs import owned_pids_from_files, terminate
from kafka_chaos.harness.backends.verify import check_mesh, wait_reachable
from kafka_chaos.harness.cluster import Cluster, cluster_dir, home
from kafka_chaos.harness.errors import HarnessError, PrivilegeError
from kafka_chaos.harness.node import Node, SSHTarget
from kafka_chaos.harness.spec import ClusterSpec

log = logging.getLogger(__name__)

NODE_SUBDIRS = ("run", "data", "logs", "config")
SLOT_LOCK_TIMEOUT_S = 60.0
SSH_READY_TIMEOUT_S = 30.0
MACHINE_SLOT_LOCK = Path("/run/kafka-chaos-slots.lock")


def require_root() -> None:
    if os.geteuid() != 0:
        raise PrivilegeError(
            "the local backend needs root (network namespaces, bridges, iptables); "
            "run as root or use --backend ssh|vagrant"
        )


def check_prerequisites() -> None:
    """Fail early, naming exactly what this machine lacks for the local backend."""
    require_root()
    for args, what in (
        (["ip", "netns", "list"], "network namespaces (`ip netns list`)"),
        (["iptables", "-S", "FORWARD"], "iptables (`iptables -S FORWARD`)"),
    ):
        try:
            host_run(args, timeout=10)
        except HarnessError as e:
            raise PrivilegeError(f"the local backend needs {what}: {e}") from e
    if not Path(SSHD).exists():
        raise HarnessError(f"{SSHD} is missing; install it with `apt-get install openssh-server`")
    for tool, package in (("java", "openjdk-17-jre-headless"), ("ssh-keygen", "openssh-client")):
        if shutil.which(tool) is None:
            raise HarnessError(f"`{tool}` is not on PATH; install {package}")


def create(spec: ClusterSpec) -> Cluster:
    """Provision ``spec.nodes`` namespaces with sshd; no Kafka yet."""
    check_prerequisites()
    if not 1 <= spec.nodes <= MAX_NODES:
        raise HarnessError(f"the local backend supports 1..{MAX_NODES} nodes, not {spec.nodes}")
    binary = _lazyfs_binary() if spec.disk == "lazyfs" else None
    cluster, plan = _claim_slot(spec)
    try:
        _build(cluster, plan, binary)
        wait_reachable(cluster, SSH_READY_TIMEOUT_S)
        _ensure_mesh(cluster, plan)
    except BaseException:
        log.error("cluster %s: creation failed; removing what was created", spec.name)
        cluster.close()
        try:
            destroy(cluster)
        except HarnessError as e:
            log.error("cluster %s: cleanup after failed creation incomplete: %s", spec.name, e)
        raise
    _record(cluster, "ready")
    return cluster


def _lazyfs_binary() -> Path:
    """The lazyfs binary, or one line saying why broker data cannot go on lazyfs here."""
    from kafka_chaos.harness.lazyfs_build import binary

    if not Path("/dev/fuse").exists():
        raise HarnessError("--disk lazyfs needs /dev/fuse (FUSE), which this machine lacks")
    if shutil.which("fusermount3") is None:
        raise HarnessError("--disk lazyfs needs fusermount3: apt-get install fuse3")
    return binary()


def _claim_slot(spec: ClusterSpec) -> tuple[Cluster, LocalPlan]:
    """Pick a free slot, save cluster.json, add the guard route - all under the slot lock.

    The locks plus the host-resource scan keep two concurrent ``up``s (even
    with different KAFKA_CHAOS_HOMEs) from taking the same subnet.
    """
    with _slot_lock():
        slot = choose_slot(_used_slots())
        root = cluster_dir(spec.name)
        plan = plan_cluster(spec.name, slot, spec.nodes, root)
        state = root / "id_ed25519"
        nodes = [
            Node(
                name=n.name,
                node_id=n.node_id,
                address=n.address,
                ssh=SSHTarget(
                    host=n.address,
                    key_file=str(state),
                    known_hosts=str(root / "known_hosts"),
                ),
                root_dir=n.root_dir,
            )
            for n in plan.nodes
        ]
        cluster = Cluster(
            name=spec.name,
            backend="local",
            nodes=nodes,
            kafka_version=spec.kafka_version,
            mode=spec.mode,
            backend_state={"slot": slot, "plan": plan.to_state(), "progress": []},
        )
        cluster.backend_state["disk"] = spec.disk
        if spec.disk == "lazyfs":  # recorded before any mount is made
            cluster.backend_state["lazyfs"] = {n.name: lazyfs.record(n.root_dir) for n in nodes}
        if spec.disk == "tmpfs":  # recorded before any mount is made, as lazyfs's are
            mb = tmpfs_disk.size_mb()
            cluster.backend_state["tmpfs"] = {
                n.name: tmpfs_disk.record(n.root_dir, mb) for n in nodes
            }
        _record(cluster, "planned")
        guard_routes.add(plan.subnet)
        _record(cluster, "guard-route")
    return cluster, plan


@contextmanager
def _slot_lock() -> Iterator[None]:
    """Hold ``<home>/slots.lock`` and a machine-wide twin in /run.

    The home lock serialises ``up``s sharing a KAFKA_CHAOS_HOME; the /run lock
    covers homes that differ, since subnets are a machine-wide resource.
    """
    home().mkdir(parents=True, exist_ok=True)
    with _flock(home() / "slots.lock"), _flock(MACHINE_SLOT_LOCK):
        yield


@contextmanager
def _flock(path: Path) -> Iterator[None]:
    with open(path, "a+") as f:
        deadline = time.monotonic() + SLOT_LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise HarnessError(
                        f"{path}: held by another `cluster up` for {SLOT_LOCK_TIMEOUT_S:.0f}s"
                    ) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _used_slots() -> set[int]:
    states = []
    for path in (home() / "clusters").glob("*/cluster.json"):
        try:
            states.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            log.warning("%s: unreadable, ignoring for slot choice", path)
    return (
        slots_from_states(states)
        | slots_from_links(net.links())
        | slots_from_namespaces(net.namespaces())
        | slots_from_routes(net.route_lines())
    )


def _record(cluster: Cluster, step: str) -> None:
    """Note progress in cluster.json so a crash leaves an honest record."""
    cluster.backend_state.setdefault("progress", []).append(step)
    cluster.save()


def _build(cluster: Cluster, plan: LocalPlan, lazyfs_binary: Path | None = None) -> None:
    net.add_bridge(plan)
    _record(cluster, "bridge")
    for node in plan.nodes:
        net.add_node_netns(plan, node)
        _record(cluster, f"netns:{node.name}")
    key = generate_keypair(cluster.state_dir / "id_ed25519", f"kafka-chaos:{cluster.name}")
    authorized = cluster.state_dir / "authorized_keys"
    authorized.write_text(public_key(key) + "\n")
    entries = []
    for node in plan.nodes:
        for sub in NODE_SUBDIRS:
            Path(node.root_dir, sub).mkdir(parents=True, exist_ok=True)
        host_key = generate_keypair(host_key_path(node), f"kafka-chaos:{cluster.name}:{node.name}")
        config_path(node).write_text(render_sshd_config(node, str(authorized)))
        entries.append(known_hosts_line(node.address, 22, public_key(host_key)))
    write_known_hosts(cluster.state_dir / "known_hosts", entries)
    # Before the sshds: the host's mounts are private, a namespace sees only
    # those that existed when it was made.
    mounts = lazyfs.records(cluster.backend_state)
    if mounts and lazyfs_binary is not None:
        lazyfs.mount_all(list(mounts.values()), lazyfs_binary)
        _record(cluster, "lazyfs")
    for rec in tmpfs_disk.records(cluster.backend_state).values():
        tmpfs_disk.mount(rec)
    if tmpfs_disk.records(cluster.backend_state):
        _record(cluster, "tmpfs")
    for node in plan.nodes:
        start_sshd(node)
        _record(cluster, f"sshd:{node.name}")


def _ensure_mesh(cluster: Cluster, plan: LocalPlan) -> None:
    """Node-to-node TCP must work; if the host's FORWARD chain blocks our bridge, open it.

    Nothing global is touched: the one rule added accepts only traffic from
    and to this cluster's bridge, and carries the cluster's tag for teardown.
    """
    try:
        check_mesh(cluster)
    except HarnessError as e:
        if not net.bridged_traffic_filtered():
            raise
        log.warning("cluster %s: %s; accepting bridged traffic of %s", cluster.name, e, plan.bridge)
        net.allow_bridge_forward(plan, _tag(cluster.name))
        _record(cluster, "iptables-forward")
        check_mesh(cluster)


def add_leg(cluster: Cluster, onto: Cluster) -> str:
    """Give ``cluster``'s one node an interface on ``onto``'s bridge; its address there.

    What a MirrorMaker node needs: both data centres' brokers on their own
    subnets.  Recorded in cluster.json before it is made, so ``cluster down``
    removes it even after a crash (the orphan sweep finds it by name too).
    """
    if cluster.backend != "local" or onto.backend != "local" or len(cluster.nodes) != 1:
        raise HarnessError("a leg joins a one-node local cluster to another local cluster")
    plan = LocalPlan.from_state(cluster.backend_state["plan"])
    onto_plan = LocalPlan.from_state(onto.backend_state["plan"])
    legs = cluster.backend_state.setdefault("legs", [])
    leg = next((x for x in legs if x["onto"] == onto.name), None)
    if leg is None:
        veth_host, veth_peer, ifname = leg_names(plan.slot, len(legs))
        leg = {
            "onto": onto.name,
            "bridge": onto_plan.bridge,
            "veth_host": veth_host,
            "veth_peer": veth_peer,
            "ifname": ifname,
            "address": leg_address(onto_plan.slot, plan.slot),
        }
        legs.append(leg)
        _record(cluster, f"leg:{onto.name}")
    net.add_leg(
        plan.nodes[0].namespace, leg["veth_host"], leg["veth_peer"], leg["ifname"],
        leg["bridge"], leg["address"],
    )  # fmt: skip
    return str(leg["address"])


def destroy(cluster: Cluster) -> list[str]:
    """Remove everything of ``cluster`` that exists; safe to repeat and after a crash.

    Steps are individually guarded; the cluster dir (our record) and finally the
    guard route are only removed once everything before them succeeded.
    """
    require_root()
    plan = LocalPlan.from_state(cluster.backend_state["plan"])
    removed = _teardown(plan, cluster.state_dir)
    for leg in cluster.backend_state.get("legs", []):  # gone with the namespace, mostly
        if net.delete_link(leg["veth_host"]):
            removed.append(f"leg {leg['veth_host']}")
    return removed


def find_orphan(name: str) -> LocalPlan | None:
    """Rebuild the plan of a cluster whose cluster.json is gone, from its bridge alias."""
    links = net.links()
    for slot in sorted(slots_from_links(links)):
        plan = plan_cluster(name, slot, MAX_NODES, cluster_dir(name))
        if links[plan.bridge].get("ifalias") == plan.bridge_alias:
            return plan
    return None


def destroy_orphan(name: str) -> list[str]:
    plan = find_orphan(name)
    return _teardown(plan, cluster_dir(name)) if plan else []


def _teardown(plan: LocalPlan, state_dir: Path) -> list[str]:
    removed: list[str] = []
    errors: list[str] = []

    def step(what: str, fn: Callable[[], object]) -> None:
        try:
            result = fn()
        except (HarnessError, OSError) as e:
            errors.append(f"{what}: {e}")
            return
        if isinstance(result, list):
            removed.extend(result)
        elif result:
            removed.append(what)

    step("processes", lambda: _stop_processes(plan))
    # lazyfs's own process ended above (its pid file is in run/); a mount it
    # left (SIGKILLed: "transport endpoint is not connected") goes here, and
    # so do the tmpfs mounts of --disk tmpfs (umount -l, after fusermount3 fails).
    step("lazyfs and tmpfs mounts", lambda: lazyfs.unmount_below(plan.cluster_root))
    for node in plan.nodes:
        step(f"namespace {node.namespace}", lambda ns=node.namespace: net.delete_namespace(ns))
    for node in plan.nodes:
        step(f"veth {node.veth_host}", lambda v=node.veth_host: net.delete_link(v))
        step(f"veth {node.veth_peer}", lambda v=node.veth_peer: net.delete_link(v))
    step(f"bridge {plan.bridge}", lambda: net.delete_link(plan.bridge))
    step("iptables rules", lambda: net.delete_tagged_rules(_tag(plan.cluster), plan.bridge))
    if not errors:
        step(f"cluster dir {state_dir}", lambda: _remove_dir(state_dir))
    if not errors:
        step(f"route {plan.route}", lambda: guard_routes.remove(plan.subnet))
    if errors:
        raise HarnessError(
            f"cluster {plan.cluster}: teardown incomplete ({'; '.join(errors)}); "
            f"already removed: {', '.join(removed) or 'nothing'}; rerun `cluster down`"
        )
    return removed


def _stop_processes(plan: LocalPlan) -> list[str]:
    """End the nodes' processes: pid-file owners first, then anything left in their namespaces.

    Pid files are the primary record (kafka, zookeeper, sshd...).  A process
    whose pid file was never written - the harness died between spawn and
    write - still lives in one of our namespaces, which only this cluster uses.
    """
    removed = []
    owned: dict[int, Path] = {}
    for node in plan.nodes:
        owned.update(owned_pids_from_files(Path(node.root_dir) / "run", node.root_dir))
    # lazyfs last: a broker stopping cleanly still writes to the mount it serves
    fs = {pid: f for pid, f in owned.items() if f.name == "lazyfs.pid"}
    killed = terminate([p for p in owned if p not in fs]) + terminate(fs)
    for pid, pid_file in owned.items():
        how = "SIGKILL" if pid in killed else "SIGTERM"
        removed.append(f"process {pid} ({pid_file.name}, {how})")
    present = net.namespaces()
    leftover = {
        pid: node.namespace
        for node in plan.nodes
        if node.namespace in present
        for pid in net.namespace_pids(node.namespace)
    }
    killed = terminate(leftover, grace_s=3.0)
    for pid, ns in leftover.items():
        how = "SIGKILL" if pid in killed else "SIGTERM"
        removed.append(f"process {pid} (in namespace {ns}, {how})")
    return removed


def _remove_dir(path: Path) -> bool:
    if not path.exists():
        return False
    shutil.rmtree(path)
    return True


def _tag(name: str) -> str:
    return f"kafka-chaos:{name}"
