"""The report's "what each disk fault did" section, from disk-faults.json and provenance.json.

One row per fault and target node, in the broker's own words (recovered
segments, the log end it came back with, truncations, corruption, unclean
elections, a log directory taken offline); a fault kind adds rows just by
being in ``forensics.disk_account.DISK_FAULTS``.  Below it, the lost
values by partition: which replicas held them at the ack, which came back
from the cut without them, which hold them now; and the first lost values
one by one (value, partition, offset, each replica's story), so the report
itself says what was lost and where.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafka_chaos.reports.inputs import as_dict, as_list, load_json

MAX_EXAMPLES = 10
# Kinds shown as their own column; every kind's count is in the row's ``counts``.
COLUMNS = (
    "recovering-unflushed",
    "truncation",
    "corruption",
    "unclean-election",
    "log-dir-offline",
)


def log_ends(recovered: dict[str, Any]) -> str:
    """{"0": 0, "1": 0, "2": 7} -> "p0, p1: 0; p2: 7" (partitions grouped by their log end)."""
    by_end: dict[Any, list[str]] = {}
    for p, end in sorted(recovered.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else 0):
        by_end.setdefault(end, []).append(f"p{p}")
    return "; ".join(f"{', '.join(ps)}: {end}" for end, ps in by_end.items()) or "—"


def _mb(n: Any) -> str:
    return f"{n / 1e6:,.0f} MB" if isinstance(n, (int, float)) else "?"


def fault_did(kind: Any, resolved: dict[str, Any], node: str) -> str:
    """What the fault itself did to ``node``, from its history end line's ``resolved``:
    the harness's side, beside the broker's lines."""
    if kind == "power-loss":
        dropped = node in as_list(resolved.get("unsynced_dropped"))
        return "killed; its unsynced writes dropped" if dropped else "not confirmed applied"
    if kind == "corrupt-segment":
        c = as_dict(as_dict(resolved.get("corrupted")).get(node))
        if not c:
            return "not confirmed applied"
        how = "flipped" if c.get("mode") == "flip" else "cut off"
        n = c.get("bytes")
        said = (
            f"{n} byte{'' if n == 1 else 's'} {how} at the tail of partition "
            f"{c.get('partition')}'s {c.get('which', 'active')} segment "
            f"{Path(str(c.get('segment'))).name} "
            f"(from byte {c.get('from_byte')}; {c.get('size_before')} → {c.get('size_after')} "
            "bytes)"
        )
        if c.get("recovery_point") is not None:
            below = "below" if c.get("below_recovery_point") else "not below"
            said += f", {below} the checkpointed recovery point {c['recovery_point']}"
        return said
    if kind == "disk-full":
        d = as_dict(as_dict(resolved.get("disk_full")).get(node))
        if not d:
            return "not confirmed applied"
        yes = {True: "yes", False: "no"}
        return (
            f"filled with {_mb(d.get('ballast_bytes'))} of ballast, {d.get('free_bytes')} bytes "
            f"free; ENOSPC in its log: {yes.get(d.get('enospc_seen'), '?')}; broker halted: "
            f"{yes.get(d.get('broker_halted'), '?')}; restarted: "
            f"{yes.get(d.get('restarted'), '?')}"
        )
    return ""


def fault_rows(account: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for fault in as_list(account.get("faults")):
        fault = as_dict(fault)
        for node, summary in sorted(as_dict(fault.get("nodes")).items()):
            summary = as_dict(summary)
            counts = as_dict(summary.get("counts"))
            rows.append(
                {
                    "id": fault.get("id"),
                    "f": fault.get("f"),
                    "start_s": fault.get("start_s"),
                    "end_s": fault.get("end_s"),
                    "node": node,
                    "did": fault_did(fault.get("f"), as_dict(fault.get("resolved")), node),
                    "counts": {k: counts.get(k, 0) for k in COLUMNS},
                    "log_ends": log_ends(as_dict(summary.get("recovered_log_end"))),
                    "lines": [as_dict(ln) for ln in as_list(summary.get("lines"))],
                    "lines_dropped": summary.get("lines_dropped", 0),
                }
            )
    return rows


def tally(t: dict[str, Any], key: str, total: Any) -> str:
    """How many of the partition's lost values, e.g. "425/494": the rest are no or
    unknown (``held_at_ack`` is never "no", only yes or unknown)."""
    yes = t.get(f"{key}:yes", 0)
    return f"{yes}/{total}" if isinstance(total, int) and total > 0 else "—"


def _known(flag: Any) -> str:
    """provenance's True/False/None (never guessed) as yes/no/unknown."""
    return "unknown" if flag is None else ("yes" if flag else "no")


def replica_story(r: dict[str, Any]) -> str:
    """One replica of one lost value, in a line: held at the ack, came back without
    it from which cut (and with what log end), and what it holds now."""
    said = [f"{r.get('node')}: held at ack {_known(r.get('held_at_ack'))}"]
    if r.get("cut") is not None:
        said.append(
            f"came back from cut #{r['cut']} with log end {r.get('recovered_log_end')}"
            f" (without it: {_known(r.get('came_back_without'))})"
        )
    said.append(f"holds it now {_known(r.get('holds_now'))}")
    if r.get("now_at_offset") is not None:
        said.append(f"its offset now holds {r['now_at_offset']}")
    return ", ".join(said)


def example(v: dict[str, Any]) -> dict[str, Any]:
    """One lost value of provenance.json: where it was acknowledged, and each replica."""
    return {
        "value": v.get("value"),
        "partition": v.get("partition"),
        "offset": v.get("offset"),
        "acked_s": v.get("acked_s"),
        "leader": v.get("leader"),
        "replicas": [replica_story(as_dict(r)) for r in as_list(v.get("replicas"))],
    }


def lost_section(prov: dict[str, Any]) -> dict[str, Any]:
    parts = []
    for p in as_list(prov.get("partitions")):
        p = as_dict(p)
        nodes = as_dict(p.get("nodes"))
        parts.append(
            {
                "partition": p.get("partition"),
                "lost": p.get("lost"),
                # None: every lost value of it was acknowledged without an offset
                "offsets": "unknown"
                if p.get("first") is None
                else f"{p.get('first')}–{p.get('last')}",
                "nodes": [
                    {
                        "node": n,
                        "held": tally(as_dict(t), "held_at_ack", p.get("lost")),
                        "without": tally(as_dict(t), "came_back_without", p.get("lost")),
                        "holds": tally(as_dict(t), "holds_now", p.get("lost")),
                    }
                    for n, t in sorted(nodes.items())
                ],
            }
        )
    return {
        "lost": prov.get("lost", 0),
        "checker": prov.get("checker_acked_lost"),
        "acks_all": prov.get("acks_all"),
        "partitions": parts,
        "examples": [example(as_dict(v)) for v in as_list(prov.get("values"))[:MAX_EXAMPLES]],
    }


def disk_faults_section(run_dir: Path) -> dict[str, Any] | None:
    """None for a run without disk faults (no section); else the rows and the lost values."""
    loaded = load_json(run_dir / "disk-faults.json")
    if loaded.missing:
        return None
    account = as_dict(loaded.data)
    if not as_list(account.get("faults")) and not account.get("error"):
        return None
    prov = load_json(run_dir / "provenance.json")
    return {
        "error": account.get("error"),
        "rows": fault_rows(account),
        "columns": COLUMNS,
        "lost": None if prov.missing else lost_section(as_dict(prov.data)),
        "lost_missing": prov.missing,
    }
