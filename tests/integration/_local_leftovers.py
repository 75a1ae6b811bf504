"""What a local cluster leaves on this machine, observed independently of the backend code."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path


def _out(*args: str) -> str:
    return subprocess.run(args, capture_output=True, text=True, timeout=20, check=True).stdout


def leftovers(name: str, slot: int, cluster_root: Path, pids: list[int]) -> list[str]:
    """Every trace of cluster ``name`` in ``slot`` still present (empty: clean).

    Namespaces, links and routes are named by slot alone.  Once another cluster holds
    the slot (a test on the other cluster worker made one right after this ``down``),
    they are that cluster's: the local backend gives a slot only when none of them is
    left (``choose_slot``), so this cluster's were gone by then, and are not counted."""
    found = []
    if not _slot_held_by_another(name, slot, cluster_root):
        found += _slot_traces(slot)
    found += [
        f"iptables {r}" for r in _out("iptables", "-S").splitlines() if f"kafka-chaos:{name}" in r
    ]
    found += [f"pid {p} alive" for p in pids if _alive(p)]
    found += [f"process {p} mentions {cluster_root}" for p in procs_mentioning(cluster_root)]
    if cluster_root.exists():
        found.append(f"dir {cluster_root}")
    return found


def _slot_held_by_another(name: str, slot: int, cluster_root: Path) -> str | None:
    """The name of another cluster whose state says it holds ``slot``, if any."""
    for state in cluster_root.parent.glob("*/cluster.json"):
        if state.parent.name == name:
            continue
        try:
            held = json.loads(state.read_text()).get("backend_state", {}).get("slot")
        except (OSError, ValueError, AttributeError):
            continue
        if held == slot:
            return state.parent.name
    return None


def _slot_traces(slot: int) -> list[str]:
    """The namespaces, links and routes of ``slot``."""
    found = []
    found += [
        f"namespace {ns}"
        for ns in _out("ip", "netns", "list").split()
        if ns.startswith(f"kc{slot}-n")
    ]
    links = [link["ifname"] for link in json.loads(_out("ip", "-j", "link", "show"))]
    found += [
        f"link {n}"
        for n in links
        if n == f"kcbr{slot}" or n.startswith(f"kc{slot}v") or n.startswith(f"kc{slot}p")
    ]
    found += [
        f"route {r}"
        for r in _out("ip", "route", "show", "table", "all").splitlines()
        if f"10.251.{slot}.0/24" in r
    ]
    return found


def procs_mentioning(path: Path) -> list[int]:
    """Pids whose command line contains ``path`` (a scan of /proc, for assertions only)."""
    needle = str(path).encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if needle in (proc / "cmdline").read_bytes() and _alive(int(proc.name)):
                    pids.append(int(proc.name))
            except OSError:
                continue
    return pids


def pids_from_files(cluster_root: Path) -> list[int]:
    pids = []
    for f in cluster_root.glob("nodes/*/run/*.pid"):
        text = f.read_text().strip()
        if text.isdigit():
            pids.append(int(text))
    return pids


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def down(name: str) -> subprocess.CompletedProcess[str]:
    """``kafka-chaos cluster down --name name``, bounded, output captured."""
    return subprocess.run(
        ["kafka-chaos", "cluster", "down", "--name", name],
        capture_output=True,
        text=True,
        timeout=300,
    )


@contextlib.contextmanager
def up_killed_once_kafka_starts(
    name: str, disk: str, log: Path, deadline_s: float = 300.0
) -> Iterator[Path]:
    """``cluster up --name name --nodes 1 --disk disk`` SIGKILLed as soon as Kafka starts
    (its mounts are made by then); yields the cluster's directory.

    A leftover of an earlier, killed session is taken down first, and the cluster
    is taken down on exit whatever the test found: the caller asserts what
    ``down`` leaves.
    """
    assert down(name).returncode == 0
    from kafka_chaos.harness.cluster import cluster_dir

    root = cluster_dir(name)
    with log.open("w") as out:
        up = subprocess.Popen(
            ["kafka-chaos", "cluster", "up", "--name", name, "--nodes", "1", "--disk", disk],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + deadline_s
        while not list(root.glob("nodes/*/run/kafka.pid")):  # mounted, Kafka starting
            assert up.poll() is None, f"cluster up ended early: {log.read_text()}"
            assert time.monotonic() < deadline, "no broker started in time"
            time.sleep(0.2)
        os.killpg(up.pid, signal.SIGKILL)
        up.wait(timeout=10)
        yield root
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
        down(name)
