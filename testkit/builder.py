"""Build histories in code: hand-written checker tests and the property generator.

The builder stamps ``index`` and ``time`` like the real writer does (each line
a little later than the previous one) so tests only state what happened.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

Record = tuple[str, int, int, int | None]  # topic, partition, offset, value


class HistoryBuilder:
    def __init__(self, step_ms: float = 1.0) -> None:
        self.ops: list[dict[str, Any]] = []
        self.time_ns = 0
        self.step_ns = int(step_ms * 1e6)

    def op(self, process: int | str, type_: str, f: str, value: Any) -> int:
        self.time_ns += self.step_ns
        index = len(self.ops)
        self.ops.append(
            {
                "index": index,
                "time": self.time_ns,
                "process": process,
                "type": type_,
                "f": f,
                "value": value,
            }
        )
        return index

    def advance(self, seconds: float) -> None:
        self.time_ns += int(seconds * 1e9)

    # -- producer ---------------------------------------------------------------------
    def invoke_send(self, process: int, value: int, topic: str = "t") -> int:
        return self.op(
            process, "invoke", "send", {"topic": topic, "key": str(value), "value": value}
        )

    def complete_send(
        self,
        process: int,
        value: int,
        outcome: str = "ok",
        topic: str = "t",
        partition: int | None = None,
        offset: int | None = None,
    ) -> int:
        v: dict[str, Any] = {"topic": topic, "key": str(value), "value": value}
        if outcome == "ok":
            v.update(partition=partition, offset=offset)
        else:
            v["error"] = "timed out" if outcome == "info" else "rejected"
        return self.op(process, outcome, "send", v)

    def send(
        self,
        process: int,
        value: int,
        partition: int = 0,
        offset: int | None = None,
        outcome: str = "ok",
        topic: str = "t",
    ) -> tuple[int, int]:
        """invoke + completion; returns both indices."""
        i = self.invoke_send(process, value, topic)
        return i, self.complete_send(process, value, outcome, topic, partition, offset)

    # -- consumer ---------------------------------------------------------------------
    def poll(self, process: int, records: list[Record], final: bool = False) -> int:
        self.op(process, "invoke", "poll", {"final": True} if final else None)
        value: dict[str, Any] = {
            "records": [
                {
                    "topic": t,
                    "partition": p,
                    "offset": o,
                    "key": None if v is None else str(v),
                    "value": v,
                }
                for t, p, o, v in records
            ]
        }
        if final:
            value["final"] = True
        return self.op(process, "ok", "poll", value)

    def drain_bounds(
        self,
        process: int,
        topic: str,
        partition: int,
        log_start: int | None,
        high_watermark: int | None,
        reached: int | None = None,
    ) -> int:
        """The final drain's ``drain`` line for one partition; ``reached`` defaults
        to the high watermark (a complete drain)."""
        value = {
            "topic": topic,
            "partition": partition,
            "log_start": log_start,
            "high_watermark": high_watermark,
            "reached": high_watermark if reached is None else reached,
            "final": True,
        }
        return self.op(process, "ok", "drain", value)

    def subscribe(self, process: int, group: str, topics: list[str]) -> int:
        v = {"group": group, "topics": topics}
        self.op(process, "invoke", "subscribe", v)
        return self.op(process, "ok", "subscribe", v)

    def assign(self, process: int, group: str | None, partitions: list[tuple[str, int]]) -> int:
        v = {"group": group, "partitions": [list(p) for p in partitions]}
        self.op(process, "invoke", "assign", v)
        return self.op(process, "ok", "assign", v)

    def rebalance(
        self,
        process: int,
        group: str,
        assigned: list[tuple[str, int]] = (),
        revoked: list[tuple[str, int]] = (),
    ) -> int:
        v = {
            "group": group,
            "assigned": [list(p) for p in assigned],
            "revoked": [list(p) for p in revoked],
        }
        return self.op(process, "ok", "rebalance", v)

    def commit(self, process: int, group: str, offsets: list[tuple[str, int, int]]) -> int:
        return self.op(
            process, "ok", "commit", {"group": group, "offsets": [list(o) for o in offsets]}
        )

    def committed(
        self, process: int, group: str, offsets: list[tuple[str, int, int]], at: str = "end"
    ) -> int:
        """A read of the group's committed offsets that returned ``offsets`` (-1: none)."""
        v = {"group": group, "partitions": [[t, p] for t, p, _ in offsets], "at": at}
        self.op(process, "invoke", "committed", v)
        return self.op(process, "ok", "committed", {**v, "offsets": [list(o) for o in offsets]})

    def crash(self, process: int, reason: str = "test") -> int:
        return self.op(process, "info", "crash", {"reason": reason})

    # -- transactions (docs/history.md, `txn`) -----------------------------------------
    def txn(
        self,
        process: int,
        mops: list[dict[str, Any]],
        outcome: str = "ok",
        group: str | None = None,
        **extra: Any,
    ) -> tuple[int, int]:
        """A transaction: invoke + completion; returns both indices.

        ``mops`` are completed micro-ops, e.g. ``send_mop(7, partition=0, offset=3)``
        or ``poll_mop([("t", 0, 3, 7)])``; the invoke is derived from them.
        ``extra`` adds completion fields (``offsets``, ``rebalanced``, ``error``).
        """
        i = self.op(process, "invoke", "txn", {"group": group, "ops": [_planned(m) for m in mops]})
        value: dict[str, Any] = {"group": group, "ops": mops, **extra}
        if outcome != "ok":
            value.setdefault("error", "aborted" if outcome == "fail" else "commit timed out")
        return i, self.op(process, outcome, "txn", value)

    def seek(
        self,
        process: int,
        group: str | None,
        offsets: list[tuple[str, int, int]],
        reason: str = "rewind",
    ) -> int:
        v = {"group": group, "offsets": [list(o) for o in offsets], "reason": reason}
        return self.op(process, "ok", "seek", v)

    # -- nemesis ----------------------------------------------------------------------
    def fault(self, f: str, fault_id: int, phase: str, targets: list[str], **extra: Any) -> int:
        """A fault line; ``extra`` adds fields such as ``error``, ``planned_s``, ``at_s``."""
        value = {"phase": phase, "id": fault_id, "targets": targets, **extra}
        return self.op("nemesis", "info", f, value)

    # -- output -----------------------------------------------------------------------
    def lines(self, hid: int | None = None) -> list[str]:
        return history_lines(self.ops, hid)

    def write(self, path: Path) -> Path:
        Path(path).write_text("".join(line + "\n" for line in self.lines()))
        return Path(path)


