"""The share-group checks in plain Python: the reference the Spark checks must agree with.

Definitions (docs/results.md, "Share-group checks"); every check is per share
group, and a *committed* ack is one whose ``share-ack`` completed ``ok`` with
its partition not listed as failed.

- share-lost: an acknowledged send no member of the group ever committed an
  accept or reject of, and whose deliveries stayed below the delivery limit.
- share-double-acquire: two deliveries of one record with the same delivery
  count to different members with no possible share-partition leader change
  between them, or a member's committed ack of a record invoked after another
  member had received it again (whatever the leader changes).
- share-delivery-count-stalled: the same member got a record again with the
  same delivery count, with no possible leader change between, after its hold
  had ended (a committed ack of it before the second poll, or the lock's
  expiry): an acquisition the leader did not count.
- share-redelivered-after-leader-change (info): the same or a lower count
  again where a leader change may lie between the two acquisitions.
- share-redelivered-after-accept / -reject: a delivery whose poll began after
  a committed accept / reject of the record had completed.
- share-delivery-count: a delivery whose count is lower than an earlier,
  non-overlapping delivery's within one tenure, or above the limit.

Tenures (checkers/share/share_tenures.py states the rules) are computed here apart,
by ``Tenures``, from the cluster-state samples and the history's fault lines.
- share-missing-redelivery: a record whose last delivery ended without a
  committed accept or reject (released, held by a member that crashed, closed
  or never acknowledged), below the limit, and never delivered again.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from kafka_chaos.checkers.catalog import names
from kafka_chaos.checkers.share.share_checks import FINAL_ACKS, LEADER_CHANGE
from kafka_chaos.workloads import mirror_spec

from testkit.share_events import Ack, Delivery, Record, ShareEvents

S = 1_000_000_000
ENDLESS = 1 << 62


class Tenures:
    """When a partition may have changed share-partition leader, judged the plain way.

    The same rules as checkers/share/share_tenures.py, which the Spark checks use: a
    change of the sampled leader between samples i-1 and i may lie anywhere in
    [t(i-1), t(i+1)]; so may an unsampled stretch (before the first sample,
    after the last, a gap over 2.5 s); a kill or restart of a node that may
    have led the partition spans the fault; and a partition never sampled
    takes every broker fault, up to 300 s after its heal, as a possible change.
    """

    WIPES = {"kill": "killed", "restart": "restarted", "kill-all": "killed with every node",
             "rolling-restart": "restarted in a rolling restart",
             "hard-rolling-restart": "killed in a hard rolling restart",
             "unclean-election": "killed in an unclean election"}  # fmt: skip

    def __init__(self, samples: list[dict[str, Any]], fault_lines: list[dict[str, Any]]) -> None:
        keys = sorted(
            {(str(p["topic"]), p["partition"]) for s in samples for p in s.get("partitions") or []}
        )
        self.seq: dict[tuple[str, int], list[tuple[int, Any]]] = {k: [] for k in keys}
        for s in samples:
            parts = {(str(p["topic"]), p["partition"]): p for p in s.get("partitions") or []}
            for key in keys:
                if s.get("error") or not parts:
                    self.seq[key].append((s["time"], "unknown"))
                elif key[0] in {t for t, _ in parts}:
                    p = parts.get(key)
                    leader = "unknown" if p is None else p.get("leader")
                    if leader != "unknown" and (not isinstance(leader, int) or leader < 0):
                        leader = None
                    self.seq[key].append((s["time"], leader))
        starts = [x for x in fault_lines if x["value"].get("phase") == "start"]
        ends = {
            x["value"]["id"]: x["time"] for x in fault_lines if x["value"].get("phase") == "end"
        }
        self.faults = [(x["f"], x["value"].get("targets") or [], x["time"],
                        ends.get(x["value"]["id"], ENDLESS)) for x in starts]  # fmt: skip

    @staticmethod
    def _who(leader: Any) -> str:
        return (
            "no leader" if leader is None else ("unknown" if leader == "unknown" else f"n{leader}")
        )

    def change(self, topic: str, partition: int, after: int, before: int) -> str | None:
        """The boundary that could lie between an acquisition begun at ``after`` and
        one ended at ``before``: a named change before a 'not sampled' one, then the
        earliest; None if they fall in one tenure."""
        hits: list[tuple[bool, int, str]] = []

        def consider(start: int, end: int, why: str) -> None:
            if end > after and start < before:
                hits.append((why.startswith("leadership"), start, why))

        seq = self.seq.get((topic, partition))
        at = f"{topic}/{partition}"
        if seq:
            times = [t for t, _ in seq]
            nxt = lambda i: times[i + 1] if i + 1 < len(times) else times[i] + 7 * S  # noqa: E731
            consider(
                -ENDLESS, nxt(0), f"leadership of {at} not sampled before {times[0] / S:.1f} s"
            )
            for i in range(1, len(seq)):
                (t0, a), (t1, b) = seq[i - 1], seq[i]
                if a != b:
                    consider(t0, nxt(i), f"leader of {at} moved {self._who(a)} -> {self._who(b)} "
                                         f"between {t0 / S:.1f} s and {t1 / S:.1f} s")  # fmt: skip
                elif t1 - t0 > 2.5 * S:
                    consider(t0, nxt(i), f"leadership of {at} not sampled between "
                                         f"{t0 / S:.1f} s and {t1 / S:.1f} s")  # fmt: skip
            consider(
                times[-1], ENDLESS, f"leadership of {at} not sampled after {times[-1] / S:.1f} s"
            )
            for f, targets, start, end in self.faults:
                if f not in self.WIPES:
                    continue
                for node in targets:
                    if self._may_have_led(seq, node, start, end):
                        consider(start, end, f"{node}, its leader, was {self.WIPES[f]} at "
                                             f"{start / S:.1f} s")  # fmt: skip
                        break
        else:
            for f, targets, start, end in self.faults:
                if f in mirror_spec.FAULTS:  # MirrorMaker's node: no broker
                    continue
                until = end if end >= ENDLESS else end + 300 * S
                who = ", ".join(targets) or "the cluster"
                unrecorded = "(leadership of this partition was not recorded)"
                consider(start, until, f"{f} of {who} at {start / S:.1f} s {unrecorded}")
        return min(hits)[2] if hits else None

    @staticmethod
    def _may_have_led(seq: list[tuple[int, Any]], node: str, start: int, end: int) -> bool:
        if not (node.startswith("n") and node[1:].isdigit()) or start < seq[0][0]:
            return True
        ident = int(node[1:])
        for i, (t, leader) in enumerate(seq):
            shown_until = seq[i + 1][0] if i + 1 < len(seq) else ENDLESS
            if t <= end and shown_until >= start and leader in (ident, "unknown"):
                return True
        return False


@dataclass
class ShareFindings:
    anomalies: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {c: [] for c in names("share")}
    )
    undecided: int = 0  # acked values whose accept/reject has an unknown outcome
    at_limit: int = 0  # acked values the broker archived at the delivery limit
    incomplete_drains: list[str] = field(default_factory=list)


def _delivery(d: Delivery) -> dict[str, Any]:
    return {"process": d.process, "time": d.time, "delivery_count": d.count, "index": d.index}


def _place(group: str, record: tuple, value: Any) -> dict[str, Any]:
    topic, partition, offset = record
    return {"group": group, "topic": topic, "partition": partition, "offset": offset,
            "value": value}  # fmt: skip


def judge_share(ev: ShareEvents, samples: list[dict[str, Any]] | None = None) -> ShareFindings:
    """Every share check on one history; ``samples``: its cluster-state.jsonl rows."""
    out = ShareFindings()
    tenures = Tenures(samples or [], ev.faults)
    by_record: dict[tuple, list[Delivery]] = defaultdict(list)
    for d in ev.deliveries:
        by_record[(d.group, d.record)].append(d)
    acks: dict[tuple, list[Ack]] = defaultdict(list)
    for a in ev.acks:
        acks[(a.group, a.record)].append(a)
    for key in by_record:
        by_record[key].sort(key=lambda d: (d.time, d.index))
    limit = {g: s["delivery_limit"] for g, s in ev.groups.items()}
    lock_ns = {g: s["lock_ms"] * 1_000_000 for g, s in ev.groups.items()}
    out.incomplete_drains = sorted(g for g in ev.groups if not ev.drains.get(g, False))

    for (group, record), ds in by_record.items():
        value = ds[0].value
        found = out.anomalies
        committed = [a for a in acks[(group, record)] if a.outcome == "committed"]
        topic, partition, _ = record
        # A repeated count: across a possible leader change allowed (information); within
        # one tenure, to another member one acquisition handed out twice, to the same
        # member an uncounted acquisition once its first hold had ended.
        seen: dict[int, Delivery] = {}
        for d in ds:
            first = seen.setdefault(d.count, d)
            if first is d:
                continue
            pair = {**_place(group, record, value), "how": "same delivery count",
                    "deliveries": [_delivery(first), _delivery(d)],
                    "indices": [first.index, d.index]}  # fmt: skip
            change = tenures.change(topic, partition, first.invoke_time, d.time)
            if change is not None:
                who = "another member" if first.process != d.process else "same member"
                found[LEADER_CHANGE].append(
                    {**pair, "how": f"same delivery count, {who}", "change": change}
                )
            elif first.process != d.process:
                found["share-double-acquire"].append(pair)
            else:
                ended = any(
                    a.process == d.process and a.time is not None
                    and a.invoke_time >= first.time and a.time < d.invoke_time
                    for a in committed
                )  # fmt: skip
                lapsed = group in lock_ns and d.invoke_time > first.time + lock_ns[group]
                if ended or lapsed:
                    found["share-delivery-count-stalled"].append(pair)
        # double acquisition (b): a holder's ack applied after someone else got the record
        for a in committed:
            mine = [d for d in ds if d.process == a.process and d.time <= a.invoke_time]
            if not mine:
                continue
            held_from = mine[-1].time
            crashed = ev.crashes.get(a.process)
            if crashed is not None and crashed < a.invoke_time:
                continue
            for d in ds:
                if d.process != a.process and held_from < d.time < a.invoke_time:
                    found["share-double-acquire"].append(
                        {
                            **_place(group, record, value),
                            "how": "ack applied after redelivery",
                            "deliveries": [_delivery(mine[-1]), _delivery(d)],
                            "ack_type": a.type,
                            "indices": [mine[-1].index, d.index, a.invoke_index],
                        }  # fmt: skip
                    )
                    break
        # redelivery after a final ack
        for a in committed:
            if a.type not in FINAL_ACKS or a.time is None:
                continue
            later = [d for d in ds if d.invoke_time > a.time]
            if later:
                found[f"share-redelivered-after-{a.type}"].append(
                    {
                        **_place(group, record, value),
                        "ack_process": a.process,
                        "ack_time": a.time,
                        "redelivery": _delivery(later[0]),
                        "indices": [a.invoke_index, a.index, later[0].index],
                    }  # fmt: skip
                )
        # delivery counts: lower within one tenure, or over the limit; lower only across
        # possible leader changes is allowed (information)
        lim = limit.get(group)
        for i, d in enumerate(ds):
            earlier = [e for e in ds[:i] if e.time < d.invoke_time and e.count > d.count]
            changes = [tenures.change(topic, partition, e.invoke_time, d.time) for e in earlier]
            within = [e for e, c in zip(earlier, changes, strict=True) if c is None]
            over = lim is not None and d.count > lim
            if within or over:
                found["share-delivery-count"].append(
                    {
                        **_place(group, record, value),
                        "delivery": _delivery(d),
                        "earlier": _delivery(within[-1]) if within else None,
                        "delivery_limit": lim,
                        "indices": [*([within[-1].index] if within else []), d.index],
                    }  # fmt: skip
                )
            elif earlier:
                found[LEADER_CHANGE].append(
                    {
                        **_place(group, record, value),
                        "how": "lower delivery count",
                        "deliveries": [_delivery(earlier[-1]), _delivery(d)],
                        "change": changes[-1],
                        "indices": [earlier[-1].index, d.index],
                    }  # fmt: skip
                )
        # missing redelivery
        last = ds[-1]
        closing = [a for a in acks[(group, record)] if a.invoke_time >= last.time]
        final = [a for a in closing if a.type in FINAL_ACKS]
        if any(a.outcome == "committed" for a in final):
            pass
        elif any(a.outcome == "unknown" for a in closing):
            pass  # the broker may have applied it: nothing is proven
        elif lim is None or last.count >= lim:
            pass  # archived at the limit, or no subscribe line said what the limit is
        elif group not in out.incomplete_drains:
            why = next((a.type for a in closing if a.outcome == "committed"), None)
            found["share-missing-redelivery"].append(
                {
                    **_place(group, record, value),
                    "last_delivery": _delivery(last),
                    "ended_by": why
                    or ("crash" if last.process in ev.crashes else "no acknowledgement"),
                    "indices": [last.index, *[a.invoke_index for a in closing]],
                }  # fmt: skip
            )
    _lost(ev, by_record, acks, limit, out)
    return out


def _lost(ev, by_record, acks, limit, out: ShareFindings) -> None:
    for group in sorted(ev.groups):
        if group in out.incomplete_drains:
            continue
        for value, send in ev.sends.items():
            v = send["value"]
            if v["topic"] not in ev.groups[group]["topics"]:
                continue
            record = (v["topic"], v["partition"], v["offset"])
            final = [a for a in acks[(group, record)] if a.type in FINAL_ACKS]
            if any(a.outcome == "committed" for a in final):
                continue
            if any(a.outcome == "unknown" for a in final):
                out.undecided += 1
                continue
            ds = by_record.get((group, record), [])
            if ds and max(d.count for d in ds) >= limit.get(group, 1 << 30):
                out.at_limit += 1
                continue
            out.anomalies["share-lost"].append(
                {
                    **_place(group, record, value),
                    "ack_index": send["index"],
                    "deliveries": [_delivery(d) for d in ds[:5]],
                    "indices": [send["index"], *[d.index for d in ds[:5]]],
                }  # fmt: skip
            )


def share_stats(ev: ShareEvents) -> dict[str, Any]:
    """The share statistics (checkers/share_checks.share_stats), plainly: per group, how
    long acknowledged records waited for their first delivery, and per crash how many
    records the crashed member held (its latest delivery before the crash, never acked
    by it, not taken by another member in between) and how soon they came back."""
    from testkit.reference_stats import rank_percentile

    ms = 1e-6
    first: dict[tuple[str, Record], int] = {}
    for d in ev.deliveries:
        key = (d.group, d.record)
        first[key] = min(first.get(key, d.time), d.time)
    acked_at: dict[Record, list[int]] = defaultdict(list)
    for line in ev.sends.values():
        v = line["value"]
        acked_at[(v["topic"], v["partition"], v["offset"])].append(line["time"])
    waits: dict[str, list[float]] = defaultdict(list)
    for (group, record), at in first.items():
        for acked in acked_at.get(record, []):
            waits[group].append((at - acked) * ms)
    out: dict[str, Any] = {
        group: {
            "wait_for_first_delivery": {
                "records": len(w),
                "p50_ms": rank_percentile(w, 0.5),
                "p99_ms": rank_percentile(w, 0.99),
                "max_ms": max(w),
            },
            "crashes": [],
        }
        for group, w in waits.items()
    }
    by_record: dict[tuple[str, Record], list[Delivery]] = defaultdict(list)
    for d in ev.deliveries:
        by_record[(d.group, d.record)].append(d)
    acked_by = {(a.group, a.record, a.process) for a in ev.acks}
    per_crash: dict[tuple[str, int, int], list[int | None]] = defaultdict(list)
    for (group, record), ds in by_record.items():
        for process, crashed in ev.crashes.items():
            mine = [d.time for d in ds if d.process == process and d.time <= crashed]
            if not mine or (group, record, process) in acked_by:
                continue
            since = max(mine)
            if any(d.process != process and since < d.time <= crashed for d in ds):
                continue  # another member took it before the crash: not held then
            again = [d.time for d in ds if d.time > crashed]
            per_crash[(group, process, crashed)].append(min(again) if again else None)
    for (group, process, crashed), agains in sorted(per_crash.items(), key=lambda kv: kv[0][2]):
        back = [(a - crashed) * ms for a in agains if a is not None]
        entry = out.setdefault(group, {"wait_for_first_delivery": None, "crashes": []})
        entry["crashes"].append(
            {
                "process": str(process),
                "held": len(agains),
                "delivered_again": len(back),
                "redelivered_within_ms": max(back, default=None),
            }
        )
    return out
