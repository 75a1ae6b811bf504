"""A workload from outside the product, in one file: high watermarks that go back.

``test_new_workload.py`` registers it and sees it everywhere a workload
appears; no product file knows of it.  It writes a line kind of its own
(``watermark``: the high watermark a client read of one partition), has a
spec section with its validation (``watermark``), how its lines are
recognised in a history checked without its config, one option
(``--watermark-every``), one check family with one check
(``watermark-regressed``: a partition's high watermark read lower than an
earlier read, which acked data lost to an unclean election would cause) and
one report section.
"""

from __future__ import annotations

import html
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_chaos.checkers.check import Check, Context, Group, always
from kafka_chaos.checkers.frames import anomaly, kind
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.history import HistoryWriter
from kafka_chaos.harness.option import Option
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.harness.spec_sections import Section
from kafka_chaos.workloads.declared_parts import LineKind, ReportSection, RowsFacts, Shown
from kafka_chaos.workloads.registry import Declaration
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

NAME = "watermark-example"
LINE = "watermark"
CHECK = "watermark-regressed"


@dataclass
class WatermarkSpec:
    """How often the workload reads each partition's high watermark."""

    every_s: float = 1.0


def _validate(section: WatermarkSpec) -> None:
    if not section.every_s > 0:
        raise ConfigError(f"watermark.every_s must be positive, not {section.every_s!r}")


def _problem(value: dict[str, Any], typ: str) -> str | None:
    fields = (value.get("topic"), value.get("partition"), value.get("offset"))
    ok = isinstance(fields[0], str) and all(type(x) is int for x in fields[1:])
    return None if ok else f"{LINE} {typ}: needs topic (str), partition and offset (integers)"


def _rows(line: dict[str, Any], value: dict[str, Any], invoke: int | None) -> list[dict[str, Any]]:
    """The line's common fields already hold topic, partition and offset."""
    return [line]


def _seen(facts: RowsFacts) -> bool:
    """Only this workload writes ``watermark`` lines (stored as control rows)."""
    return LINE in facts.distinct("control", "f")


def _implies(facts: RowsFacts, config: dict[str, Any]) -> None:
    """A history without its config is judged with reads every second."""
    config.setdefault(LINE, {}).setdefault("every_s", WatermarkSpec.every_s)


class WatermarkWorkload:
    """Reads each partition's high watermark every ``watermark.every_s`` and
    writes one ``watermark`` line per read (process 0)."""

    def __init__(self, spec: TestSpec, bootstrap: str, history: HistoryWriter,
                 run_dir: Path, **_: Any) -> None:  # fmt: skip
        self.spec, self.bootstrap, self.history = spec, bootstrap, history
        self.reads = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": NAME})
        every = self.spec.section(LINE).every_s
        try:
            while not self._stop.wait(every):
                for p in range(self.spec.topic.partitions):
                    tp = TopicPartition(self.spec.topic.name, p)
                    _, high = consumer.get_watermark_offsets(tp, timeout=every, cached=False)
                    value = {"topic": tp.topic, "partition": p, "offset": high}
                    self.history.append(0, "ok", LINE, value)
                    self.reads += 1
        finally:
            consumer.close()

    def start(self) -> None:
        self._thread.start()

    def stop(self, hurry: bool = False) -> dict[str, int]:
        self._stop.set()
        self._thread.join(timeout=10)
        return self.summary()

    def final_drain(self, timeout_s: float) -> dict[str, int]:
        return self.summary()

    def summary(self) -> dict[str, int]:
        return {"reads": self.reads}


def regressions(ctx: Context) -> list[DataFrame]:
    reads = ctx.t.ops.where(kind("control") & (F.col("f") == LINE))
    by_partition = Window.partitionBy("hid", "topic", "partition").orderBy("index")
    reads = reads.withColumn("before", F.max("offset").over(by_partition.rowsBetween(
        Window.unboundedPreceding, -1)))  # fmt: skip
    back = reads.where(F.col("offset") < F.col("before"))
    return [anomaly(back, CHECK, F.col("index"), "partition", "offset", "before",
                    F.array("index").alias("indices"))]  # fmt: skip


REGRESSED = Check(
    name=CHECK,
    family=NAME,
    title="High watermark went back",
    explanation="A partition's high watermark was read lower than an earlier read.",
    finds="a high watermark below one read earlier",
    severity_doc="error",
    meaning="Records the cluster had made readable to all are gone from the log.",
    causes="An unclean leader election, or a replica that lost its log.",
    severity=always("error"),
)
FAMILY = Group(NAME, (REGRESSED,), make_frames=regressions)


def _report(run_dir: Path, config: dict[str, Any], results: dict[str, Any]) -> str | None:
    check = (results.get("checks") or {}).get(CHECK)
    if not isinstance(check, dict):
        return None
    every = (config.get(LINE) or {}).get("every_s", WatermarkSpec.every_s)
    return (f"<p>High watermarks read every {html.escape(str(every))} s; "
            f"{int(check.get('count') or 0)} read lower than before.</p>")  # fmt: skip


DECLARATION = Declaration(
    f"{__name__}:WatermarkWorkload",
    (NAME,),
    section=Section(LINE, WatermarkSpec, _validate),
    line_kinds=(LineKind(LINE, _problem, _rows, needs_value=True),),
    shown=(Shown(LINE, _seen, implies=_implies),),
    families=(FAMILY,),
    options=(Option("--watermark-every", f"{LINE}.every_s", float, "seconds between reads"),),
    report_sections=(ReportSection("watermarks", "High watermarks", _report),),
)
