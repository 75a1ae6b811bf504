"""``Node.run`` against a real sshd whose transport breaks mid-command.

No mocks: the nodes are real namespaces with their own sshd (no Kafka), and
the transport is broken the way a loaded or flaky link breaks it - the TCP
connection under a running command goes away.  These are the failure modes
that lost exit statuses (-1) and hung the end-of-run heal before
(docs/control-plane.md).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

import pytest
from _kafka_clusters import bare_cluster
from kafka_chaos.harness.errors import NodeUnreachable
from kafka_chaos.harness.node import Node

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root"),
]

NAME = "tr1"


@pytest.fixture(scope="module")
def cluster():
    with bare_cluster(NAME, nodes=2) as c:
        yield c


def _break_after(node: Node, delay_s: float, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Cut the TCP connection of the next command ``delay_s`` after it is opened."""
    opened: list[Any] = []
    real_open = Node._open

    def open_and_arm(self: Node) -> Any:
        conn = real_open(self)
        if not opened:
            sock = conn.transport.sock
            threading.Timer(delay_s, lambda: sock.shutdown(socket.SHUT_RDWR)).start()
        opened.append(conn)
        return conn

    node.close()  # no idle connection: the next command opens (and arms) one
    monkeypatch.setattr(Node, "_open", open_and_arm)
    return opened


def test_an_idempotent_command_survives_a_transport_broken_under_it(cluster, monkeypatch) -> None:
    node = cluster.nodes[0]
    opened = _break_after(node, 0.5, monkeypatch)
    t0 = time.monotonic()
    out = node.run("sleep 1.5; echo done", timeout=20)
    assert out.exit_code == 0 and out.stdout.strip() == "done"
    assert len(opened) == 2, "the retry must run on a fresh connection"
    assert time.monotonic() - t0 < 10


def test_a_non_idempotent_command_is_not_repeated_and_the_error_says_what_ssh_said(
    cluster, monkeypatch
) -> None:
    node = cluster.nodes[0]
    marker = node.path("run", "ran-once")
    node.run(f"rm -f {marker}", timeout=10)
    opened = _break_after(node, 0.5, monkeypatch)
    with pytest.raises(NodeUnreachable) as err:
        node.run(f"echo x >> {marker}; sleep 1.5", timeout=20, idempotent=False)
    message = str(err.value)
    assert message.startswith(f"{node.name} ({node.ssh.host}:22): `echo x")
    assert message.rstrip().split(": ")[-1], "what SSH said is never empty"
    assert len(opened) == 1
    monkeypatch.undo()
    assert node.run(f"cat {marker}", timeout=10).stdout == "x\n"


def test_one_threads_broken_transport_never_touches_another_threads_command(cluster) -> None:
    """Before: a failure closed the one shared connection under every thread."""
    node = cluster.nodes[1]
    results: list[Any] = []

    def slow() -> None:
        try:
            results.append(node.run("sleep 2; echo slow", timeout=20).stdout.strip())
        except Exception as e:  # noqa: BLE001 - recorded and asserted below
            results.append(e)

    worker = threading.Thread(target=slow)
    worker.start()
    time.sleep(0.5)
    for _ in range(5):  # each times out; their connections are dropped, not shared
        with pytest.raises(NodeUnreachable, match="timed out"):
            node.run("sleep 5", timeout=0.2)
    worker.join(30)
    assert results == ["slow"]


def test_a_command_timeout_is_a_clear_error_and_no_exit_status_is_invented(cluster) -> None:
    node = cluster.nodes[1]
    t0 = time.monotonic()
    with pytest.raises(NodeUnreachable, match=r"timed out after 0\.5s: sleep 3"):
        node.run("sleep 3", timeout=0.5)
    assert time.monotonic() - t0 < 3
    assert node.run("exit 7", timeout=10, check=False).exit_code == 7


def test_warmed_connections_serve_a_command_while_another_holds_one(cluster, monkeypatch) -> None:
    """A fault's command must not pay for a connection while the sampler holds one."""
    node = cluster.nodes[0]
    node.close()
    node.warm(2)
    opened: list[Any] = []
    real_open = Node._open

    def counting_open(self: Node) -> Any:
        opened.append(self.name)
        return real_open(self)

    monkeypatch.setattr(Node, "_open", counting_open)
    holder = threading.Thread(target=lambda: node.run("sleep 1", timeout=20))
    holder.start()
    time.sleep(0.3)
    assert node.run("echo fault", timeout=20).stdout.strip() == "fault"
    holder.join(30)
    assert opened == []  # both commands ran on the two warmed connections
    node.warm(2)  # already warm: opens nothing
    assert opened == []
