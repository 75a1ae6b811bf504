"""Explain *how* a run lost data, from the fault records and the broker logs.

The checkers prove *that* acknowledged writes vanished; engineers then ask
which replica was elected and which offsets were thrown away.  Both are on
record: the nemesis writes what it resolved (leader killed, replica elected,
when the ISR shrank) into the schedule, and a broker that truncates its log
below its high watermark says so in its server log.  This module only reads
and condenses them; the template escapes everything.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

MAX_LINES = 20

# "Truncating <topic>-<p> to offset N below high watermark H": committed data discarded.
TRUNCATION = re.compile(
    r"Truncating (?P<tp>\S+) to offset (?P<to>\d+) below high watermark (?P<hw>\d+)"
)
# KRaft's periodic unclean election producing records, or the ZK controller's message.
UNCLEAN = re.compile(r"electUnclean generated [1-9]\d* records|[Uu]nclean leader election\b")


def mechanism_section(run_dir: Path, topic: str | None, ops: list[dict[str, Any]]) -> dict:
    """Fault resolutions plus truncation and unclean-election log lines for ``topic``."""
    resolved = [
        {"id": op.get("id"), "f": op.get("f"), "details": op["resolved"]}
        for op in ops
        if isinstance(op.get("resolved"), dict)
    ]
    truncations: list[dict[str, Any]] = []
    elections: list[dict[str, str]] = []
    for node, log in _server_logs(run_dir):
        for line in _lines(log):
            m = TRUNCATION.search(line)
            if m and (topic is None or m.group("tp").startswith(f"{topic}-")):
                to, hw = int(m.group("to")), int(m.group("hw"))
                if len(truncations) < MAX_LINES:
                    truncations.append(
                        {
                            "node": node,
                            "partition": m.group("tp"),
                            "to": to,
                            "hw": hw,
                            "discarded": hw - to,
                            "line": line.strip(),
                        }
                    )
            elif UNCLEAN.search(line) and len(elections) < MAX_LINES:
                elections.append({"node": node, "line": line.strip()})
    return {"resolved": resolved, "truncations": truncations, "elections": elections}


def _server_logs(run_dir: Path) -> list[tuple[str, Path]]:
    logs = run_dir / "logs"
    if not logs.is_dir():
        return []
    found = []
    for node_dir in sorted(p for p in logs.iterdir() if p.is_dir()):
        for log in sorted(node_dir.rglob("*.log")):
            found.append((node_dir.name, log))
    return found


def _lines(path: Path):
    """Stream a log; undecodable bytes never stop the report."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        yield from fh
