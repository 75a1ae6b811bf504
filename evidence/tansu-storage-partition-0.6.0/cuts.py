"""Per cut of a storage-partition run: which producers it stalled, and what followed.

    python3 evidence/tansu-storage-partition-0.6.0/cuts.py RUN_DIR...   (from /work/main)

Reads each run's history.jsonl only.  A producer is stalled by a cut when none of its
sends is acknowledged from 1 s after the cut's start line to its end line; only the
producers with an acknowledgement in the 2 s before the cut count (a producer that
failed fatally is replaced by a new process number).  Values are
attributed to the cut in whose window (its start up to the next cut's start) they were
acknowledged.  "Acknowledged" counts every send librdkafka reported delivered: ``ok``
lines (with or without an offset) and, in histories recorded before the recorder's fix,
``info`` lines with ACKED_WITHOUT_OFFSET (a DUPLICATE_SEQUENCE_NUMBER answer).
- lost: acknowledged values no poll ever read (the final drain read every partition to
  its high watermark in all these runs);
- doubled: acknowledged values read at two different offsets.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def cuts_of(run: Path) -> list[dict]:
    ops = [json.loads(line) for line in (run / "history.jsonl").open()]
    cuts: dict[int, dict] = {}
    acked: dict[int, tuple[int, float]] = {}  # value -> (process, ack time s)
    where: dict[int, set] = defaultdict(set)
    for o in ops:
        t = o["time"] / 1e9
        if o["process"] == "nemesis" and o["f"] == "storage-partition":
            v = o["value"]
            c = cuts.setdefault(v["id"], {"id": v["id"], "target": v["targets"][0]})
            c["start" if v["phase"] == "start" else "end"] = t
        elif o["f"] == "send" and (
            o["type"] == "ok"
            or (o["type"] == "info" and o["value"]["error"].startswith("ACKED_WITHOUT_OFFSET"))
        ):
            acked[o["value"]["value"]] = (o["process"], t)
        elif o["f"] == "poll" and o["type"] == "ok":
            for r in o["value"]["records"]:
                where[r["value"]].add((r["partition"], r["offset"]))
    order = sorted(cuts.values(), key=lambda c: c["start"])
    for i, c in enumerate(order):
        producers = {p for p, t in acked.values() if c["start"] - 2 < t < c["start"]}
        until = order[i + 1]["start"] if i + 1 < len(order) else float("inf")
        c["producers"] = len(producers)
        c["stalled"] = sum(
            1
            for p in producers
            if not any(q == p and c["start"] + 1 < t < c["end"] for q, t in acked.values())
        )
        mine = [v for v, (_, t) in acked.items() if c["start"] <= t < until]
        c["lost"] = sum(1 for v in mine if not where[v])
        c["doubled"] = sum(1 for v in mine if len(where[v]) > 1)
        c["run"] = run.name
    return order


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        for c in cuts_of(Path(arg)):
            print(json.dumps(c))