def send_mop(
    value: int,
    partition: int | None = None,
    offset: int | None = None,
    topic: str = "t",
    skipped: bool = False,
    source: int | None = None,
) -> dict[str, Any]:
    """A completed send micro-op of a transaction."""
    m: dict[str, Any] = {"f": "send", "topic": topic, "key": str(value), "value": value}
    if source is not None:
        m["source"] = source
    m.update(partition=partition, offset=offset)
    if skipped:
        m["skipped"] = True
    return m


def poll_mop(
    records: list[Record], error: str | None = None, skipped: bool = False
) -> dict[str, Any]:
    """A completed poll micro-op of a transaction."""
    m: dict[str, Any] = {
        "f": "poll",
        "records": [
            {
                "topic": t,
                "partition": p,
                "offset": o,
                "key": None if v is None else str(v),
                "value": v,
            }
            for t, p, o, v in records
        ],
    }
    if error is not None:
        m["error"] = error
    if skipped:
        m["skipped"] = True
    return m


def _planned(mop: dict[str, Any]) -> dict[str, Any]:
    """The invoke form of a completed micro-op (docs/history.md, `txn`)."""
    if mop["f"] == "poll":
        return {"f": "poll"}
    keep = ("f", "topic", "key", "value", "source")
    return {k: mop[k] for k in keep if k in mop}


def history_lines(ops: list[dict[str, Any]], hid: int | None = None) -> list[str]:
    """JSONL lines of ``ops``; with ``hid``, each tagged as that history's."""
    extra = {} if hid is None else {"hid": hid}
    return [json.dumps({**op, **extra}, separators=(",", ":")) for op in ops]


def write_histories(path: Path, histories: Iterable[list[dict[str, Any]]]) -> Path:
    """Several histories in one file, the n-th tagged ``hid`` n: the tests judge
    hundreds of histories in one Spark run."""
    with open(path, "w") as fh:
        for hid, ops in enumerate(histories):
            fh.writelines(line + "\n" for line in history_lines(ops, hid))
    return Path(path)
