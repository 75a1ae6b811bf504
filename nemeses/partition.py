"""Network partitions: grudge topologies (pure), iptables rules on the nodes, the kinds.

A *grudge* maps each node to the nodes whose traffic it drops.  A node with a
grudge against a peer drops packets from it (INPUT -s) and to it (OUTPUT -d),
so either side's grudge cuts the link both ways; topologies are therefore
reasoned about as undirected connectivity (``sees``).

Rules are only ever added for peer *node* addresses and every rule carries the
comment ``kafka-chaos:<cluster>:<fault id>``: the harness's own address is
never dropped (it must always be able to reach a node to heal it), and healing
deletes exactly the rules the harness added, found by their tag.
"""

from __future__ import annotations

import random
import re
import shlex
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.fan_out import on_nodes
from kafka_chaos.harness.node import Node
from kafka_chaos.nemeses.base import (
    FAULT_STEP_TIMEOUT_S,
    NEMESIS_COMMAND_TIMEOUT_S,
    FaultOp,
    NemesisError,
)
from kafka_chaos.nemeses.kinds import Ctx, FaultKind, Model, Params, Sweep

if TYPE_CHECKING:
    from hypothesis.strategies import DrawFn

Grudge = dict[str, list[str]]

TAG_PREFIX = "kafka-chaos:"
IPTABLES = "iptables -w 5"
_TAG_SAFE = re.compile(r"^[A-Za-z0-9_.-]+$")


# --- topologies (pure) -------------------------------------------------------


def majority(n: int) -> int:
    return n // 2 + 1


def from_components(components: Sequence[Sequence[str]]) -> Grudge:
    """Each node drops every node outside its own component."""
    everyone = [n for comp in components for n in comp]
    grudge: Grudge = {}
    for comp in components:
        for node in comp:
            grudge[node] = sorted(n for n in everyone if n not in comp)
    return grudge


def isolate(nodes: Sequence[str], target: str) -> Grudge:
    """``target`` alone on one side, everyone else on the other."""
    if target not in nodes:
        raise ConfigError(f"isolate: {target!r} is not one of the nodes {list(nodes)}")
    return from_components([[target], [n for n in nodes if n != target]])


def halves(nodes: Sequence[str]) -> Grudge:
    """A minority (the first ``n // 2`` nodes) cut from the majority (the rest)."""
    _need(nodes, 2, "halves")
    cut = len(nodes) // 2
    return from_components([list(nodes[:cut]), list(nodes[cut:])])


def bridge(nodes: Sequence[str]) -> Grudge:
    """Two halves that cannot see each other, joined by one node that sees both."""
    _need(nodes, 3, "bridge")
    mid = (len(nodes) - 1) // 2
    left, hub, right = list(nodes[:mid]), nodes[mid], list(nodes[mid + 1 :])
    grudge: Grudge = {n: sorted(right) for n in left}
    grudge.update({n: sorted(left) for n in right})
    grudge[hub] = []
    return grudge


def majorities_ring(nodes: Sequence[str]) -> Grudge:
    """Every node sees a majority, and no two nodes see the same one.

    Nodes sit on a ring in the given order and see the neighbours within
    ring distance ``majority // 2``.  With three nodes a ring would connect
    everyone, so they form a line instead (a-b-c: {a,b}, {a,b,c}, {b,c}).
    """
    _need(nodes, 3, "majorities-ring")
    n = len(nodes)
    if n == 3:
        a, b, c = nodes
        return {a: [c], b: [], c: [a]}
    reach = majority(n) // 2
    grudge: Grudge = {}
    for i, node in enumerate(nodes):
        grudge[node] = sorted(
            other for j, other in enumerate(nodes) if min((i - j) % n, (j - i) % n) > reach
        )
    return grudge


