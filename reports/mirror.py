"""The report's disaster-recovery section: both data centres' timelines, and the seed
lab's questions answered in words (what the failover lost, re-read and skipped, and
how long writes and reads stopped).

From results.json (``stats.mirror``, the mirror checks' counts) and one pass over
history.jsonl for the per-cluster timeline.  Absent for runs without a mirror.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from kafka_chaos.checkers import catalog
from kafka_chaos.harness.history import NEMESIS, read_history
from kafka_chaos.reports import svg
from kafka_chaos.reports.inputs import as_dict
from kafka_chaos.reports.templating import environment
from kafka_chaos.reports.timeline import fault_bands, run_faults
from markupsafe import Markup

NS = 1_000_000_000
# The mirror checks whose counts the answers cite: the family's own, from the catalog.
COUNTED = catalog.names("mirror")
PREFIX = "dc2/"


def mirror_section(run_dir: Path, config: dict[str, Any], results: dict[str, Any]) -> str | None:
    """The section's body (the mirror workload declares it: workloads/registry.py),
    or None for a run the mirror checks did not judge."""
    stats = as_dict(as_dict(results.get("stats")).get("mirror"))
    if not stats:
        return None
    checks = as_dict(results.get("checks"))

    def count(name: str) -> int:
        return int(as_dict(checks.get(name)).get("count") or 0)

    flow = _flows(run_dir / "history.jsonl")
    bands = fault_bands(run_faults(run_dir, results))
    mirror = {
        "stats": stats,
        "answers": answers(stats, {n: count(n) for n in COUNTED}, flow),
        "translated": _translated(stats),
        "svg": _chart(flow, bands) if flow["rows"] else None,
    }
    return environment().get_template("mirror.j2").render(mirror=mirror)


def _what_was_lost(stats: dict[str, Any]) -> str:
    at = stats.get("failover_at_s")
    rpo, secs, later = (
        stats.get("rpo_values", 0),
        stats.get("rpo_seconds", 0.0),
        stats.get("copied_later", 0),
    )
    unmeasured = stats.get("rpo_unmeasured", 0)
    acked = stats.get("acked_before", 0) - unmeasured
    if unmeasured and not acked:
        return (
            f"What did the failover lose? Not measured: when it began ({at} s), dc2 gave "
            "none of its partitions' ends (a fault on dc2), so what it lacked of the "
            f"{unmeasured} values dc1 had acknowledged is unknown."
        )
    answer = (
        f"What did the failover lose? When it began ({at} s), dc2 held every one of the "
        f"{acked} values dc1 had acknowledged: nothing (RPO 0)."
        if not rpo
        else f"What did the failover lose? When it began ({at} s), dc2 lacked {rpo} of the "
        f"{acked} values dc1 had acknowledged: the last {secs} s of writes (the RPO). "
        f"MirrorMaker copied {later} of them after dc1 came back; a failover that could "
        "not wait for dc1 loses them."
    )
    if unmeasured:
        answer += (
            f" {unmeasured} more acknowledged values are not counted: dc2 did not give their "
            "partitions' ends as the failover began (a fault on dc2), so their RPO is unmeasured."
        )
    return answer


def answers(stats: dict[str, Any], counts: dict[str, int], flow: dict[str, Any]) -> list[str]:
    """The seed lab's questions, answered from this run's figures."""
    if not stats.get("failover"):
        out = ["There was no failover in this run: only the mirror was judged."]
    else:
        out = [_what_was_lost(stats)]
        reread = counts["failover-reread"]
        why = (
            "MirrorMaker translates a committed offset down to its last offset sync, and its "
            "checkpoints trail the group's commits."
            if _translated(stats)
            else "MirrorMaker had written no checkpoint for the group by then, so it started on "
            "dc2 where auto.offset.reset put it (the earliest offset)."
        )
        out.append(
            f"What did it re-read? The group read {reread} values again on dc2 that it had read"
            f" on dc1: {why}"
            if reread
            else "What did it re-read? Nothing: the group read no value on both clusters."
        )
        skipped = counts["failover-skip"]
        out.append(
            f"What did it skip? {skipped} values on dc2 that the group never read on either "
            "cluster, though it read past them: translated offsets must never do this."
            if skipped
            else "What did it skip? Nothing: every value on dc2 below where the group read "
            "was read on one cluster or the other."
        )
        for what, gap in (("writes", flow.get("write_gap")), ("reads", flow.get("read_gap"))):
            if gap is not None:
                out.append(
                    f"Were {what} disrupted? For {gap[2]:.1f} s: none between {gap[0]:.1f} s "
                    f"(the last on dc1) and {gap[1]:.1f} s (the first on dc2)."
                )
    lost = counts["mirror-lost"]
    caught = "caught up" if stats.get("caught_up") else "did NOT catch up"
    out.append(
        f"Is the mirror identical in all that matters? MirrorMaker {caught} after the heal "
        f"({stats.get('catch_up_s')} s); {lost} values dc1 holds are missing on dc2, "
        f"{counts['mirror-partition']} are in another partition, "
        f"{counts['mirror-order']} are out of dc1's order there, and "
        f"{counts['mirror-duplicate']} were copied twice."
    )
    return out


def _translated(stats: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for group, parts in as_dict(stats.get("translated")).items():
        for topic, partition, downstream, upstream in parts:
            rows.append({"group": group, "topic": topic, "partition": partition,
                         "translated": downstream, "committed": upstream})  # fmt: skip
    return sorted(rows, key=lambda r: (r["group"], r["partition"]))


def _flows(history: Path) -> dict[str, Any]:
    """Per second, acks and records read on each cluster; the write and read gaps."""
    rows: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    last = {"dc1 acked": None, "dc1 read": None}
    first = {"dc2 acked": None, "dc2 read": None}
    if not history.exists():
        return {"rows": {}}
    for op in read_history(history):
        if op["process"] == NEMESIS or op["type"] != "ok":
            continue
        v = op.get("value") if isinstance(op.get("value"), dict) else {}
        if v.get("final"):
            continue
        t = op["time"]
        if op["f"] == "send":
            key = ("dc2" if str(v.get("topic", "")).startswith(PREFIX) else "dc1") + " acked"
        elif op["f"] == "poll" and v.get("records"):
            key = "dc2" if str(v["records"][0].get("topic", "")).startswith(PREFIX) else "dc1"
            key += " read"
        else:
            continue
        rows[t // NS][key] += 1 if op["f"] == "send" else len(v["records"])
        if key in last:
            last[key] = t
        elif first[key] is None:
            first[key] = t
    return {
        "rows": rows,
        "write_gap": _gap(last["dc1 acked"], first["dc2 acked"]),
        "read_gap": _gap(last["dc1 read"], first["dc2 read"]),
    }


def _gap(before: int | None, after: int | None) -> tuple[float, float, float] | None:
    if before is None or after is None:
        return None
    return before / NS, after / NS, max(0.0, (after - before) / NS)


def _chart(flow: dict[str, Any], bands: list[svg.Band]) -> Markup:
    rows = flow["rows"]
    xs = list(range(0, max(rows) + 1))
    series = [
        (name, [rows.get(x, {}).get(name, 0) for x in xs], color)
        for name, color in (
            ("dc1 acked", svg.PALETTE[2]),
            ("dc2 acked", svg.PALETTE[3]),
            ("dc1 read", svg.PALETTE[0]),
            ("dc2 read", svg.PALETTE[1]),
        )
    ]
    return svg.line_chart(xs, series, title="per second, on each data centre", bands=bands)
