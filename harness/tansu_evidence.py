"""What Tansu's PostgreSQL holds for a topic, set beside what was acknowledged.

Why: Kafka's replicas are read back with DumpLogSegments after the heal;
Tansu keeps no replicas, and every record it acknowledged is one row of
PostgreSQL's ``record`` table, keyed by partition and offset.  Those rows
are the broker's own account, read without any client, so an acknowledged
send that has no row at its offset, or a row holding another value there,
is the storage's evidence of a loss, whatever the consumers saw.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from kafka_chaos.harness.history import read_history

EXAMPLES = 10
RESULT = "storage-evidence.json"  # in the run directory, beside replica verification's


def acknowledged(history: Path, topic: str) -> list[tuple[int, int | None, str]]:
    """(partition, offset, value) of every send of ``topic`` the broker acknowledged;
    ``offset`` None when the delivery report named no place (a DUPLICATE_SEQUENCE_NUMBER
    answer, ``workloads/delivery_offsets.py``): it still counts for "stored nowhere"."""
    found: list[tuple[int, int | None, str]] = []
    for op in read_history(history):
        value = op.get("value")
        if op["type"] == "ok" and op["f"] == "send" and isinstance(value, dict):
            if value.get("topic") == topic and value.get("partition") is not None:
                off = value.get("offset")
                at = None if off is None else int(off)
                found.append((int(value["partition"]), at, str(value["value"])))
    return found


def stored_value(text: str) -> str:
    """The value a stored record carries: its first word (the queue workload pads
    each value with filler after a space to its message size)."""
    return text.split(" ", 1)[0]


def compare(
    acked: list[tuple[int, int | None, str]], rows: list[tuple[int, int, str]]
) -> dict[str, Any]:
    """Each acknowledged send against the row at its partition and offset (an ack
    without an offset only against every row: stored somewhere or nowhere)."""
    stored = {(p, o): stored_value(v) for p, o, v in rows}
    placed = [a for a in acked if a[1] is not None]
    missing = [a for a in placed if (a[0], a[1]) not in stored]
    other = [(p, o, v, stored[(p, o)]) for p, o, v in placed
             if (p, o) in stored and stored[(p, o)] != v]  # fmt: skip
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for (p, o), v in stored.items():
        where[v].append((p, o))
    duplicated = {v: sorted(at) for v, at in where.items() if len(at) > 1}
    absent = [a for a in acked if a[2] not in where]  # acknowledged, stored nowhere
    unplaced = {v for _, o, v in acked if o is None}  # acked, so their rows are not "never acked"
    unacked = sum(
        1 for at in stored.keys() - {(p, o) for p, o, _ in placed} if stored[at] not in unplaced
    )
    return {
        "acknowledged": len(acked),
        "stored": len(stored),
        "acked_without_row": len(missing),
        "acked_with_other_value": len(other),
        "acked_stored_nowhere": len(absent),
        "stored_more_than_once": len(duplicated),
        "stored_not_acknowledged": unacked,  # indeterminate or failed sends that landed
        "examples": {
            "acked_without_row": [list(m) for m in missing[:EXAMPLES]],
            "acked_with_other_value": [list(m) for m in other[:EXAMPLES]],
            "acked_stored_nowhere": [list(m) for m in absent[:EXAMPLES]],
            "stored_more_than_once": dict(list(duplicated.items())[:EXAMPLES]),
        },
    }


def summary(found: dict[str, Any]) -> str:
    """One line for the run's log."""
    return (
        f"storage holds {found['stored']} records; of {found['acknowledged']} acknowledged "
        f"sends, {found['acked_without_row']} have no row and "
        f"{found['acked_with_other_value']} another value at their offset, "
        f"{found['acked_stored_nowhere']} are stored nowhere; "
        f"{found['stored_more_than_once']} values are stored more than once"
    )
