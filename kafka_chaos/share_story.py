"""``kafka-chaos share-story RUN_DIR``: what clients saw of a share group, beside what
the broker persisted, partition by partition.

Why: a share-group finding ("delivery stopped", "two members held one
record") is explained by the share-partition's state, not by the clients.
This prints, for a run that kept its coordinators' state
(forensics/coordinator_state.py): the faults and member crashes; for each
partition, every pause in deliveries longer than ``--gap`` seconds beside the
pauses in its persisted state writes, and the persisted state when delivery
stopped; and for each record a share check reported, the persisted writes
that concerned it.  Evidence READMEs quote it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kafka_chaos.forensics.coordinator_state import SHARE_TIMELINE, offset_story, state_at
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.history import NEMESIS
from kafka_chaos.workloads.share_watch import PROBES_FILE

STORY_CHECKS = (
    "share-double-acquire",
    "share-delivery-count-stalled",
    "share-missing-redelivery",
    "share-redelivered-after-leader-change",  # allowed, and why is in the persisted state
)


def add_commands(sub: Any) -> None:
    p = sub.add_parser("share-story", help="a share group's deliveries beside its persisted state")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--gap", type=float, default=8.0, help="seconds without deliveries to report")
    p.set_defaults(handler=lambda args: print("\n".join(story(args.run_dir, args.gap))))


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    if not path.exists():
        raise HarnessError(f"{path} does not exist (a share-group run keeps it)")
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                if line.endswith("\n"):
                    raise HarnessError(f"{path}:{n}: not a JSON line") from None


def gaps(times: list[float], longer_than: float) -> list[tuple[float, float]]:
    """The pauses between consecutive times longer than ``longer_than``."""
    ts = sorted(times)
    return [(a, b) for a, b in zip(ts, ts[1:], strict=False) if b - a > longer_than]


def story(run_dir: Path, gap_s: float = 8.0) -> list[str]:
    rows = list(_lines(run_dir / SHARE_TIMELINE))
    deliveries: dict[tuple[str, int], list[float]] = {}  # (group, partition) -> times
    out = []
    for op in _lines(run_dir / "history.jsonl"):
        at = op["time"] / 1e9
        value = op["value"] if isinstance(op["value"], dict) else {}
        if op["process"] == NEMESIS and value.get("phase") in ("start", "end"):
            out.append(f"{at:7.2f} s  fault {op['f']} {value['phase']} {value.get('targets')}")
        elif op["f"] == "crash":
            out.append(f"{at:7.2f} s  member {op['process']} crashed")
        elif op["f"] == "share-poll" and op["type"] == "ok":  # the share drain's too
            for r in value.get("records", []):
                deliveries.setdefault((value.get("group"), r["partition"]), []).append(at)

    def share_partition(group: str | None, p: int) -> list[dict[str, Any]]:
        return [r for r in rows if r["partition"] == p and r["group"] == group]

    many_groups = len({g for g, _ in deliveries}) > 1

    def named(group: str | None, p: int) -> str:
        """One group's runs name partitions alone, as the evidence READMEs quote them."""
        return f"{group} partition {p}" if many_groups else f"partition {p}"

    # The last delivery of any partition: a partition silent from well before it
    # stopped while the others went on.
    end = max((t for ts in deliveries.values() for t in ts), default=0.0)
    for group, p in sorted(deliveries, key=lambda k: (str(k[0]), k[1])):
        times, mine = deliveries[(group, p)], share_partition(group, p)
        writes = [r["history_s"] for r in mine if r["history_s"] is not None]
        out.append(
            f"{named(group, p)}: {len(times)} deliveries, last at {max(times):.2f} s; "
            f"{len(mine)} state writes; pauses in state writes: "
            + (", ".join(f"{a:.2f}-{b:.2f} s" for a, b in gaps(writes, gap_s)) or "none")
        )
        for a, b in gaps(times + [end], gap_s):
            state = state_at(mine, a)
            until = f"-{b:.2f} s" if b < end else " s on, while other partitions delivered"
            out.append(
                f"  no delivery {a:.2f}{until}; persisted then: start offset {state.start}, "
                f"in flight {state.ranges()[:6]}"
            )
    out += probe_lines(run_dir / PROBES_FILE)
    results = run_dir / "results.json"
    checks = json.loads(results.read_text())["checks"] if results.exists() else {}
    for name in STORY_CHECKS:
        for ex in checks.get(name, {}).get("examples", [])[:5]:
            group, p, offset = ex.get("group"), ex.get("partition"), ex.get("offset")
            told = [
                _told(s)
                for s in offset_story(share_partition(group, p), offset)
                if s["state"] is not None or (s["start_offset"] or 0) > offset
            ][:4]
            out.append(
                f"{name}: {named(group, p)} offset {offset} (lines {ex.get('indices')}); "
                "persisted: " + ("; ".join(told) or "never tracked")
            )
    return out


