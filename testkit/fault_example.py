"""A fault kind that lives outside the product: what adding a fault takes.

This module is the whole of it: one class (and the sweep it shares with
nobody), made known with ``registry.register(Marker())``.  It is harmless:
applying it touches a marker file below the target node's directory over
the node's own transport (``node.run``, SSH), healing removes it, and the
sweep after a crash removes every marker it finds.
"""

from __future__ import annotations

import random
import re

from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.node import Node, quote
from kafka_chaos.nemeses.base import NEMESIS_COMMAND_TIMEOUT_S, TARGETING_PARAMS, FaultOp
from kafka_chaos.nemeses.kinds import Ctx, NodeFault, Params, Sweep

NAME = "example-marker"
FLAG = "marked"
_MARK = re.compile(r"^[a-z0-9-]{1,32}$")


def marker(node: Node, mark: str) -> str:
    """The marker file of ``mark`` on ``node``."""
    return node.path("run", f"example-{mark}.marker")


def remove_markers(node: Node) -> int:
    """Remove every example marker on the node; how many there were."""
    pattern = f"{quote(node.path('run'))}/example-*.marker"
    res = node.run(
        f'n=0; for f in {pattern}; do [ -e "$f" ] && rm -f "$f" && n=$((n+1)); done; echo $n',
        timeout=NEMESIS_COMMAND_TIMEOUT_S,
    )
    return int(res.stdout.split()[-1])


SWEEP = Sweep(
    "example markers",
    order=35,  # any rank: it depends on nothing else being undone first
    undo=lambda cluster, node, every_tag: remove_markers(node),
    model=lambda model: model.clear(FLAG),
    done="removed {} example marker(s)",
)


class Marker(NodeFault):
    """A marker file on each target node while the fault lasts; ``params``: mark."""

    name = NAME
    targetable = True
    flag = FLAG
    sweeps = (SWEEP,)

    def params(self, params: Params, where: str = "fault") -> Params:
        unknown = sorted(set(params) - {"mark", *TARGETING_PARAMS})
        if unknown:
            raise ConfigError(f"{where}: {NAME} has no param(s) {unknown} (known: mark)")
        out = {"mark": "default", **params}
        if not isinstance(out["mark"], str) or not _MARK.match(out["mark"]):
            raise ConfigError(f"{where}: {NAME} mark must be 1-32 of a-z, 0-9, '-'")
        return out

    def draw_params(self, rng: random.Random, ctx: Ctx) -> Params:
        return {"mark": f"m{rng.randrange(1000)}"}

    def apply_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        path = quote(marker(node, self.params(op.params)["mark"]))
        node.run(f"mkdir -p $(dirname {path}) && touch {path}", timeout=NEMESIS_COMMAND_TIMEOUT_S)

    def heal_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        path = quote(marker(node, self.params(op.params)["mark"]))
        node.run(f"rm -f {path}", timeout=NEMESIS_COMMAND_TIMEOUT_S)
