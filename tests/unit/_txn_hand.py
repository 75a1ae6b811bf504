"""Hand-written transactional histories: a registry of cases, a final drain to
end them with, and judging them all in one Spark job per isolation level.

Each case states the counts of error- and warning-severity findings it must
give, and its verdict; ``check_case`` holds Spark and the reference to both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from testkit import reference
from testkit.builder import HistoryBuilder

Record = tuple[str, int, int, int]


def config(isolation: str = "read_committed") -> dict[str, Any]:
    return {"workload": "txn", "txn": {"mode": "mixed", "isolation_level": isolation}}


@dataclass
class Case:
    build: Callable[[HistoryBuilder], None]
    counts: dict[str, int]
    verdict: str
    isolation: str


class Cases(dict[str, Case]):
    """Cases by name; ``@cases.case(counts, verdict)`` registers a builder."""

    def case(self, counts: dict[str, int], verdict: str, isolation: str = "read_committed"):
        def register(fn: Callable[[HistoryBuilder], None]):
            self[fn.__name__] = Case(fn, counts, verdict, isolation)
            return fn

        return register

    def judge(self, spark, tmp_dir) -> dict[str, tuple[dict, list[dict]]]:
        """{name: (results, ops)}: one batched Spark job per isolation level."""
        from kafka_chaos.checkers.api import analyse
        from kafka_chaos.checkers.ingest.load import load_history

        out = {}
        for isolation in sorted({c.isolation for c in self.values()}):
            names = [name for name, c in self.items() if c.isolation == isolation]
            path = tmp_dir / f"{isolation}.jsonl"
            histories = {}
            with open(path, "w") as fh:
                for hid, name in enumerate(names):
                    b = HistoryBuilder()
                    self[name].build(b)
                    histories[name] = (hid, b.ops)
                    fh.writelines(line + "\n" for line in b.lines(hid))
            results = analyse(spark, load_history(spark, path), config(isolation), examples=None)
            out.update({name: (results[hid], ops) for name, (hid, ops) in histories.items()})
        return out


def drain(b: HistoryBuilder, records: list[Record], end: int) -> None:
    """A complete final drain of t-0 (offsets 0 to ``end``) returning ``records``."""
    b.assign(99, None, [("t", 0)])
    b.poll(99, records, final=True)
    b.drain_bounds(99, "t", 0, 0, end, end)


def check_case(case: Case, results: dict, ops: list[dict]) -> dict:
    """Spark's and the reference's counts (information-only checks aside) are the
    case's, and so is the verdict; returns the reference's findings."""
    info = {c for c, r in results["checks"].items() if r["severity"] == "info"}
    got = {c: r["count"] for c, r in results["checks"].items() if r["count"] and c not in info}
    assert got == case.counts
    ref = reference.check(ops, config(case.isolation))
    assert {c: len(v) for c, v in ref.items() if v and c not in info} == case.counts
    assert results["verdict"] == case.verdict, results["unknown_reasons"]
    return ref
