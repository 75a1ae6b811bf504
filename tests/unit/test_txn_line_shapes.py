"""Every transactional line shape docs/history.md allows is checkable, and a
transactional history is judged as one whatever the CLI is given.

* Fuzz: Hypothesis writes transactional histories from every allowed shape
  (nulls included: a send without a delivery report, a record that is not
  ours, a null group, a failed poll, skipped micro-ops, transactions left
  open by a crash, seeks).  Ingest (both paths) and the reference accept
  each; Spark judges all of them in one job; one goes through
  ``kafka-chaos check`` itself, which exits 0, 1 or 2, never 3.
* By path: ``check history.jsonl`` uses the run's ``config.json`` beside it
  and prints exactly what ``check RUN_DIR`` prints; without a config the
  lines decide the workload; a config they contradict is refused in one line.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from kafka_chaos.checkers.ingest import convert as ingest
from kafka_chaos.harness.spec import TestSpec

from kafka_chaos.cli import main
from testkit import reference
from testkit.builder import HistoryBuilder, write_histories
from testkit.synthetic_txn import Shape, config, generate

TOPICS = ["t", "t-out"]
FUZZED: list[list[dict[str, Any]]] = []
# Seeded like the other property tests (tests/conftest.py): a failure of either test
# below replays from the seed, not from a random draw lost with its run.
SEED = int(os.environ.get("TXN_SHAPES_SEED", "20261128"))


@st.composite
def _send(draw, value: int) -> dict[str, Any]:
    m: dict[str, Any] = {"f": "send", "topic": draw(st.sampled_from(TOPICS)), "value": value}
    m["key"] = str(value)
    partition = draw(st.one_of(st.none(), st.integers(0, 2)))
    if partition is not None or draw(st.booleans()):
        m["partition"] = partition
    # An offset needs its partition; either may be null (no delivery report).
    reported = partition is not None and draw(st.booleans())
    m["offset"] = draw(st.integers(0, 12)) if reported else None
    if draw(st.booleans()):
        m["source"] = draw(st.one_of(st.none(), st.integers(0, 50)))
    return m


@st.composite
def _records(draw) -> list[dict[str, Any]]:
    n = draw(st.integers(0, 3))
    return [
        {
            "topic": draw(st.sampled_from(TOPICS)),
            "partition": draw(st.integers(0, 2)),
            "offset": draw(st.integers(0, 12)),
            "key": "k",
            "value": draw(st.one_of(st.none(), st.integers(0, 60))),
        }
        for _ in range(n)
    ]


@st.composite
def txn_histories(draw) -> list[dict[str, Any]]:
    """Transactions of every allowed shape, one in flight per process."""
    b = HistoryBuilder()
    value = iter(range(1000))
    process = {slot: slot + 1 for slot in range(draw(st.integers(1, 3)))}
    group = draw(st.one_of(st.none(), st.just("g")))
    for _ in range(draw(st.integers(1, 8))):
        slot = draw(st.sampled_from(sorted(process)))
        p = process[slot]
        planned = [
            draw(_send(next(value))) if draw(st.booleans()) else {"f": "poll"}
            for _ in range(draw(st.integers(0, 4)))
        ]
        invoke = [{k: m[k] for k in m if k not in ("offset",)} for m in planned]
        b.op(p, "invoke", "txn", {"group": group, "ops": invoke})
        outcome = draw(st.sampled_from(["ok", "fail", "info", "open"]))
        if outcome == "open":  # torn down before it completed
            b.op(p, "info", "crash", {"reason": "fuzz"})
            process[slot] = max(process.values()) + 1
            continue
        done, stopped = [], False
        for m in planned:
            stopped = stopped or (outcome != "ok" and draw(st.integers(0, 4)) == 0)
            if stopped:
                done.append({**m, "skipped": True})
            elif m["f"] == "send":
                done.append(m)
            else:
                poll = {"f": "poll", "records": draw(_records())}
                if draw(st.integers(0, 4)) == 0:
                    poll["error"] = "_TRANSPORT"
                done.append(poll)
        v: dict[str, Any] = {"group": group, "ops": done}
        if outcome != "ok":
            v["error"] = "fuzzed"
        if draw(st.booleans()):
            v["offsets"] = [["t", draw(st.integers(0, 2)), draw(st.integers(0, 13))]]
        if draw(st.booleans()):
            v["rebalanced"] = [["t", draw(st.integers(0, 2))]]
        b.op(p, outcome, "txn", v)
        if outcome != "ok" and draw(st.booleans()):
            b.seek(p, group, [("t", draw(st.integers(0, 2)), draw(st.integers(-2, 12)))])
    if draw(st.booleans()):  # a final drain
        b.assign(99, None, [("t", 0)])
        b.poll(99, [("t", 0, o, draw(st.integers(0, 60))) for o in range(2)], final=True)
    return b.ops


@seed(SEED)
@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=txn_histories())
def test_every_allowed_txn_line_shape_is_ingested_and_judged(ops, tmp_path_factory) -> None:
    tmp = tmp_path_factory.mktemp("fuzz")
    path = write_histories(tmp / "h.jsonl", [ops])
    ingest.convert(path, tmp / "fast.parquet")
    ingest.scan_for_bad_line(path)  # the Python path accepts it too
    reference.check(ops, config(Shape()))
    FUZZED.append(ops)


@pytest.mark.slow
def test_spark_and_the_cli_judge_every_fuzzed_history(spark, tmp_path, capsys) -> None:
    from kafka_chaos.checkers.api import analyse
    from kafka_chaos.checkers.ingest.load import load_history

    assert FUZZED, "run together with the fuzz test"
    cfg = {**config(Shape()), "checker": {"cycles": False}}
    results = analyse(spark, load_history(spark, write_histories(tmp_path / "all.jsonl", FUZZED)),
                      cfg, examples=1, stats=False)  # fmt: skip
    assert len(results) == len(FUZZED)
    path = write_histories(tmp_path / "one.jsonl", FUZZED[:1])  # the whole CLI path once
    assert main(["check", str(path), "--json"]) in (0, 1, 2)
    judged = json.loads(capsys.readouterr().out)
    assert "aborted-read" in judged["checks"]  # judged as transactional


def _run_dir(tmp_path: Path, shape: Shape, seed: int = 7) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    h = generate(seed, 25, shape)
    write_histories(run / "history.jsonl", [h.ops])
    TestSpec.from_dict(config(shape)).save(run / "config.json")
    return run


def _check_json(target: Path, capsys, *extra: str) -> tuple[int, dict]:
    """Exit code and results, less the cycle search's timings (they differ run to run)."""
    code = main(["check", str(target), "--json", *extra])
    results = json.loads(capsys.readouterr().out)
    for timing in ("seconds", "elle_seconds"):
        results.get("cycles", {}).pop(timing, None)
    return code, results


