"""kafka_chaos.harness.fan_out: one step on many nodes, bounded, with one error rule.

Real threads and real slow, failing and hung functions; nodes are never
contacted (the functions ignore SSH), so no cluster is needed.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kafka_chaos.harness.errors import CommandFailed, HarnessError, NodeUnreachable
from kafka_chaos.harness.fan_out import on_nodes
from kafka_chaos.harness.node import Node, SSHTarget


def make_nodes(count: int, time_scale: float = 1.0) -> list[Node]:
    return [
        Node(f"n{i}", i, f"10.0.0.{i}", SSHTarget(f"10.0.0.{i}"), f"/r/n{i}", time_scale)
        for i in range(1, count + 1)
    ]


def test_all_nodes_run_at_once_and_values_come_in_node_order() -> None:
    nodes = make_nodes(4)
    together = threading.Barrier(len(nodes), timeout=5)  # breaks unless all wait at once

    def step(node: Node) -> str:
        together.wait()
        time.sleep(0.05 * (5 - node.node_id))  # the last node finishes first
        return node.name

    outcomes = on_nodes(nodes, step, timeout_s=10, what="step")
    assert outcomes.values() == ["n1", "n2", "n3", "n4"]
    assert [o.node.name for o in outcomes] == ["n1", "n2", "n3", "n4"]


def test_every_node_is_attempted_when_one_fails_at_once() -> None:
    nodes = make_nodes(3)
    finished: list[str] = []

    def step(node: Node) -> int:
        if node.name == "n1":
            raise CommandFailed("n1: `true` exited 1: no")
        time.sleep(0.2)
        finished.append(node.name)
        return node.node_id

    outcomes = on_nodes(nodes, step, timeout_s=10, what="step")
    assert sorted(finished) == ["n2", "n3"]
    assert [o.ok for o in outcomes] == [False, True, True]
    assert [o.value for o in outcomes] == [None, 2, 3]
    assert [o.node.name for o in outcomes.failures()] == ["n1"]


def test_one_failure_is_raised_as_it_is() -> None:
    error = CommandFailed("n2: `iptables -S` exited 4: locked")

    def step(node: Node) -> None:
        if node.name == "n2":
            raise error

    with pytest.raises(CommandFailed) as raised:
        on_nodes(make_nodes(3), step, timeout_s=10, what="partitioning").values()
    assert raised.value is error


def test_several_failures_become_one_error_naming_every_node() -> None:
    def step(node: Node) -> None:
        if node.name == "n1":
            raise CommandFailed("n1: `tc` exited 2: no netem")
        if node.name == "n2":
            raise NodeUnreachable("n2 (10.0.0.2:22): `tc`: connection refused")
        if node.name == "n3":
            raise HarnessError("cluster c: cannot reach 10.0.0.1")

    with pytest.raises(HarnessError) as raised:
        on_nodes(make_nodes(4), step, timeout_s=10, what="probing netem").values()
    assert type(raised.value) is HarnessError  # the class all three share
    assert str(raised.value) == (
        "probing netem failed on 3 of 4 nodes: n1: `tc` exited 2: no netem; "
        "n2 (10.0.0.2:22): `tc`: connection refused; n3: cluster c: cannot reach 10.0.0.1"
    )
    assert isinstance(raised.value.__cause__, CommandFailed)


def test_nodes_that_fail_alike_keep_their_class_and_are_named_together() -> None:
    def step(node: Node) -> None:
        raise NemesisLike(f"{node.name}: the kernel lacks the netem qdisc")

    with pytest.raises(NemesisLike) as raised:
        on_nodes(make_nodes(3), step, timeout_s=10, what="probing netem").values()
    assert str(raised.value) == (
        "probing netem failed on 3 of 3 nodes: n1, n2, n3: the kernel lacks the netem qdisc"
    )


class NemesisLike(CommandFailed):
    """A subclass, as the nemeses and backends define them."""


def test_a_hung_step_is_bounded_by_the_timeout() -> None:
    release = threading.Event()

    def step(node: Node) -> str:
        if node.name == "n2":
            release.wait(60)  # a node that never answers
        return node.name

    started = time.monotonic()
    try:
        outcomes = on_nodes(make_nodes(3), step, timeout_s=0.5, what="starting Kafka")
        took = time.monotonic() - started
    finally:
        release.set()
    assert 0.5 <= took < 3
    assert [o.value for o in outcomes] == ["n1", None, "n3"]
    stuck = outcomes.failures()[0]
    assert isinstance(stuck.error, NodeUnreachable)
    assert str(stuck.error) == "n2: starting Kafka still running after 0.5s"
    with pytest.raises(NodeUnreachable):
        outcomes.values()


def test_the_timeout_scales_with_the_slowest_node() -> None:
    def step(node: Node) -> str:
        time.sleep(0.6)
        return node.name

    slow = on_nodes(make_nodes(2, time_scale=4.0), step, timeout_s=0.3, what="step")
    assert slow.values() == ["n1", "n2"]  # bound 1.2 s
    fast = on_nodes(make_nodes(2), step, timeout_s=0.3, what="step")
    assert [o.ok for o in fast] == [False, False]


def test_a_bug_is_raised_after_every_node_is_done() -> None:
    finished: list[str] = []

    def step(node: Node) -> None:
        if node.name == "n1":
            raise KeyError("not a harness error")
        if node.name == "n2":
            raise CommandFailed("n2: failed too")
        time.sleep(0.3)
        finished.append(node.name)

    with pytest.raises(KeyError):
        on_nodes(make_nodes(3), step, timeout_s=10, what="step")
    assert finished == ["n3"]


def test_no_nodes_no_outcomes() -> None:
    outcomes = on_nodes([], lambda n: 1, timeout_s=1, what="step")
    assert len(outcomes) == 0
    assert outcomes.values() == []


def test_a_hung_step_does_not_keep_the_process_alive() -> None:
    """A pool would join its workers at exit; the harness must end anyway."""
    script = (
        "import threading\n"
        "from kafka_chaos.harness.fan_out import on_nodes\n"
        "from kafka_chaos.harness.node import Node, SSHTarget\n"
        "node = Node('n1', 1, 'a', SSHTarget('a'), '/r')\n"
        "out = on_nodes([node], lambda n: threading.Event().wait(), timeout_s=0.2, what='hang')\n"
        "print(out.failures()[0].error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=Path(__file__).parents[2],
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "n1: hang still running after 0.2s"
