"""Hypothesis strategies for fault schedules, and a model cluster to run them on.

The strategies produce valid schedules two ways: straight from the seeded
generator (any seed, any fault mix) and as arbitrary hand-built op lists
(explicit grudges, leader/controller targets, odd timings), which is what a
later search mode will explore.  ``ModelCluster`` replays a schedule in the
runner's own step order (``schedule.steps``) with the real grudge, rule
rendering and tag-matching code, so a property test can assert that every
schedule heals everything it breaks.  Both cover every registered fault
kind: each kind draws its own arbitrary params (``FaultKind.arbitrary``) and
says what it does to the model (``model_start``, ``model_end``, its sweeps).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import strategies as st
from kafka_chaos.harness.spec import NemesisSpec
from kafka_chaos.nemeses import partition, registry
from kafka_chaos.nemeses.base import TARGET_MODES, FaultOp
from kafka_chaos.nemeses.runner import prepare
from kafka_chaos.nemeses.schedule import Schedule, generate, steps


@st.composite
def node_names(draw: st.DrawFn, min_size: int = 1, max_size: int = 7) -> list[str]:
    n = draw(st.integers(min_size, max_size))
    return [f"n{i}" for i in range(1, n + 1)]


grudges = st.composite(partition.arbitrary_grudge)  # a valid explicit grudge map


@st.composite
def nemesis_specs(draw: st.DrawFn) -> NemesisSpec:
    return NemesisSpec(
        faults=draw(
            st.lists(st.sampled_from(registry.names()), min_size=1, max_size=4, unique=True)
        ),
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
def fault_ops(draw: st.DrawFn, nodes: list[str], at_s: float, op_id: int) -> FaultOp:
    """One arbitrary but valid fault starting at ``at_s``: its kind draws what it needs."""
    f = draw(st.sampled_from(registry.names()))
    kind = registry.kind(f)
    duration = draw(st.floats(0.1, 60.0))
    if kind.targetable and draw(st.booleans()):
        mode = draw(st.sampled_from(("leader", "controller")))
        return FaultOp(op_id, f, at_s, duration, [], mode, kind.arbitrary_targeted_params(draw))
    targets, params = kind.arbitrary(draw, nodes)
    return FaultOp(op_id, f, at_s, duration, list(targets), "random", params)


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
    flags: set[str] = field(default_factory=set)  # what a fault left: "down", "paused", ...
    rules: list[str] = field(default_factory=list)  # in `iptables -S` form
    clock_ms: int = 0  # the offset a clock fault left, 0 when true


class ModelCluster:
    """Just enough state to tell whether a schedule leaves something broken.

    Each fault kind says what it does to this model (``model_start``,
    ``model_end``) and what its sweeps mend (``Sweep.model``), through the
    few methods below.
    """

    def __init__(self, nodes: list[str], name: str = "model", leader: str | None = None) -> None:
        self.name = name
        self.names = list(nodes)
        self.nodes = {n: ModelNode() for n in nodes}
        self.leader = leader or nodes[0]  # what targeting resolves to in the model

    def start(self, op: FaultOp) -> None:
        if not op.targets:
            op.targets = [self.leader]
        prepare(self.names, op)
        registry.kind(op.f).model_start(self, op)

    def end(self, op: FaultOp) -> None:
        registry.kind(op.f).model_end(self, op)

    def heal_all(self) -> None:
        for sweep in registry.sweeps():
            sweep.model(self)

    # --- what kinds do to the model -------------------------------------------------

    def mark(self, nodes: list[str], flag: str) -> None:
        for n in nodes:
            self.nodes[n].flags.add(flag)

    def unmark(self, nodes: list[str], flag: str) -> None:
        for n in nodes:
            self.nodes[n].flags.discard(flag)

    def clear(self, flag: str) -> None:
        """No node has ``flag`` any more (what a sweep does)."""
        self.unmark(self.names, flag)

    def address(self, node: str) -> str:
        return _addr(node)

    def add_rules(self, node: str, commands: list[str]) -> None:
        """Rules as ``iptables -A`` commands (as the nemeses render them) put in place."""
        self.nodes[node].rules += [_as_listed(c) for c in commands]

    def delete_rules(self, matches: Callable[[str], bool]) -> None:
        """Rules whose comment ``matches`` removed, as ``partition.heal_node`` does."""
        for node in self.nodes.values():
            for cmd in partition.delete_commands("\n".join(node.rules), matches):
                node.rules.remove("-A " + cmd.split(" -D ", 1)[1])

    # --- asking the model -------------------------------------------------------------

    def run(self, sched: Schedule, final_heal: bool = True) -> None:
        for step in steps(sched.ops):
            (self.start if step.phase == "start" else self.end)(step.op)
        if final_heal:
            self.heal_all()

    def broken(self) -> list[str]:
        out = []
        for name, n in self.nodes.items():
            out += [f"{name} {flag}" for flag in sorted(n.flags)]
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
