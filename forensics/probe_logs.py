"""The logs around each share-stall probe, cut out after the run (share-probes/).

Why: a stall's mechanism, if it is anywhere, is in the share-partition
leader's log (``--broker-debug kafka.server.share``) or the members' client
logs (``--client-debug``) at the moment it began, and those logs are tens of
megabytes per run.  The evidence keeps these excerpts, not the whole logs:
for each probe in ``share-probes.jsonl``, every line of every collected log
timed from 10 s before its earliest stall began to 10 s after the probe
ended that names the run's topic, a share component or a warning/error.

Times: a probe line carries ``wall_ms`` (the wall clock when it was taken) as
well as ``at_s`` on the history's axis, so a stall's start maps to the logs'
wall-clock stamps without any other anchor.  Brokers and the Java client
stamp UTC (this harness's nodes run in UTC).
"""

from __future__ import annotations

import gzip
import json
import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kafka_chaos.workloads.share_watch import PROBES_FILE

log = logging.getLogger(__name__)

MARGIN_MS = 10_000
MAX_LINES = 20_000  # per log and probe: an excerpt, not a copy
EXCERPTS = "share-probes"
_STAMP = re.compile(rb"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})[,.](\d{3})")
_WANTED = re.compile(rb"share|WARN|ERROR", re.IGNORECASE)


def _stamp_ms(line: bytes) -> int | None:
    m = _STAMP.search(line[:64])
    if m is None:
        return None
    day, clock, ms = (x.decode() for x in m.groups())
    at = datetime.strptime(f"{day} {clock}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    return int(at.timestamp() * 1000) + int(ms)


def _open(path: Path) -> Any:
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def excerpt(path: Path, start_ms: int, end_ms: int, topic: bytes) -> Iterator[bytes]:
    """The lines of ``path`` timed in [start_ms, end_ms] that name ``topic``, a share
    component or a warning or error; an untimed line (a stack trace's) goes with the
    timed line before it."""
    kept = 0
    keep = False
    with _open(path) as f:
        for line in f:
            at = _stamp_ms(line)
            if at is not None:
                if at > end_ms:
                    return
                keep = at >= start_ms and (topic in line or _WANTED.search(line) is not None)
            if keep:
                yield line
                kept += 1
                if kept >= MAX_LINES:
                    return


def logs_of(run_dir: Path) -> list[Path]:
    """The run's collected broker logs and its clients' logs (not the harness's own)."""
    found = sorted((run_dir / "logs").rglob("*.log*")) if (run_dir / "logs").is_dir() else []
    found += sorted(p for p in run_dir.glob("*.log*") if p.name != "harness.log")
    found += sorted((run_dir / "client-logs").glob("*.log*"))  # --client-debug
    found += sorted((run_dir / EXCERPTS).rglob("*.log*"))  # the probe member's own
    return [p for p in found if p.is_file() and not p.name.startswith("probe-")]


def cut(run_dir: Path, topic: str) -> list[Path]:
    """Write ``share-probes/probe-<n>-<log>.gz`` for every probe; return what was written."""
    probes_file = run_dir / PROBES_FILE
    if not probes_file.exists():
        return []
    out_dir = run_dir / EXCERPTS
    written = []
    for line in probes_file.read_text().splitlines():
        probe = json.loads(line)
        if probe.get("kind") != "probe" or "wall_ms" not in probe:
            continue
        since = min(s["since_s"] for s in probe["stalls"])
        start = probe["wall_ms"] - int((probe["at_s"] - since) * 1000) - MARGIN_MS
        end = probe["wall_ms"] + int(probe.get("duration_s", 0) * 1000) + MARGIN_MS
        for path in logs_of(run_dir):
            name = "-".join(path.relative_to(run_dir).parts).removesuffix(".gz")
            dest = out_dir / f"probe-{probe['probe']}-{name}.gz"
            lines = list(excerpt(path, start, end, topic.encode()))
            if lines:
                out_dir.mkdir(exist_ok=True)
                with gzip.open(dest, "wb") as f:
                    f.writelines(lines)
                written.append(dest)
    log.info("share probes: %d log excerpts in %s", len(written), out_dir)
    return written
