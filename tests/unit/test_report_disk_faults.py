"""The report's disk-fault section, on the real power-loss-all cut (tests/unit/data)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_chaos.forensics import disk_account, provenance
from kafka_chaos.reports.disk_faults import disk_faults_section, fault_did, log_ends, replica_story
from kafka_chaos.reports.render import render_report

DATA = Path(__file__).parent / "data" / "power-loss-all"
TOPIC = "chaos-20261128t070228z"


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("TZ", "UTC")  # the fixture's harness log is in UTC
    time.tzset()
    dest = tmp_path / "run"
    shutil.copytree(DATA, dest)
    disk_account.write(dest, TOPIC)
    provenance.write(dest, TOPIC)
    yield dest
    monkeypatch.undo()
    time.tzset()


def test_one_row_per_fault_and_node_and_the_lost_partition(run_dir: Path) -> None:
    section = disk_faults_section(run_dir)
    assert section is not None
    assert [(r["id"], r["node"]) for r in section["rows"]] == [
        (0, "n1"), (0, "n2"), (0, "n3"), (1, "n1"), (1, "n2"), (1, "n3"),
    ]  # fmt: skip
    assert all(r["log_ends"] == "p3: 0" for r in section["rows"])
    (part,) = section["lost"]["partitions"]
    lost = part["lost"]
    assert {n["without"] for n in part["nodes"]} == {f"{lost}/{lost}"}
    assert {n["holds"] for n in part["nodes"]} == {f"0/{lost}"}
    page = render_report(run_dir)
    assert 'id="disk-faults"' in page and "Recovering unflushed segment" in page


def test_the_report_names_each_lost_value_its_offset_and_its_replicas(run_dir: Path) -> None:
    """What was lost and where, value by value: not only the per-partition tallies."""
    first = json.loads((run_dir / "provenance.json").read_text())["values"][0]
    section = disk_faults_section(run_dir)
    assert section is not None
    ex = section["lost"]["examples"][0]
    assert (ex["value"], ex["partition"], ex["offset"]) == (
        first["value"], first["partition"], first["offset"],
    )  # fmt: skip
    r = first["replicas"][0]
    assert ex["replicas"][0].startswith(
        f"{r['node']}: held at ack {'yes' if r['held_at_ack'] else 'unknown'}, "
        f"came back from cut #{r['cut']} with log end {r['recovered_log_end']} (without it: yes)"
    )
    now = r["now_at_offset"]
    assert ex["replicas"][0].endswith(
        "holds it now no" + ("" if now is None else f", its offset now holds {now}")
    )
    page = render_report(run_dir)
    assert "lost values, one by one" in page
    row = f'<td class="n">{first["value"]}</td><td class="n">{first["partition"]}</td>'
    assert row + f'<td class="n">{first["offset"]}</td>' in page


def test_a_replica_story_says_unknown_never_guesses() -> None:
    said = replica_story({"node": "n2", "held_at_ack": None, "cut": None, "holds_now": None})
    assert said == "n2: held at ack unknown, holds it now unknown"


def test_no_section_without_disk_faults(tmp_path: Path) -> None:
    assert disk_faults_section(tmp_path) is None


def test_log_ends_grouped() -> None:
    assert log_ends({"2": 7, "0": 0, "1": 0}) == "p0, p1: 0; p2: 7"


# ``resolved`` as the pl48b nightly runs of 2026-11-28 recorded them (trimmed).
CORRUPTED = {"corrupted": {"n3": {
    "partition": 8, "segment": "/d/chaos-8/00000000000000000000.log", "which": "active",
    "recovery_point": 0, "below_recovery_point": False, "size_before": 277072,
    "size_after": 277071, "from_byte": 277071, "mode": "truncate", "bytes": 1}}}  # fmt: skip
FILLED = {"disk_full": {"n1": {"ballast_bytes": 532905984, "free_bytes": 0,
    "broker_halted": True, "enospc_seen": True, "restarted": True}}}  # fmt: skip


def test_each_row_says_what_the_fault_itself_did() -> None:
    assert fault_did("corrupt-segment", CORRUPTED, "n3") == (
        "1 byte cut off at the tail of partition 8's active segment 00000000000000000000.log "
        "(from byte 277071; 277072 → 277071 bytes), not below the checkpointed recovery point 0"
    )
    assert fault_did("disk-full", FILLED, "n1") == (
        "filled with 533 MB of ballast, 0 bytes free; ENOSPC in its log: yes; broker halted: "
        "yes; restarted: yes"
    )
    assert fault_did("power-loss", {"unsynced_dropped": ["n2"]}, "n2").endswith("dropped")
    for kind, resolved in (("power-loss", {}), ("corrupt-segment", {}), ("disk-full", FILLED)):
        assert fault_did(kind, resolved, "n9") == "not confirmed applied"


def test_a_run_that_lost_nothing_says_so(tmp_path: Path) -> None:
    fault = {"id": 0, "f": "disk-full", "targets": ["n1"], "start_s": 4.3, "end_s": 15.7,
             "resolved": FILLED, "nodes": {"n1": {"counts": {"log-dir-offline": 1}}}}  # fmt: skip
    (tmp_path / "disk-faults.json").write_text(json.dumps({"faults": [fault]}))
    (tmp_path / "provenance.json").write_text(json.dumps({"lost": 0, "partitions": []}))
    section = disk_faults_section(tmp_path)
    assert section is not None and section["rows"][0]["did"].startswith("filled with 533 MB")
    page = render_report(tmp_path)
    assert "Nothing acknowledged was lost." in page and "filled with 533 MB" in page
