"""The report's parts that lead with the answer: the banner sentence, ranges of
consecutive offsets, the operations an example names, and the replica findings."""

from __future__ import annotations

import json
from pathlib import Path

from kafka_chaos.reports.answer import answer
from kafka_chaos.reports.grouping import group, mechanism, ranges_of_examples
from kafka_chaos.reports.operations import active_fault, load_operations, operations_view
from kafka_chaos.reports.replicas import replicas_section, sentence, spans, truncation_marks


def test_the_banner_states_every_figure_even_zero() -> None:
    results = {"summary": {"acked": 37505, "acked_lost": 3788, "duplicated": 0, "reordered": 1}}
    assert answer(results) == (
        "Kafka lost 3,788 of 37,505 acknowledged messages. "
        "0 were duplicated; 1 was read out of order."
    )
    undecided = {
        "summary": {"acked": 10, "acked_lost": None, "duplicated": 2, "reordered": 0},
        "checks": {"acked-lost": {"reason": "the drain did not reach t-0"}},
    }
    assert answer(undecided).startswith(
        "Whether Kafka lost any of 10 acknowledged messages could not be decided: the drain "
        "did not reach t-0."
    )
    assert answer({}) is None  # results from before the summary existed


def test_a_loss_the_settings_allow_still_leads_the_banner() -> None:
    """Under unclean election (or acks=1) acked-lost is a warning and the verdict valid:
    the banner still says how many were lost, and that the settings allow it."""
    summary = {"acked": 100, "acked_lost": 40, "duplicated": 0, "reordered": 0}
    warned = {"summary": summary, "checks": {"acked-lost": {"count": 40, "severity": "warning"}}}
    assert answer(warned) == (
        "Kafka lost 40 of 100 acknowledged messages, as this run's settings allow (a warning). "
        "0 were duplicated; 0 were read out of order."
    )
    broken = {"summary": summary, "checks": {"acked-lost": {"count": 40, "severity": "error"}}}
    assert answer(broken).startswith("Kafka lost 40 of 100 acknowledged messages. 0 were")


def ex(p: int, o: int, **extra) -> dict:
    return {"topic": "t", "partition": p, "offset": o, **extra}


def test_examples_on_consecutive_offsets_form_ranges() -> None:
    examples = [ex(0, 5), ex(0, 3), ex(0, 4), ex(1, 4), ex(0, 9), {"value": 7}]
    assert ranges_of_examples(examples) == [
        {"topic": "t", "partition": 0, "first": 3, "last": 5, "count": 3},
        {"topic": "t", "partition": 0, "first": 9, "last": 9, "count": 1},
        {"topic": "t", "partition": 1, "first": 4, "last": 4, "count": 1},
    ]
    views = [f"v{i}" for i in range(len(examples))]
    ranges, rest = group({}, examples, views)
    assert [(r.first, r.last, r.count, r.examples) for r in ranges] == [
        (3, 5, 3, ["v0", "v1", "v2"])
    ]
    assert rest == ["v3", "v4", "v5"]  # singletons and examples without an offset stay


def test_the_checkers_ranges_cover_more_than_the_examples() -> None:
    check = {"ranges": [{"topic": "t", "partition": 0, "first": 1648, "last": 5077,
                         "count": 3430}]}  # fmt: skip
    examples = [ex(0, 1648 + i, now_values=[9000 + i]) for i in range(10)]
    ranges, rest = group(check, examples, list(range(10)))
    assert ranges[0].label(one_topic=True) == "offsets 1648–5077 of partition 0"
    assert ranges[0].count == 3430 and ranges[0].examples == list(range(10)) and rest == []
    assert mechanism("acked-lost", examples) == ("acknowledged with one value, now holding another")


