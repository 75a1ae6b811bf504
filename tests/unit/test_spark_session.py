"""Which JVM a check gets: the quick JIT compiler for small histories only, and
the size guess that decides it (made before the history is read)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from kafka_chaos.checkers import session
from kafka_chaos.checkers.api import check_history
from kafka_chaos.checkers.ingest.load import JSONL_BYTES_PER_OP, PARQUET_BYTES_PER_OP, expected_ops
from kafka_chaos.harness.spec import TestSpec

from testkit.synthetic import generate


def test_quick_jit_only_below_the_threshold() -> None:
    quick = set(session.QUICK_JIT)
    assert quick <= set(session._java_options(0))
    assert quick <= set(session._java_options(session.QUICK_JIT_MAX_OPS - 1))
    big = session._java_options(session.QUICK_JIT_MAX_OPS)
    assert "-XX:TieredStopAtLevel=1" not in big
    assert session.FEWER_COMPILES in big
    assert session.FEWER_COMPILES not in session._java_options(0)
    assert set(session.LATER_C2) <= set(big)
    assert not set(session.LATER_C2) & set(session._java_options(0))
    assert set(session.SHALLOW_C2_INLINING) <= set(big)
    assert not set(session.SHALLOW_C2_INLINING) & set(session._java_options(0))
    assert session.THROUGHPUT_GC in big


def test_this_jvm_takes_every_option() -> None:
    """A misspelt flag would stop the JVM of every big check, which the unit
    tests (small histories) never start."""
    both = session._java_options(0) + session._java_options(10**9)
    options = sorted(set(" ".join(both).split()))  # one string may hold two options
    done = subprocess.run(["java", *options, "-version"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_quick_jit_keeps_a_full_size_code_cache() -> None:
    """C1 alone would reserve 48 MB of code cache, which a warm engine holding
    thousands of generated classes filled: a suite's second check died with "Out of
    space in CodeCache for adapters"."""
    options = " ".join(session._java_options(0)).split()  # one string may hold two options
    flags = subprocess.run(["java", *options, "-XX:+PrintFlagsFinal", "-version"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    size = next(line.split()[3] for line in flags.stdout.splitlines()
                if " ReservedCodeCacheSize " in line)  # fmt: skip
    assert int(size) >= 240 << 20


def test_expected_ops_from_sizes(tmp_path: Path) -> None:
    jsonl = tmp_path / "history.jsonl"
    jsonl.write_bytes(b"x" * (JSONL_BYTES_PER_OP * 1000))
    assert expected_ops(jsonl) == 1000
    rows = tmp_path / "history.parquet" / "kind=line"
    rows.mkdir(parents=True)
    (rows / "part-0.parquet").write_bytes(b"x" * (PARQUET_BYTES_PER_OP * 500))
    (rows.parent / "_SUCCESS").touch()
    assert expected_ops(rows.parent) == 500
    assert expected_ops(tmp_path / "missing.jsonl") == 0


def test_per_value_alone_skips_partial_aggregation(spark) -> None:
    """The bypass is fixed into per-value's cached plan, and the session's own
    setting is put back for every other query."""
    from kafka_chaos.checkers.frames import BYPASS_PARTIAL_AGGREGATION
    from kafka_chaos.checkers.tables import Tables

    rows = spark.createDataFrame(
        [("line", "send", "ok", 1, 0, 1, 1, 0, 0, 5, 7, 1, False, None, None, None)],
        "kind string, f string, type string, op byte, hid int, index long, time long, "
        "topic int, partition int, offset long, val long, process long, final boolean, "
        "group string, txn long, source long",
    )
    before = spark.conf.get(BYPASS_PARTIAL_AGGREGATION, None)
    t = Tables(rows)
    try:
        plan = t.per_value._jdf.queryExecution().executedPlan().toString()
    finally:
        t.release()
    assert spark.conf.get(BYPASS_PARTIAL_AGGREGATION, None) == before
    assert "partial_" not in plan


def test_packed_topic_partition_round_trips_every_int32(spark) -> None:
    """Distinct (topic, partition) pairs pack to distinct longs and unpack exactly."""

    from kafka_chaos.checkers.frames import tp_columns, tp_key

    pairs = [(t, p) for t in (0, 1, 2**31 - 1) for p in (-(2**31), -1, 0, 1, 2**31 - 1)]
    df = spark.createDataFrame(pairs, "topic int, partition int").select(
        tp_key().alias("tp"), "topic", "partition"
    )
    rows = df.select("tp", *tp_columns("tp", "t", "p"), "topic", "partition").collect()
    assert len({r["tp"] for r in rows}) == len(pairs)
    assert [(r["t"], r["p"]) for r in rows] == pairs
    ordered = sorted(rows, key=lambda r: r["tp"])
    assert [(r["t"], r["p"]) for r in ordered] == sorted(pairs)


def test_a_stderr_log_handler_does_not_feed_the_jvm_log_back_into_itself() -> None:
    """While the JVM starts, fd 2 is the pipe its output is logged from; a
    stderr handler at INFO (as a bench script sets up) once looped there,
    nesting "INFO:spark.jvm:" without end."""
    script = (
        "import logging, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "from kafka_chaos.checkers import session\n"
        "session.get_spark().stop()\n"
        "print('done')\n"
    )
    proc = subprocess.run(["python3", "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "done" in proc.stdout, proc.stderr[-2000:]
    assert "INFO:spark.jvm:INFO:spark.jvm" not in proc.stderr, proc.stderr[:2000]
    assert "INFO:spark.jvm:" in proc.stderr  # the JVM's own lines are still logged


def _compiled(jvm) -> int:
    """Classes Spark has generated in this JVM so far."""
    metrics = jvm.org.apache.spark.metrics.source.CodegenMetrics
    return int(metrics.METRIC_COMPILATION_TIME().getCount())


def test_a_warm_session_compiles_a_checks_code_once(spark, tmp_path: Path) -> None:
    """A second history judged by the same engine reuses the generated classes:
    with Spark's default cache of 100 the first check's ~490 were evicted and
    compiled again for every history."""
    try:
        jvm = spark.sparkContext._jvm
    except Exception:
        pytest.skip("a Spark Connect session: its classes are compiled in the server")
    history = tmp_path / "history.jsonl"
    generate(2000, history)
    TestSpec().save(tmp_path / "config.json")
    config = json.loads((tmp_path / "config.json").read_text())
    first = check_history(history, config)
    before = _compiled(jvm)
    again = check_history(history, config)
    assert again["checks"] == first["checks"]
    assert _compiled(jvm) - before < 30


def test_a_family_s_tables_are_made_once_per_tables_and_go_with_release(spark) -> None:
    """Every check of a family gets the same ``Tables``: the family's kept tables
    must be computed once for all of them, and freed with the core's."""
    from dataclasses import dataclass
    from functools import cached_property

    from kafka_chaos.checkers.queue.queue_tables import QueueTables
    from kafka_chaos.checkers.tables import Tables

    made: list[int] = []

    @dataclass(eq=False)
    class Counted:
        t: Tables

        @cached_property
        def kept(self):
            made.append(1)
            return self.t.keep(spark.range(3))

    t = Tables(spark.range(1))
    first = t.family(Counted)
    assert first is t.family(Counted)
    assert first.kept.count() == 3 and first.kept.count() == 3
    assert made == [1] and len(t._cached) == 1
    assert QueueTables.of(t) is t.family(QueueTables) and QueueTables.of(t).t is t
    t.release()
    assert t._cached == [] and t.family(Counted) is not first