def _told(step: dict[str, Any]) -> str:
    said = f"{step['history_s']} s {step['kind']} start {step['start_offset']}"
    if step["state"] is not None:
        said += f" state {step['state']} count {step['delivery_count']}"
    return said


def probe_lines(path: Path) -> list[str]:
    """What each stall probe saw (docs/coordinators.md, "Probing a stall"): the stalled
    partitions, who the Admin API said held them and their leaders, what the probe's
    Java member was assigned and given, and when each stall ended."""
    if not path.exists():
        return []
    out = []
    for probe in _lines(path):
        kind = probe["kind"]
        if kind == "resumed":
            out.append(f"{probe['at_s']:7.2f} s  partition {probe['partition']} delivered again"
                       f" (probe {probe['probe']})")  # fmt: skip
        elif kind == "end":
            still = ", ".join(f"{s['partition']} (since {s['since_s']:.2f} s)"
                              for s in probe["still_stalled"]) or "none"  # fmt: skip
            out.append(f"{probe['at_s']:7.2f} s  stall watch ends; still stalled: {still}")
        elif kind == "stall":
            parts = [s["partition"] for s in probe["stalls"]]
            out.append(f"{probe['at_s']:7.2f} s  stalled {parts}, not probed: {probe['why']}")
        elif kind == "probe":
            out += _probe(probe)
    return out


def _probe(probe: dict[str, Any]) -> list[str]:
    stalled = [s["partition"] for s in probe["stalls"]]
    since = ", ".join(f"{s['partition']} since {s['since_s']:.2f} s" for s in probe["stalls"])
    out = [f"{probe['at_s']:7.2f} s  probe {probe['probe']}: stalled {since}"
           + (f"; error {probe['error']}" if probe.get("error") else "")]  # fmt: skip
    admin = probe.get("admin") or {}
    group = admin.get("group") or {}
    held = [
        f"{m['client_id']} {sorted(set(m['partitions']) & set(stalled))}"
        for m in group.get("members", [])
        if set(m["partitions"]) & set(stalled)
    ]
    leaders = admin.get("leaders") or {}
    offsets = admin.get("offsets") or {}
    errors = [k for k in admin if k.endswith("_error")]
    out.append(
        f"           Admin at {admin.get('at_s')} s: assigned to "
        + (", ".join(held) or "no member")
        + "; leaders "
        + ", ".join(f"{p}: {(leaders.get(str(p)) or {}).get('leader')}" for p in stalled)
        + "; share start offset/lag "
        + ", ".join(
            f"{p}: {(offsets.get(str(p)) or {}).get('start_offset')}"
            f"/{(offsets.get(str(p)) or {}).get('lag')}"
            for p in stalled
        )
        + (f"; no answer: {', '.join(errors)}" if errors else "")
    )
    got: dict[int, list[tuple[int, int]]] = {}
    for poll in probe.get("member", []):
        for r in poll["records"]:
            got.setdefault(r["partition"], []).append((r["offset"], r["delivery_count"]))
    joined = (probe.get("admin_joined") or {}).get("group") or {}
    mine = [m["partitions"] for m in joined.get("members", []) if "-probe" in m["client_id"]]
    assigned = mine[0] if mine else None
    out.append(
        f"           probe member: assigned {assigned}"
        + (f" (of the stalled: {sorted(set(assigned) & set(stalled))})" if assigned else "")
        + "; given "
        + (
            ", ".join(
                f"partition {p} offsets {min(o for o, _ in rs)}-{max(o for o, _ in rs)}"
                f" counts {sorted({c for _, c in rs})}"
                for p, rs in sorted(got.items())
            )
            or "nothing"
        )
        + f" in {len(probe.get('member', []))} polls"
    )
    return out
