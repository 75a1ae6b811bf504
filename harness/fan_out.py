"""Do one step on many nodes at once, bounded in time, with one error rule.

Every whole-cluster step (configure, start, partition, heal, probe, dump)
runs per node in parallel: SSH round trips dominate, and a partition must hit
all sides together.  The rule, the same for every caller:

- every node is attempted, whatever the others do;
- the call returns once all nodes are done or ``timeout_s`` has passed: a
  step still running then is left behind on its (daemon) thread and counts
  as that node's ``NodeUnreachable``, so a stuck node never hangs the harness;
- a ``HarnessError`` is that node's outcome; any other exception is a bug
  and is re-raised (the first, in node order) once the wait is over.

What a failed node means is the caller's choice, made where it calls:
``Outcomes.values()`` when every node must succeed (one error names every
failed node), or a look at each ``Outcome`` when a node may fail on its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

from kafka_chaos.harness.errors import HarnessError, NodeUnreachable
from kafka_chaos.harness.node import Node

T = TypeVar("T")


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """What one node's step came to: its value, or the error it raised."""

    node: Node
    value: T | None = None
    error: HarnessError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class Outcomes(Generic[T]):
    """Every node's outcome of one step, in the order the nodes were given."""

    what: str
    each: tuple[Outcome[T], ...]

    def __iter__(self) -> Iterator[Outcome[T]]:
        return iter(self.each)

    def __len__(self) -> int:
        return len(self.each)

    def failures(self) -> list[Outcome[T]]:
        return [o for o in self.each if o.error is not None]

    def values(self) -> list[T]:
        """Every node's value, in node order; raise if any node failed.

        One failure is re-raised as it is.  Several become one error naming
        every failed node, so none goes unseen, of the class they all share
        (``NetemUnavailable`` on every node is still one): callers and history
        records that go by the class see what a single failure would show.
        """
        failed = self.failures()
        if not failed:
            return [cast(T, o.value) for o in self.each]
        first = cast(HarnessError, failed[0].error)
        if len(failed) == 1:
            raise first
        shared: type[HarnessError] = next(
            c for c in type(first).__mro__ if all(isinstance(o.error, c) for o in failed)
        )
        said = f"{self.what} failed on {len(failed)} of {len(self.each)} nodes: {_reasons(failed)}"
        raise shared(said) from first  # every HarnessError takes its message alone


def on_nodes(
    nodes: Iterable[Node], fn: Callable[[Node], T], *, timeout_s: float, what: str
) -> Outcomes[T]:
    """Run ``fn(node)`` on every node at once, each on its own thread; wait at most ``timeout_s``.

    ``timeout_s`` is a backstop above the bounds of ``fn``'s own commands,
    scaled like ``Node.run``'s by the slowest node's ``time_scale``.  ``what``
    names the step in the errors.  Daemon threads, not a pool: a pool's
    workers are joined at exit, so one stuck step would hang the harness there.
    """
    nodes = list(nodes)
    limit = timeout_s * max((n.time_scale for n in nodes), default=1.0)
    done: dict[int, tuple[T | None, BaseException | None]] = {}

    def work(i: int, node: Node) -> None:
        try:
            done[i] = (fn(node), None)
        except BaseException as e:  # noqa: BLE001 - sorted out below, in the caller's thread
            done[i] = (None, e)

    threads = [
        threading.Thread(target=work, args=(i, n), name=f"{what} on {n.name}", daemon=True)
        for i, n in enumerate(nodes)
    ]
    deadline = time.monotonic() + limit
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    each: list[Outcome[T]] = []
    for i, node in enumerate(nodes):
        if i not in done:
            stuck = NodeUnreachable(f"{node.name}: {what} still running after {limit:g}s")
            each.append(Outcome(node, error=stuck))
            continue
        value, error = done[i]
        if error is not None and not isinstance(error, HarnessError):
            raise error
        each.append(Outcome(node, value=value, error=error))
    return Outcomes(what, tuple(each))


def _reasons(failed: list[Outcome]) -> str:
    """``n1, n2: reason; n3 (host:22): other``: nodes that failed alike are named together."""
    alike: dict[str, list[str]] = {}
    for o in failed:
        alike.setdefault(str(o.error).removeprefix(f"{o.node.name}: "), []).append(o.node.name)
    parts = []
    for reason, names in alike.items():
        named = names == [reason.split(" ", 1)[0]]  # "n1 (host:22): ..." names its node
        parts.append(reason if named else f"{', '.join(names)}: {reason}")
    return "; ".join(parts)
