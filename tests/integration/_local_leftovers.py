"""What a local cluster leaves on this machine, observed independently of the backend code."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path


def _out(*args: str) -> str:
    return subprocess.run(args, capture_output=True, text=True, timeout=20, check=True).stdout


def leftovers(name: str, slot: int, cluster_root: Path, pids: list[int]) -> list[str]:
    """Every trace of cluster ``name`` in ``slot`` still present (empty: clean)."""
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
    found += [
        f"iptables {r}" for r in _out("iptables", "-S").splitlines() if f"kafka-chaos:{name}" in r
    ]
    found += [f"pid {p} alive" for p in pids if _alive(p)]
    found += [f"process {p} mentions {cluster_root}" for p in procs_mentioning(cluster_root)]
    if cluster_root.exists():
        found.append(f"dir {cluster_root}")
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
