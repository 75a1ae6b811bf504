"""The pid-file guard of harness.services, run by the real shell on real processes.

Only the transport differs from production (``sh -c`` here, SSH there): the
script that decides whether a pid may be signalled is the one nodes run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _shell_node import ShellNode
from kafka_chaos.harness import kafka_db, services
from kafka_chaos.harness.node import Node, SSHTarget


def node_at(root: Path) -> Node:
    (root / "run").mkdir(parents=True, exist_ok=True)
    return Node("n", 1, "127.0.0.1", SSHTarget("127.0.0.1"), str(root))


def guarded(node: Node, action: str) -> int:
    script = services.owned_pid_script(kafka_db.KAFKA, node) + action
    return subprocess.run(["sh", "-c", script], timeout=20).returncode


@pytest.fixture
def tagged_process(tmp_path):
    """A process carrying node n10's tag, as our JVMs do."""
    root = tmp_path / "nodes" / "n10"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", f"-Dkafka.chaos.root={root}"]
    )
    yield root, proc
    proc.kill()
    proc.wait()


def test_our_process_is_found_and_signalled(tagged_process):
    root, proc = tagged_process
    node = node_at(root)
    Path(kafka_db.KAFKA.pid_file(node)).write_text(f"{proc.pid}\n")
    assert guarded(node, "exit 0") == 0
    assert guarded(node, "kill -KILL $pid; exit 0") == 0
    proc.wait(timeout=10)


def test_a_prefix_of_the_root_is_not_ours(tagged_process, tmp_path):
    _, proc = tagged_process
    node = node_at(tmp_path / "nodes" / "n1")  # n1 is a prefix of n10
    Path(kafka_db.KAFKA.pid_file(node)).write_text(f"{proc.pid}\n")
    assert guarded(node, "kill -KILL $pid; exit 0") == 3
    time.sleep(0.2)
    assert proc.poll() is None, "a process of another node was signalled"


@pytest.mark.parametrize("content", ["", "garbage\n", "999999999\n", "1\n"])
def test_missing_foreign_or_malformed_pids_are_refused(tmp_path, content):
    node = node_at(tmp_path / "n1")
    Path(kafka_db.KAFKA.pid_file(node)).write_text(content)
    assert guarded(node, "exit 0") == 3


def test_no_pid_file_means_not_running(tmp_path):
    assert guarded(node_at(tmp_path / "n1"), "exit 0") == 3


def test_a_zombie_counts_as_gone(tagged_process):
    root, proc = tagged_process
    node = node_at(root)
    Path(kafka_db.KAFKA.pid_file(node)).write_text(f"{proc.pid}\n")
    proc.kill()  # not reaped yet: a zombie until wait()
    deadline = time.monotonic() + 5
    while "Z" not in Path(f"/proc/{proc.pid}/status").read_text().split("State:")[1][:3]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert guarded(node, "exit 0") == 3


def _niceness(pid: int) -> int:
    # Field 19 of /proc/PID/stat, counted after the parenthesised command name.
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


@pytest.mark.parametrize(
    ("time_scale", "expected"), [(1.0, 0), (26.0, services.SLOW_GUEST_NICENESS)]
)
def test_a_slow_guests_jvm_yields_the_cpu_to_the_harness(tmp_path, time_scale, expected):
    """The real start line: a slow guest's service runs niced, a host-speed one does not."""
    root = tmp_path / "nodes" / "n1"
    node = ShellNode("n1", 1, "127.0.0.1", SSHTarget("127.0.0.1"), str(root), time_scale)
    launcher = Path(kafka_db.KAFKA.launcher(node))
    launcher.parent.mkdir(parents=True)
    launcher.write_text(
        f"echo $$ > {kafka_db.KAFKA.pid_file(node)}\n"
        f'exec {sys.executable} -c "import time; time.sleep(60)" -Dkafka.chaos.root={root}\n'
    )
    assert services.start(kafka_db.KAFKA, node) is True
    pid = int(Path(kafka_db.KAFKA.pid_file(node)).read_text())
    try:
        assert _niceness(pid) == expected + os.nice(0)
    finally:
        os.kill(pid, signal.SIGKILL)