def topology(
    name: str, nodes: Sequence[str], rng: random.Random, target: str | None = None
) -> Grudge:
    """Build a named topology over the nodes in an order drawn from ``rng``."""
    order = list(nodes)
    rng.shuffle(order)
    if name == "isolate":
        return isolate(nodes, target if target is not None else order[0])
    builders: dict[str, Callable[[Sequence[str]], Grudge]] = {
        "halves": halves,
        "bridge": bridge,
        "majorities-ring": majorities_ring,
    }
    if name not in builders:
        raise ConfigError(
            f"unknown partition topology {name!r} (known: isolate, {', '.join(builders)}, grudge)"
        )
    return builders[name](order)


def topologies_for(n: int) -> list[str]:
    """The generated topologies that make sense for ``n`` nodes."""
    names = ["isolate", "halves"]
    if n >= 3:
        names += ["bridge", "majorities-ring"]
    return names


def validate_grudge(grudge: object, nodes: Sequence[str]) -> Grudge:
    """Check an explicit grudge map {node: [nodes it drops]} and normalise it."""
    if not isinstance(grudge, dict) or not grudge:
        raise ConfigError("grudge: expected a non-empty mapping {node: [nodes it drops]}")
    known = set(nodes)
    out: Grudge = {}
    for node, drops in grudge.items():
        if node not in known:
            raise ConfigError(f"grudge: unknown node {node!r} (nodes: {', '.join(nodes)})")
        if not isinstance(drops, list | tuple) or not all(isinstance(d, str) for d in drops):
            raise ConfigError(f"grudge[{node!r}]: expected a list of node names")
        for d in drops:
            if d not in known:
                raise ConfigError(f"grudge[{node!r}]: unknown node {d!r}")
            if d == node:
                raise ConfigError(f"grudge[{node!r}]: a node cannot drop itself")
        out[node] = sorted(set(drops))
    if not any(out.values()):
        raise ConfigError("grudge: drops nothing; a partition must cut at least one link")
    return out


def sees(grudge: Grudge, a: str, b: str) -> bool:
    """Whether a and b can talk: neither drops the other."""
    return b not in grudge.get(a, ()) and a not in grudge.get(b, ())


def view(grudge: Grudge, node: str, nodes: Sequence[str]) -> frozenset[str]:
    """The nodes ``node`` can talk to, itself included."""
    return frozenset(n for n in nodes if n == node or sees(grudge, node, n))


def involved(grudge: Grudge) -> list[str]:
    """Nodes that carry rules: the fault's targets."""
    return sorted(n for n, drops in grudge.items() if drops)


def _need(nodes: Sequence[str], k: int, name: str) -> None:
    if len(nodes) < k:
        raise ConfigError(f"{name} needs at least {k} nodes, got {len(nodes)}")


# --- iptables rendering (pure) -------------------------------------------------


def tag(cluster: str, fault_id: int | str) -> str:
    if not _TAG_SAFE.match(cluster):
        raise ConfigError(f"cluster name {cluster!r} cannot be used in an iptables comment")
    return f"{TAG_PREFIX}{cluster}:{fault_id}"


def drop_commands(peer_addresses: Sequence[str], rule_tag: str) -> list[str]:
    """iptables commands that cut this node off from each peer, both directions."""
    cmds = []
    for addr in peer_addresses:
        for chain, flag in (("INPUT", "-s"), ("OUTPUT", "-d")):
            cmds.append(
                f"{IPTABLES} -A {chain} {flag} {shlex.quote(addr)} "
                f"-m comment --comment {shlex.quote(rule_tag)} -j DROP"
            )
    return cmds


def restore_command(commands: Sequence[str]) -> str:
    """``iptables -A|-D`` commands (as rendered here) run as one iptables-restore
    transaction of the filter table: one iptables process, all or nothing."""
    rules = [c.removeprefix(IPTABLES + " ") for c in commands]
    script = "\n".join(["*filter", *rules, "COMMIT", ""])
    return f"printf %s {shlex.quote(script)} | iptables-restore -w 5 --noflush"


def install_once(append_commands: Sequence[str], rule_tag: str) -> str:
    """One shell command installing the rules unless the fault's rules are there already.

    On TCG guests every iptables process costs about a second, and checking
    then adding each rule (``-C || -A``) made a partition's apply run eight of
    them per node; this runs two whatever the count.  The rules go in in one
    transaction, so any rule carrying the fault's tag means all are there:
    ``Node.run`` may repeat the command after a lost SSH transport.
    """
    pattern = '--comment "?' + rule_tag.replace(".", "\\.") + '("| |$)'
    return (
        f"{IPTABLES} -S | grep -qE -e {shlex.quote(pattern)} || {restore_command(append_commands)}"
    )


