"""A cluster that did not come back: which brokers never registered, and their evidence.

Why: after a power loss a broker can fail to start again (its log directory
goes offline on a file it cannot read).  A bench that only sees "brokers not
registered" at the next run's start loses every later run and the reason.
This finds the brokers still missing after a run, and copies what a reader
needs to judge it (the broker's error lines with their stack traces, and
the files those lines name) before the cluster is rebuilt.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path
from typing import Any

from kafka_chaos.harness.cluster import Cluster

# A line that says why a broker stopped serving or never started.
TROUBLE = re.compile(
    r"\] (ERROR|FATAL) |Stopping serving logs in dir|Shutdown broker because|"
    r"Expected \[\d+\] entries in checkpoint file"
)
# What follows such a line and belongs to it (a stack trace).
CONTINUATION = re.compile(r"^(\s+at |\s*Caused by:|\s*\.\.\. \d+ more|[\w.$]+(Exception|Error)\b)")
# A file path in a log line: absolute, up to whitespace or a bracket.
PATH = re.compile(r"(/[^\s\[\]()',]+)")
MAX_LINES = 2000


def trouble_lines(lines: list[str]) -> list[str]:
    """The broker's ERROR/FATAL and log-dir-failure lines, each with its stack trace."""
    kept: list[str] = []
    keep_following = False
    for line in lines:
        if TROUBLE.search(line):
            kept.append(line)
            keep_following = True
        elif keep_following and CONTINUATION.match(line):
            kept.append(line)
        else:
            keep_following = False
        if len(kept) >= MAX_LINES:
            break
    return kept


def named_files(lines: list[str], root: Path) -> list[Path]:
    """Files under ``root`` that ``lines`` name and that exist now, each once."""
    found: dict[Path, None] = {}
    for line in lines:
        for m in PATH.finditer(line):
            p = Path(m.group(1))
            if p.is_relative_to(root) and p.is_file():
                found[p] = None
    return list(found)


def unregistered(cluster: Cluster, wait_s: float) -> list[str]:
    """Names of the nodes whose broker is not registered within ``wait_s`` (a restart
    after a heal takes 5 to 7 s here, so the caller gives it time)."""
    from kafka_chaos.harness import admin

    want = {n.node_id: n.name for n in cluster.nodes}
    deadline = time.monotonic() + wait_s
    missing = sorted(want.values())
    while True:
        try:
            have = set(admin.broker_ids(cluster.bootstrap_servers(), timeout_s=10.0))
            missing = sorted(name for nid, name in want.items() if nid not in have)
        except Exception:  # no broker answers at all: every one is missing
            missing = sorted(want.values())
        if not missing or time.monotonic() >= deadline:
            return missing
        time.sleep(2.0)


def save_evidence(cluster: Cluster, names: list[str], dest: Path) -> dict[str, Any]:
    """Copy each named node's trouble lines and the files they name under ``dest``.

    Local backend only (the node's files are on this host); returns what was kept.
    """
    kept: dict[str, Any] = {}
    for name in names:
        node = cluster.node(name)
        root = Path(node.path())
        out = dest / name
        out.mkdir(parents=True, exist_ok=True)
        log_path = Path(node.path("logs", "server.log"))
        try:
            lines = log_path.read_text(errors="replace").splitlines()
        except OSError as e:
            kept[name] = {"error": f"cannot read {log_path}: {e}"}
            continue
        trouble = trouble_lines(lines)
        (out / "server-log-trouble.log").write_text("\n".join(trouble) + "\n")
        (out / "server-log-tail.log").write_text("\n".join(lines[-300:]) + "\n")
        files = []
        for f in named_files(trouble, root):
            target = out / "files" / f.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, target)
            files.append({"path": str(f), "bytes": f.stat().st_size, "copy": str(target)})
        kept[name] = {"trouble_lines": len(trouble), "files": files}
    return kept
