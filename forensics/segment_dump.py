"""DumpLogSegments over a node's segment files, past a segment it cannot read.

Why: one damaged batch stops the tool (a record that no longer parses
throws from DefaultRecordBatch's iterator), and one run of the tool covers
every segment of the topic on the node, so one damaged closed segment cost
the whole node's dump.  Kafka never re-reads a segment below its recovery
point on start, so this dump may be the only place such damage shows.
Here what the tool printed is kept, the segment it stopped in is reported
with its exception, and the files after it are dumped by a new run.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from shlex import quote
from typing import Any

from kafka_chaos.forensics.log_dump import last_dumped
from kafka_chaos.harness import kafka_db
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.node import Node

DUMP_TIMEOUT_S = 300.0


def exception_line(stderr: str) -> str:
    """The exception a JVM tool died with: its first line naming one, else the last line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    named = [ln for ln in lines if "Exception" in ln or "Error" in ln]
    return (named or lines or ["no output on stderr"])[0][:300]


def dump_segments(
    cluster: Cluster, node: Node, name: str, files: list[str], local: Path
) -> list[dict[str, Any]]:
    """Dump ``files`` on ``node`` into ``local`` (gzip); the segments it could not read.

    Each run's output is one gzip member appended to ``local`` (readers take
    concatenated members as one stream).  ``name`` names the remote temp file.
    """
    remote = node.path("run", f"replica-dump-{name}.txt.gz")
    part = local.with_name(local.name + ".part")
    local.write_bytes(b"")
    unreadable: list[dict[str, Any]] = []
    remaining = list(files)
    while remaining:
        tool = kafka_db.tool_command(
            cluster,
            node,
            kafka_db.dump_log_segments_class(cluster.kafka_version),
            ["--files", ",".join(remaining), "--print-data-log"],
        )
        try:
            res = node.run(
                f"set -o pipefail; {tool} | gzip -1 > {quote(remote)}",
                timeout=DUMP_TIMEOUT_S,
                check=False,
            )
            node.get(remote, part)
        finally:
            node.run(f"rm -f {quote(remote)}", timeout=30, check=False)
        with local.open("ab") as out:
            out.write(part.read_bytes())
        if res.exit_code == 0:
            break
        with gzip.open(part, "rt", errors="replace") as lines:
            stopped = last_dumped(lines)
        if stopped not in remaining:
            raise HarnessError(
                f"{node.name}: DumpLogSegments exited {res.exit_code} before its first segment: "
                f"{exception_line(res.stderr)}"
            )
        unreadable.append({"segment": stopped, "error": exception_line(res.stderr)})
        remaining = remaining[remaining.index(stopped) + 1 :]
    part.unlink(missing_ok=True)
    return unreadable
