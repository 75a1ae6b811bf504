"""What a fault kind is: one class that says everything about one fault.

Why this exists: a fault kind used to be a string, listed in tuples in
``base.py`` and handled by if/elif in the runner's apply and heal, in the
sweep after a crash, in the Hypothesis model and in the schedule generator;
adding a fault meant editing five places in four files, and forgetting one
(the model, the sweep) went unnoticed.  Now a kind is one subclass of
``FaultKind`` and every place that handles faults asks the registry
(``nemeses/registry.py``) for it, so a new fault is one new class.

A kind declares:

- ``name``, ``summary`` (one line for the docs' fault table, written by
  ``python3 -m kafka_chaos.reference_docs``), ``shape`` (one node, every
  node in turn, or a topology) and whether leader/controller/coordinator
  targeting applies (``targetable``);
- ``params``: its parameters' defaults and validation;
- ``draw_params`` (or ``draw``/``targeted_params``): what the seeded
  generator drafts;
- ``check_cluster``, ``prepare``, ``apply``, ``heal``: carrying it out;
- ``sweeps``: what ``heal_cluster`` undoes on every node after a crash;
- ``model_start``/``model_end`` and ``arbitrary_params`` (or
  ``arbitrary``): its part in the property tests' model cluster and
  Hypothesis strategies.

Kinds are stateless singletons; everything about one fault is in its
``FaultOp``.  Adding one: subclass ``FaultKind`` (``NodeFault`` for a fault
done to each target node) and list an instance in ``registry.BUILTIN``, or
``registry.register`` it; ``testkit/fault_example.py`` is a
complete example.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.fan_out import on_nodes
from kafka_chaos.harness.node import Node
from kafka_chaos.nemeses.base import FAULT_STEP_TIMEOUT_S, FaultOp

if TYPE_CHECKING:
    from hypothesis.strategies import DrawFn

# ``node``: one node (or the resolved leader/controller/coordinator);
# ``every-node``: every node in turn, in a drawn order;
# ``topology``: the nodes a grudge between them names.
Shape = Literal["node", "every-node", "topology"]
Params = dict[str, Any]


class Model(Protocol):
    """The property tests' model cluster, as kinds change it
    (``testkit.strategies.ModelCluster`` is the one implementation).  Typed
    here, so that kinds need not import the strategies, which import every kind.
    """

    name: str
    names: list[str]
    nodes: dict[str, Any]

    def mark(self, nodes: list[str], flag: str) -> None: ...

    def unmark(self, nodes: list[str], flag: str) -> None: ...

    def clear(self, flag: str) -> None: ...

    def address(self, node: str) -> str: ...

    def add_rules(self, node: str, commands: list[str]) -> None: ...

    def delete_rules(self, matches: Callable[[str], bool]) -> None: ...


@dataclass(frozen=True)
class Ctx:
    """What generators may look at: the nodes and the nemesis options."""

    nodes: tuple[str, ...]
    targets: str = "random"
    topic: str | None = None


@dataclass
class Draft:
    """A fault without its time: what to do and to whom."""

    f: str
    targets: list[str]
    target: str = "random"
    params: Params = field(default_factory=dict)


@dataclass(frozen=True)
class Sweep:
    """One thing ``heal_cluster`` undoes on every node, whichever fault left it.

    The sweep runs after a crash, when nothing says which faults were in
    place, so it undoes by looking (rules with a tag, a pid that is
    stopped).  Kinds that leave the same thing share one sweep (kill and
    restart both leave a broker down); each runs once per node, in
    ascending ``order``.
    """

    what: str  # "partition rules": names the step in logs and errors
    order: int
    # (cluster, node, every_tag) -> what it undid, falsy for nothing; must be
    # idempotent (it is retried).  every_tag: also what other clusters' faults left.
    undo: Callable[[Cluster, Node, bool], Any]
    # the same on the property tests' model cluster
    model: Callable[[Model], None]
    done: str = ""  # the line for what undo did, ``{}`` standing for its result


class FaultKind(ABC):
    """One kind of fault; subclasses override what differs from a plain one-node fault."""

    name: ClassVar[str]
    # What it does, in one line, for docs/faults.md's generated table ("": the
    # first line of the class's docstring).
    summary: ClassVar[str] = ""
    shape: ClassVar[Shape] = "node"
    targetable: ClassVar[bool] = False  # may hit the resolved leader/controller/coordinator
    groupable: ClassVar[bool] = False  # may hit a group of nodes at once (base.GROUP_TARGETS)
    sweeps: ClassVar[tuple[Sweep, ...]] = ()

    # --- params -----------------------------------------------------------------

    def params(self, params: Params, where: str = "fault") -> Params:
        """``params`` with defaults filled in; a bad one is a ConfigError naming ``where``."""
        return params

    # --- the seeded generator -----------------------------------------------------

    def draw(self, rng: random.Random, ctx: Ctx) -> tuple[list[str], Params]:
        """Targets and params of a generated fault with random targets."""
        nodes = list(ctx.nodes)
        if self.shape == "every-node":
            rng.shuffle(nodes)
            targets = nodes
        elif self.shape == "node":
            targets = [rng.choice(nodes)]
        else:
            raise NotImplementedError(f"{self.name}: a {self.shape} fault draws its own targets")
        return targets, self.draw_params(rng, ctx)

    def targeted_params(self, rng: random.Random, ctx: Ctx) -> Params:
        """Params of a generated leader/controller/coordinator-targeted fault."""
        return self.draw_params(rng, ctx)

    def draw_params(self, rng: random.Random, ctx: Ctx) -> Params:
        """Params of a generated fault, however it is targeted."""
        return {}

    # --- carrying it out ----------------------------------------------------------

    def check_cluster(self, cluster: Cluster) -> None:
        """Refuse before the run starts when this cluster cannot do the fault at all."""
        return None  # most faults work anywhere

    def prepare(self, names: list[str], op: FaultOp) -> None:
        """Fix into ``op.params`` whatever is still open once the targets are known."""
        return None  # most faults leave nothing open

    @abstractmethod
    def apply(self, cluster: Cluster, op: FaultOp, nodes: list[Node], topic: str | None) -> None:
        """Start the fault; ``nodes`` are ``op.targets``, all known to exist."""

    @abstractmethod
    def heal(self, cluster: Cluster, op: FaultOp, nodes: list[Node]) -> dict[str, Any] | None:
        """Undo it, even if its start failed halfway; returns details for the end line."""

    # --- the property tests -------------------------------------------------------

    @abstractmethod
    def model_start(self, model: Model, op: FaultOp) -> None:
        """What the fault breaks, on the model cluster."""

    @abstractmethod
    def model_end(self, model: Model, op: FaultOp) -> None:
        """What its heal mends, on the model cluster."""

    def arbitrary(self, draw: DrawFn, nodes: list[str]) -> tuple[list[str], Params]:
        """Any valid targets and params (random targets), drawn by Hypothesis."""
        from hypothesis import strategies as st

        if self.shape == "every-node":
            targets = list(draw(st.permutations(nodes)))
        elif self.shape == "node":
            targets = [draw(st.sampled_from(nodes))]
        else:
            raise NotImplementedError(f"{self.name}: a {self.shape} fault draws its own targets")
        return targets, self.arbitrary_params(draw)

    def arbitrary_params(self, draw: DrawFn) -> Params:
        """Any valid params, drawn by Hypothesis."""
        return {}

    def arbitrary_targeted_params(self, draw: DrawFn) -> Params:
        """Any valid params of a leader/controller-targeted fault, drawn by Hypothesis."""
        return self.arbitrary_params(draw)


class NodeFault(FaultKind):
    """A fault done to each target node on its own, to all of them at once.

    The model marks each target with ``flag`` while the fault lasts.
    """

    flag: ClassVar[str]

    @abstractmethod
    def apply_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None: ...

    @abstractmethod
    def heal_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None: ...

    def apply(self, cluster: Cluster, op: FaultOp, nodes: list[Node], topic: str | None) -> None:
        _on_every_target(nodes, f"applying {op.f}", lambda n: self.apply_node(cluster, n, op))

    def heal(self, cluster: Cluster, op: FaultOp, nodes: list[Node]) -> dict[str, Any] | None:
        _on_every_target(nodes, f"healing {op.f}", lambda n: self.heal_node(cluster, n, op))
        return None

    def model_start(self, model: Model, op: FaultOp) -> None:
        model.mark(op.targets, self.flag)

    def model_end(self, model: Model, op: FaultOp) -> None:
        model.unmark(op.targets, self.flag)


def _on_every_target(nodes: list[Node], what: str, step: Callable[[Node], None]) -> None:
    """``step`` on every target at once; each must succeed, or the error names each that did not."""
    on_nodes(nodes, step, timeout_s=FAULT_STEP_TIMEOUT_S, what=what).values()
