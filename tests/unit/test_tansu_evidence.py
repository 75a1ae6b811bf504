"""Tansu's stored rows set beside the acknowledged sends (harness/tansu_evidence.py)."""

from __future__ import annotations

import json
from pathlib import Path

from kafka_chaos.harness import tansu_evidence


def _history(path: Path, ops: list[dict]) -> Path:
    lines = [{"index": i, "time": i, "process": 0, **op} for i, op in enumerate(ops)]
    path.write_text("".join(json.dumps(op) + "\n" for op in lines))
    return path


def test_acknowledged_sends_of_the_topic_only(tmp_path: Path) -> None:
    sent = {"topic": "t", "key": "1", "value": 7}
    elsewhere = {**sent, "topic": "other", "partition": 0, "offset": 0}
    history = _history(tmp_path / "h.jsonl", [
        {"type": "invoke", "f": "send", "value": sent},
        {"type": "ok", "f": "send", "value": {**sent, "partition": 2, "offset": 5}},
        {"type": "ok", "f": "send", "value": elsewhere},
        {"type": "info", "f": "send", "value": {**sent, "value": 8}},
        {"type": "ok", "f": "send", "value": {**sent, "value": 9, "partition": 3, "offset": None}},
    ])  # fmt: skip
    assert tansu_evidence.acknowledged(history, "t") == [(2, 5, "7"), (3, None, "9")]


def test_an_ack_without_an_offset_is_judged_by_whether_it_is_stored_at_all() -> None:
    """A DUPLICATE_SEQUENCE_NUMBER answer: acknowledged, its place unknown (the Tansu
    debug run's batch 45879/45891 was stored nowhere; its predecessor twice)."""
    acked = [(3, 7650, "45771"), (3, None, "45879"), (3, None, "45891"), (3, None, "45855")]
    rows = [(3, 7640, "45855 x"), (3, 7648, "45771 x"), (3, 7650, "45771 x")]
    found = tansu_evidence.compare(acked, rows)
    assert found["acked_stored_nowhere"] == 2
    assert found["examples"]["acked_stored_nowhere"] == [[3, None, "45879"], [3, None, "45891"]]
    assert (found["acked_without_row"], found["acked_with_other_value"]) == (0, 0)
    assert found["stored_more_than_once"] == 1
    assert found["stored_not_acknowledged"] == 1  # 7648: the copy no ack names


def test_a_missing_row_another_value_and_a_duplicate_are_each_counted() -> None:
    acked = [(0, 0, "1"), (0, 1, "2"), (1, 0, "3"), (1, 1, "4")]
    rows = [(0, 0, "1 xx"), (0, 1, "9 xx"), (1, 0, "3 xx"), (1, 2, "3 xx"), (1, 3, "5 xx")]
    found = tansu_evidence.compare(acked, rows)
    assert found["acked_without_row"] == 1  # (1, 1, "4")
    assert found["acked_with_other_value"] == 1  # (0, 1): 9 stored where 2 was acked
    assert found["stored_more_than_once"] == 1  # 3 at (1, 0) and (1, 2)
    assert found["stored_not_acknowledged"] == 2  # (1, 2) and (1, 3)
    assert found["acked_stored_nowhere"] == 2  # 2 (9 is where it was acked) and 4
    assert found["examples"]["acked_stored_nowhere"] == [[0, 1, "2"], [1, 1, "4"]]
    assert found["examples"]["acked_without_row"] == [[1, 1, "4"]]
    assert found["examples"]["stored_more_than_once"] == {"3": [(1, 0), (1, 2)]}
    assert "of 4 acknowledged sends, 1 have no row" in tansu_evidence.summary(found)


def test_everything_acknowledged_and_stored_once_is_clean() -> None:
    acked = [(0, i, str(i)) for i in range(5)]
    found = tansu_evidence.compare(acked, [(p, o, f"{v} pad") for p, o, v in acked])
    assert (found["acked_without_row"], found["acked_with_other_value"]) == (0, 0)
    assert found["stored_more_than_once"] == 0 and found["stored_not_acknowledged"] == 0
    assert found["acked_stored_nowhere"] == 0