def rule_comment(rule: str) -> str | None:
    tokens = shlex.split(rule)
    for i, tok in enumerate(tokens[:-1]):
        if tok == "--comment":
            return tokens[i + 1]
    return None


def delete_commands(listing: str, matches: Callable[[str], bool]) -> list[str]:
    """Turn the ``iptables -S`` lines whose comment ``matches`` into deletions."""
    cmds = []
    for line in listing.splitlines():
        if not line.startswith("-A "):
            continue
        comment = rule_comment(line)
        if comment is not None and matches(comment):
            tokens = shlex.split(line)
            cmds.append(f"{IPTABLES} -D {shlex.join(tokens[1:])}")
    return cmds


def tag_matcher(cluster: str | None, fault_id: int | None = None) -> Callable[[str], bool]:
    """Exactly one fault's rules, all of one cluster's, or every kafka-chaos rule."""
    if cluster is None:
        return lambda c: c.startswith(TAG_PREFIX)
    if fault_id is None:
        prefix = tag(cluster, "")
        return lambda c: c.startswith(prefix)
    exact = tag(cluster, fault_id)
    return lambda c: c == exact


# --- acting on nodes -------------------------------------------------------------


_harness_addresses: dict[tuple[str, int], str] = {}


def harness_address(node: Node) -> str:
    """The address this harness reaches ``node`` from, as the node sees it.

    Asked once per node and remembered: it does not change during a run and
    every SSH round trip delays the fault.
    """
    key = (node.ssh.host, node.ssh.port)
    if key not in _harness_addresses:
        out = node.run('echo "$SSH_CONNECTION"', timeout=NEMESIS_COMMAND_TIMEOUT_S).stdout.split()
        if not out:
            raise NemesisError(
                f"{node.name}: cannot tell the harness's address (no SSH_CONNECTION)"
            )
        _harness_addresses[key] = out[0]
    return _harness_addresses[key]


def apply_grudge(cluster: Cluster, grudge: Grudge, rule_tag: str) -> None:
    """Install the grudge's DROP rules on every node that holds one.

    Refuses any rule that would drop the address the harness connects from,
    so a partitioned node can always be healed.
    """

    def install(node: Node) -> None:
        peers = [cluster.node(p).address for p in grudge[node.name]]
        own = harness_address(node)
        if own in peers:
            raise NemesisError(
                f"{node.name}: refusing to drop {own}, the address the harness reaches it from"
            )
        node.run(
            install_once(drop_commands(peers, rule_tag), rule_tag),
            timeout=NEMESIS_COMMAND_TIMEOUT_S,
        )

    nodes = [cluster.node(n) for n in involved(grudge)]
    on_nodes(nodes, install, timeout_s=FAULT_STEP_TIMEOUT_S, what="partitioning").values()


def heal_node(node: Node, matches: Callable[[str], bool]) -> int:
    """Delete this node's matching rules and check none is left; returns how many.

    Two round trips: list, then delete (one iptables-restore) and list again
    in one command.
    """
    listing = node.run(f"{IPTABLES} -S", timeout=NEMESIS_COMMAND_TIMEOUT_S).stdout
    cmds = delete_commands(listing, matches)
    if not cmds:
        return 0
    after = node.run(
        f"{restore_command(cmds)}; {IPTABLES} -S", timeout=NEMESIS_COMMAND_TIMEOUT_S, check=False
    ).stdout
    left = delete_commands(after, matches)
    if left:
        raise NemesisError(f"{node.name}: {len(left)} partition rule(s) could not be removed")
    return len(cmds)