def test_an_examples_operations_are_read_from_the_history_once(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    lines = [
        {"index": i, "time": i * 500_000_000, "process": 1, "type": "ok", "f": "send",
         "value": {"value": i, "partition": 0, "offset": i}}
        for i in range(10)
    ]  # fmt: skip
    history.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    with history.open("a") as fh:
        fh.write('{"index":10,"time":')  # a partial last line of a killed run
    ops = load_operations(history, {2, 7, 10, 99})
    assert sorted(ops) == [2, 7]
    faults = [{"f": "kill", "targets": ["n2"], "start_s": 3.0, "end_s": 4.0}]
    rows = operations_view([7, 2, 5], ops, faults)
    assert [(r["index"], r["fault"]) for r in rows] == [(7, "kill n2"), (2, None)]
    assert rows[0]["what"] == '{"value":7,"partition":0,"offset":7}'
    assert active_fault(9.0, [{"f": "pause", "targets": ["n1"], "start_s": 8.0}]) == "pause n1"


def test_replica_findings_are_said_in_words(tmp_path: Path) -> None:
    assert spans([[980, 4090], [5000, 5000]]) == "980–4090, 5000"
    copy = {"node": "n3", "source": "before-rejoin", "agree": False,
            "diverged_ranges": [[980, 4090]], "lost_values": 3100}  # fmt: skip
    assert sentence(0, copy).startswith(
        "n3's log before it rejoined held other values than the cluster holds now at offsets "
        "980–4090 of partition 0 (3,100 of its values are now on no replica)"
    )
    assert replicas_section(tmp_path)["missing"].startswith("replica verification was not run")
    (tmp_path / "replicas.json").write_text(json.dumps({
        "topic": "t", "complete": True, "error": None,
        "partitions": [{"partition": 0, "agree": True, "compared": [copy]}],
        "truncations": [{"node": "n3", "partition": 0, "offset": 980, "high_watermark": 4091,
                         "history_s": 41.5}, {"node": "n1", "partition": 1, "offset": 5}],
    }))  # fmt: skip
    section = replicas_section(tmp_path)
    assert len(section["findings"]) == 1 and section["headline"].startswith("All 1 partitions")
    assert truncation_marks(tmp_path) == [
        (0, 41.5, "n3 truncated partition 0 to offset 980 (below high watermark 4091)")
    ]


def test_values_stored_twice_are_said_with_their_writers(tmp_path: Path) -> None:
    twice = {"values": 5656, "epoch_bump": 5656, "examples": [
        {"value": "5392", "offsets": [289, 7738], "producer_ids": [1001, 1001],
         "producer_epochs": [0, 26], "epoch_bump": True}]}  # fmt: skip
    (tmp_path / "replicas.json").write_text(json.dumps({
        "topic": "t", "complete": True, "error": None,
        "partitions": [{"partition": 4, "agree": True, "compared": [], "stored_twice": twice}],
    }))  # fmt: skip
    (finding,) = replicas_section(tmp_path)["findings"]
    assert finding == (
        "Partition 4's leader stores 5,656 values at more than one offset; 5,656 of them were "
        "sent again by the same producer under a bumped epoch (its client gave up on a request "
        "and started its sequences over, so the broker could not recognise the retry), e.g. "
        "value 5392 at offsets 289 (producer 1001, epoch 0) and 7738 (producer 1001, epoch 26)."
    )


def test_a_valid_verdict_names_the_warnings_beside_it() -> None:
    from kafka_chaos.reports.inputs import Input
    from kafka_chaos.reports.render import verdict_of

    checks = {
        "acked-lost": {"count": 40, "severity": "warning", "valid": False},
        "lost-write": {"count": 0, "severity": "warning", "valid": True},
        "duplicate": {"count": 3, "severity": "info", "valid": False},
    }
    verdict, reason = verdict_of(Input({"verdict": "valid", "checks": checks}))
    assert verdict == "valid"
    assert reason.endswith("warnings, shapes this run's settings allow, were found (acked-lost).")
    quiet = {"acked-lost": {"count": 0, "severity": "warning", "valid": True}}
    assert verdict_of(Input({"verdict": "valid", "checks": quiet}))[1] == (
        "No anomaly of error severity was found."
    )
