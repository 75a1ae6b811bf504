"""Hypothesis strategies for fault schedules, and a model cluster to run them on.

The strategies produce valid schedules two ways: straight from the seeded
generator (any seed, any fault mix) and as arbitrary hand-built op lists
(explicit grudges, leader/controller targets, odd timings), which is what a
later search mode will explore.  ``ModelCluster`` replays a schedule in the
runner's own step order (``schedule.steps``) with the real grudge, rule
rendering and tag-matching code, so a property test can assert that every
schedule heals everything it breaks.
"""

from __future__ import annotations

import random
import shlex
from dataclasses import dataclass, field

from hypothesis import strategies as st

from harness.spec import NemesisSpec
from nemeses import partition, unclean
from nemeses.base import (
    CLOCK_DEFAULTS,
    CLOCK_KINDS,
    FAULT_KINDS,
    MAX_CLOCK_DELTA_MS,
    MAX_STROBE_PERIOD_MS,
    MIN_STROBE_PERIOD_MS,
    ROLLING_KINDS,
    TARGET_MODES,
    TARGETABLE_KINDS,
    TOPOLOGIES,
    FaultOp,
)
from nemeses.base import clock_params as filled_clock_params
from nemeses.runner import prepare
from nemeses.schedule import Schedule, generate, steps


@st.composite
def node_names(draw: st.DrawFn, min_size: int = 1, max_size: int = 7) -> list[str]:
    n = draw(st.integers(min_size, max_size))
    return [f"n{i}" for i in range(1, n + 1)]


@st.composite
def grudges(draw: st.DrawFn, nodes: list[str]) -> partition.Grudge:
    """A valid explicit grudge map: at least one link cut."""
    a, b = draw(st.permutations(nodes))[:2]
    grudge = {a: [b]}
    for node in nodes:
        extra = draw(st.lists(st.sampled_from([n for n in nodes if n != node]), max_size=3))
        grudge[node] = sorted(set(grudge.get(node, [])) | set(extra))
    return grudge


@st.composite
def nemesis_specs(draw: st.DrawFn) -> NemesisSpec:
    return NemesisSpec(
        faults=draw(st.lists(st.sampled_from(FAULT_KINDS), min_size=1, max_size=4, unique=True)),
        interval_s=draw(st.floats(0.0, 30.0)),  # with time_limit <= 120: <= 240 faults
        duration_s=draw(st.floats(0.5, 30.0)),
        targets=draw(st.sampled_from(TARGET_MODES)),
    )


@st.composite
def generated_schedules(draw: st.DrawFn) -> Schedule:
    """Schedules exactly as a run would generate them from a seed."""
    nodes = draw(node_names(min_size=3))
    return generate(
        draw(nemesis_specs()),
        nodes,
        draw(st.floats(0.0, 120.0)),
        draw(st.integers(0, 2**31 - 1)),
        topic="chaos",
    )


@st.composite
def clock_params(draw: st.DrawFn, kind: str) -> dict[str, int]:
    """Valid params of a clock fault; any of them may be left to its default."""
    params = {}
    if draw(st.booleans()):
        params["delta_ms"] = draw(
            st.integers(-MAX_CLOCK_DELTA_MS, MAX_CLOCK_DELTA_MS).filter(lambda d: d != 0)
        )
    if "period_ms" in CLOCK_DEFAULTS[kind] and draw(st.booleans()):
        params["period_ms"] = draw(st.integers(MIN_STROBE_PERIOD_MS, MAX_STROBE_PERIOD_MS))
    return params


@st.composite
def fault_ops(draw: st.DrawFn, nodes: list[str], at_s: float, op_id: int) -> FaultOp:
    """One arbitrary but valid fault starting at ``at_s``."""
    kind = draw(st.sampled_from(FAULT_KINDS))
    duration = draw(st.floats(0.1, 60.0))
    params: dict = {}
    if kind in TARGETABLE_KINDS and draw(st.booleans()):
        mode = draw(st.sampled_from(("leader", "controller")))
        if kind == "partition":
            params["topology"] = "isolate"
        if kind in CLOCK_KINDS:
            params.update(draw(clock_params(kind)))
        return FaultOp(op_id, kind, at_s, duration, [], mode, params)
    if kind in ROLLING_KINDS:
        targets = draw(st.permutations(nodes))
    elif kind == "partition":
        topo = draw(st.sampled_from([t for t in TOPOLOGIES if t in _usable(len(nodes))]))
        if topo == "grudge":
            grudge = draw(grudges(nodes))
        else:
            rng = random.Random(draw(st.integers(0, 2**32)))
            grudge = partition.topology(topo, nodes, rng)
        params = {"topology": topo, "grudge": grudge}
        targets = partition.involved(grudge)
    else:
        targets = [draw(st.sampled_from(nodes))]
        if kind in CLOCK_KINDS:
            params = draw(clock_params(kind))
    return FaultOp(op_id, kind, at_s, duration, list(targets), "random", params)


def _usable(n: int) -> list[str]:
    return [*partition.topologies_for(n), "grudge"]


@st.composite
def schedules(draw: st.DrawFn, max_ops: int = 12) -> Schedule:
    """Arbitrary valid schedules: non-overlapping faults in time order."""
    nodes = draw(node_names(min_size=2))
    ops, t = [], 0.0
    for i in range(draw(st.integers(0, max_ops))):
        t += draw(st.floats(0.0, 30.0))
        op = draw(fault_ops(nodes, t, i))
        ops.append(op)
        t = op.end_s
    return Schedule(ops=ops, seed=None, nodes=nodes)


