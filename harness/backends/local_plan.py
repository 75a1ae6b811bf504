"""Pure planning for the local backend: slot, names and addresses.

Everything the local backend will create is decided here before anything is
touched, and the whole plan is written to ``cluster.json`` first; teardown
then removes whatever of the plan exists, which is what makes ``cluster down``
work after a SIGKILL at any point of ``cluster up``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kafka_chaos.harness.backends import guard_routes
from kafka_chaos.harness.errors import ConfigError, HarnessError

SUBNET_PREFIX = "10.251"
MIN_SLOT = 1
MAX_SLOT = 250
MAX_NODES = 9
FIRST_HOST = 10  # node i gets .<FIRST_HOST + i>


@dataclass(frozen=True)
class LocalNodePlan:
    name: str
    node_id: int
    namespace: str
    veth_host: str  # stays in the root namespace, enslaved to the bridge
    veth_peer: str  # temporary name of the peer before it becomes eth0 in the namespace
    address: str
    root_dir: str


@dataclass(frozen=True)
class LocalPlan:
    cluster: str
    slot: int
    subnet: str
    gateway: str  # the bridge's address; the harness reaches nodes through it
    bridge: str
    nodes: tuple[LocalNodePlan, ...]

    @property
    def route(self) -> str:
        """The unreachable guard route, as ``ip route`` arguments."""
        return f"unreachable {self.subnet} metric {guard_routes.METRIC}"

    @property
    def cluster_root(self) -> str:
        """The cluster's state dir (nodes live in ``<cluster_root>/nodes/<node>``)."""
        return str(Path(self.nodes[0].root_dir).parent.parent)

    @property
    def bridge_alias(self) -> str:
        """Label put on the bridge so a cluster with no cluster.json can still be found.

        It names the state dir too: two KAFKA_CHAOS_HOMEs may hold equal cluster names.
        """
        return f"kafka-chaos:{self.cluster}:{self.cluster_root}"

    def to_state(self) -> dict[str, Any]:
        data = asdict(self)
        data["nodes"] = [asdict(n) for n in self.nodes]
        data["route"] = self.route
        return data

    @classmethod
    def from_state(cls, data: dict[str, Any]) -> LocalPlan:
        return cls(
            cluster=data["cluster"],
            slot=data["slot"],
            subnet=data["subnet"],
            gateway=data["gateway"],
            bridge=data["bridge"],
            nodes=tuple(LocalNodePlan(**n) for n in data["nodes"]),
        )


def subnet_of(slot: int) -> str:
    return f"{SUBNET_PREFIX}.{slot}.0/24"


def node_address(slot: int, index: int) -> str:
    return f"{SUBNET_PREFIX}.{slot}.{FIRST_HOST + index}"


def plan_cluster(name: str, slot: int, nodes: int, cluster_root: Path) -> LocalPlan:
    """Every name and address of cluster ``name`` in ``slot`` with ``nodes`` nodes."""
    if not MIN_SLOT <= slot <= MAX_SLOT:
        raise ConfigError(f"slot {slot} outside {MIN_SLOT}..{MAX_SLOT}")
    if not 1 <= nodes <= MAX_NODES:
        raise ConfigError(f"local backend supports 1..{MAX_NODES} nodes, not {nodes}")
    return LocalPlan(
        cluster=name,
        slot=slot,
        subnet=subnet_of(slot),
        gateway=f"{SUBNET_PREFIX}.{slot}.1",
        bridge=f"kcbr{slot}",
        nodes=tuple(
            LocalNodePlan(
                name=f"n{i}",
                node_id=i,
                namespace=f"kc{slot}-n{i}",
                veth_host=f"kc{slot}v{i}",
                veth_peer=f"kc{slot}p{i}",
                address=node_address(slot, i),
                root_dir=str(cluster_root / "nodes" / f"n{i}"),
            )
            for i in range(1, nodes + 1)
        ),
    )


# A node's leg onto another cluster's bridge (``local.add_leg``) takes the
# names of node slots counted down from MAX_NODES, which a leg's own
# one-node cluster never uses, so the orphan sweep (a plan of MAX_NODES
# nodes) removes legs too; its address is .<LEG_HOST + own slot % 50> there.
LEG_HOST = 200


def leg_names(slot: int, k: int) -> tuple[str, str, str]:
    """(host veth, peer veth, interface in the namespace) of leg ``k`` of slot ``slot``."""
    index = MAX_NODES - k
    return f"kc{slot}v{index}", f"kc{slot}p{index}", f"eth{k + 1}"


def leg_address(onto_slot: int, own_slot: int) -> str:
    return f"{SUBNET_PREFIX}.{onto_slot}.{LEG_HOST + own_slot % 50}"


def choose_slot(used: Iterable[int]) -> int:
    """The lowest slot not in ``used``."""
    taken = set(used)
    for slot in range(MIN_SLOT, MAX_SLOT + 1):
        if slot not in taken:
            return slot
    raise HarnessError(
        f"all local cluster slots {MIN_SLOT}..{MAX_SLOT} are in use; "
        "remove clusters with `kafka-chaos cluster down`"
    )


def slots_from_states(states: Iterable[dict[str, Any]]) -> set[int]:
    """Slots claimed by saved ``cluster.json`` documents of the local backend."""
    slots = set()
    for state in states:
        if state.get("backend") == "local":
            slot = state.get("backend_state", {}).get("slot")
            if isinstance(slot, int):
                slots.add(slot)
    return slots


def slots_from_links(link_names: Iterable[str]) -> set[int]:
    """Slots whose bridge ``kcbr<slot>`` exists on the host, whoever made it."""
    slots = set()
    for link in link_names:
        if link.startswith("kcbr") and link[4:].isdigit():
            slots.add(int(link[4:]))
    return slots


def slots_from_namespaces(namespaces: Iterable[str]) -> set[int]:
    """Slots with a ``kc<slot>-n<i>`` namespace on the host."""
    slots = set()
    for ns in namespaces:
        head, sep, _ = ns.partition("-n")
        if sep and head.startswith("kc") and head[2:].isdigit():
            slots.add(int(head[2:]))
    return slots


def slots_from_routes(route_lines: Iterable[str]) -> set[int]:
    """Slots whose 10.251.<slot>.0/24 has any route (guard or live) on the host."""
    slots = set()
    for line in route_lines:
        for word in line.split():
            parts = word.split(".")
            if (
                len(parts) == 4
                and f"{parts[0]}.{parts[1]}" == SUBNET_PREFIX
                and parts[3] == "0/24"
                and parts[2].isdigit()
            ):
                slots.add(int(parts[2]))
    return slots