@pytest.mark.slow
def test_a_txn_history_by_path_gets_exactly_the_run_directorys_output(spark, tmp_path, capsys):
    run = _run_dir(tmp_path, Shape(unreported_p=0.2))
    by_dir = _check_json(run, capsys)
    by_path = _check_json(run / "history.jsonl", capsys)
    assert by_path == by_dir
    assert {"aborted-read", "torn-transaction", "G1c"} <= set(by_dir[1]["checks"])


@pytest.mark.slow
def test_txn_lines_without_a_config_are_judged_as_txn(spark, tmp_path, capsys):
    run = _run_dir(tmp_path, Shape(mode="ctp"))
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(run / "history.jsonl", alone / "h.jsonl")
    code, judged = _check_json(alone / "h.jsonl", capsys)
    assert code in (0, 1, 2)
    assert {"aborted-read", "exactly-once", "G0"} <= set(judged["checks"])


@pytest.mark.parametrize("lines", ["txn", "queue"])
def test_a_config_the_lines_contradict_is_refused_in_one_line(spark, tmp_path, capsys, lines):
    if lines == "txn":
        run = _run_dir(tmp_path, Shape())
        TestSpec().save(run / "config.json")  # a queue config
        said = "its lines are a txn history but its config says queue"
    else:
        run = tmp_path / "run"
        run.mkdir()
        b = HistoryBuilder()
        b.subscribe(10, "g", ["t"])
        b.send(1, 0, 0, 0)
        b.poll(10, [("t", 0, 0, 0)])
        b.write(run / "history.jsonl")
        TestSpec.from_dict(config(Shape())).save(run / "config.json")  # a txn config
        said = "its lines are a queue history but its config says txn"
    assert main(["check", str(run / "history.jsonl")]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err