# --- a model cluster ------------------------------------------------------------------


@dataclass
class ModelNode:
    down: bool = False
    paused: bool = False
    rules: list[str] = field(default_factory=list)  # in `iptables -S` form
    netem: bool = False
    clock_ms: int = 0  # the offset a clock fault left, 0 when true
    strobing: bool = False


class ModelCluster:
    """Just enough state to tell whether a schedule leaves something broken."""

    def __init__(self, nodes: list[str], name: str = "model", leader: str | None = None) -> None:
        self.name = name
        self.names = list(nodes)
        self.nodes = {n: ModelNode() for n in nodes}
        self.leader = leader or nodes[0]  # what targeting resolves to in the model

    def start(self, op: FaultOp) -> None:
        if not op.targets:
            op.targets = [self.leader]
        prepare(self.names, op)
        if op.f in ("kill", "restart"):
            for t in op.targets:
                self.nodes[t].down = True
        elif op.f == "pause":
            for t in op.targets:
                self.nodes[t].paused = True
        elif op.f in ("partition", "isolate-from-brokers"):
            rule_tag = partition.tag(self.name, op.id)
            for node, drops in op.params["grudge"].items():
                cmds = partition.drop_commands([_addr(d) for d in drops], rule_tag)
                self.nodes[node].rules += [_as_listed(c) for c in cmds]
        elif op.f == "netem":
            for t in op.targets:
                self.nodes[t].netem = True
        elif op.f in CLOCK_KINDS:
            for t in op.targets:
                self.nodes[t].clock_ms = filled_clock_params(op.f, op.params)["delta_ms"]
                self.nodes[t].strobing = op.f == "clock-strobe"
        elif op.f == "unclean-election":
            leader = op.targets[0]
            peers = [_addr(n) for n in self.names if n != leader]
            cmds = unclean.fetch_block_commands(peers, partition.tag(self.name, op.id))
            self.nodes[leader].rules += [_as_listed(c) for c in cmds]
            self.nodes[leader].down = True
        # rolling restarts bounce and rejoin within their start phase: nothing lingers

    def end(self, op: FaultOp) -> None:
        if op.f in ("kill", "restart"):
            for t in op.targets:
                self.nodes[t].down = False
        elif op.f == "pause":
            for t in op.targets:
                self.nodes[t].paused = False
        elif op.f in ("partition", "isolate-from-brokers"):
            self._delete(partition.tag_matcher(self.name, op.id))
        elif op.f == "netem":
            for t in op.targets:
                self.nodes[t].netem = False
        elif op.f in CLOCK_KINDS:
            for t in op.targets:
                self._reset_clock(self.nodes[t])
        elif op.f == "unclean-election":
            self._delete(partition.tag_matcher(self.name, op.id))
            self.nodes[op.targets[0]].down = False

    def heal_all(self) -> None:
        self._delete(partition.tag_matcher(self.name))
        for node in self.nodes.values():
            node.down = node.paused = node.netem = False
            self._reset_clock(node)

    @staticmethod
    def _reset_clock(node: ModelNode) -> None:
        node.clock_ms, node.strobing = 0, False

    def _delete(self, matches) -> None:
        for node in self.nodes.values():
            for cmd in partition.delete_commands("\n".join(node.rules), matches):
                node.rules.remove("-A " + cmd.split(" -D ", 1)[1])

    def run(self, sched: Schedule, final_heal: bool = True) -> None:
        for step in steps(sched.ops):
            (self.start if step.phase == "start" else self.end)(step.op)
        if final_heal:
            self.heal_all()

    def broken(self) -> list[str]:
        out = []
        for name, n in self.nodes.items():
            for what in ("down", "paused", "netem", "strobing"):
                if getattr(n, what):
                    out.append(f"{name} {what}")
            if n.clock_ms:
                out.append(f"{name} clock off by {n.clock_ms} ms")
            if n.rules:
                out.append(f"{name} has {len(n.rules)} rules")
        return out

    def cut_links(self) -> set[tuple[str, str]]:
        """Pairs that cannot talk right now, from the rules in place."""
        cut = set()
        for name, n in self.nodes.items():
            for rule in n.rules:
                tokens = shlex.split(rule)
                peer = tokens[tokens.index("-s" if "-s" in tokens else "-d") + 1]
                cut.add(tuple(sorted((name, _name(peer.split("/")[0])))))
        return cut


def _addr(node: str) -> str:
    return f"10.251.0.{10 + int(node[1:])}"


def _name(addr: str) -> str:
    return f"n{int(addr.rsplit('.', 1)[1]) - 10}"


def _as_listed(cmd: str) -> str:
    """What `iptables -S` prints for a rule we added (address gains /32)."""
    tokens = shlex.split(cmd.removeprefix(partition.IPTABLES + " "))
    for flag in ("-s", "-d"):
        if flag in tokens:
            i = tokens.index(flag) + 1
            tokens[i] += "/32"
    if "--dport" in tokens:  # a port match is listed with its implicit module
        k = tokens.index("--dport")
        tokens[k:k] = ["-m", "tcp"]
    # iptables -S prints the match before the target
    j = tokens.index("-j")
    tokens = tokens[:j] + tokens[j + 2 :] + tokens[j : j + 2]
    return shlex.join(tokens)