def heal(
    cluster: Cluster, matches: Callable[[str], bool], nodes: Sequence[str] | None = None
) -> int:
    """Remove matching rules from the given nodes (default: all); returns the count."""
    targets = cluster.nodes if nodes is None else [cluster.node(n) for n in nodes]
    healed = on_nodes(
        targets,
        lambda n: heal_node(n, matches),
        timeout_s=FAULT_STEP_TIMEOUT_S,
        what="removing partition rules",
    )
    return sum(healed.values())


# --- the kinds ------------------------------------------------------------------------

# First on each node: a broker restarted by a later sweep must reach its peers.
RULES_SWEEP = Sweep(
    "partition rules",
    order=10,
    undo=lambda cluster, node, every_tag: heal_node(
        node, tag_matcher(None if every_tag else cluster.name)
    ),
    model=lambda model: model.delete_rules(tag_matcher(model.name)),
    done="removed {} partition rule(s)",
)


class GrudgeFault(FaultKind):
    """A fault that is its grudge (``params["grudge"]``): DROP rules tagged with its id."""

    targetable = True
    sweeps = (RULES_SWEEP,)

    def apply(self, cluster: Cluster, op: FaultOp, nodes: list[Node], topic: str | None) -> None:
        apply_grudge(cluster, op.params["grudge"], tag(cluster.name, op.id))

    def heal(self, cluster: Cluster, op: FaultOp, nodes: list[Node]) -> dict[str, Any] | None:
        return {"rules_removed": heal(cluster, tag_matcher(cluster.name, op.id))}

    def model_start(self, model: Model, op: FaultOp) -> None:
        rule_tag = tag(model.name, op.id)
        for node, drops in op.params["grudge"].items():
            model.add_rules(node, drop_commands([model.address(d) for d in drops], rule_tag))

    def model_end(self, model: Model, op: FaultOp) -> None:
        model.delete_rules(tag_matcher(model.name, op.id))


class IsolateFromBrokers(GrudgeFault):
    """One node cut from every other node; clients and the harness still reach it."""

    summary = "One node cut from every other node; clients and the harness still reach it."

    name = "isolate-from-brokers"

    def prepare(self, names: list[str], op: FaultOp) -> None:
        op.params["grudge"] = isolate(names, op.targets[0])


class Partition(GrudgeFault):
    """A named topology (``params["topology"]``) or an explicit grudge."""

    summary = (
        "A network partition: a named topology of the nodes (`params.topology`) or an "
        "explicit grudge."
    )

    name = "partition"
    shape = "topology"

    def prepare(self, names: list[str], op: FaultOp) -> None:
        if op.params.get("topology") == "isolate" and "grudge" not in op.params:
            op.params["grudge"] = isolate(names, op.targets[0])  # the resolved target

    def draw(self, rng: random.Random, ctx: Ctx) -> tuple[list[str], Params]:
        nodes = list(ctx.nodes)
        name = rng.choice(topologies_for(len(nodes)))
        grudge = topology(name, nodes, rng)
        return involved(grudge), {"topology": name, "grudge": grudge}

    def targeted_params(self, rng: random.Random, ctx: Ctx) -> Params:
        return {"topology": "isolate"}

    def arbitrary(self, draw: DrawFn, nodes: list[str]) -> tuple[list[str], Params]:
        from hypothesis import strategies as st

        name = draw(st.sampled_from([*topologies_for(len(nodes)), "grudge"]))
        if name == "grudge":
            grudge = arbitrary_grudge(draw, nodes)
        else:
            grudge = topology(name, nodes, random.Random(draw(st.integers(0, 2**32))))
        return involved(grudge), {"topology": name, "grudge": grudge}

    def arbitrary_targeted_params(self, draw: DrawFn) -> Params:
        return {"topology": "isolate"}


def arbitrary_grudge(draw: DrawFn, nodes: list[str]) -> Grudge:
    """Any valid explicit grudge map (at least one link cut), drawn by Hypothesis."""
    from hypothesis import strategies as st

    a, b = draw(st.permutations(nodes))[:2]
    grudge = {a: [b]}
    for node in nodes:
        extra = draw(st.lists(st.sampled_from([n for n in nodes if n != node]), max_size=3))
        grudge[node] = sorted(set(grudge.get(node, [])) | set(extra))
    return grudge
