"""The report's replica verification section, from replicas.json (forensics/replica_verify.py).

Says in words whether the replicas agree, and where a deposed leader's log
differed from what the cluster holds now: the divergence the checkers infer
from the clients, confirmed from a broker's disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafka_chaos.reports.inputs import as_dict, as_list, load_json


def spans(ranges: list[Any]) -> str:
    """[[980, 4090], [5000, 5000]] -> "980–4090, 5000"."""
    out = []
    for r in as_list(ranges):
        if isinstance(r, list) and len(r) == 2:
            out.append(f"{r[0]}–{r[1]}" if r[0] != r[1] else f"{r[0]}")
    return ", ".join(out)


def sentence(partition: int, c: dict[str, Any]) -> str:
    """One comparison that disagreed, in words."""
    where = f"offsets {spans(c.get('diverged_ranges'))} of partition {partition}"
    if c.get("source") == "before-rejoin":
        return (
            f"{c.get('node')}'s log before it rejoined held other values than the cluster holds "
            f"now at {where} ({c.get('lost_values', 0):,} of its values are now on no "
            "replica): the divergence the checker inferred from the clients, confirmed from "
            "the broker's disk."
        )
    return (
        f"{c.get('node')}'s log differs from the leader's below the high watermark at {where}: "
        "in-sync replicas disagree on committed data."
    )


def twice_sentence(partition: int, twice: dict[str, Any]) -> str:
    """Values the leader stores at two offsets, and whether their producer sent them again."""
    said = (
        f"Partition {partition}'s leader stores {twice.get('values', 0):,} values at more than "
        f"one offset; {twice.get('epoch_bump', 0):,} of them were sent again by the same "
        "producer under a bumped epoch (its client gave up on a request and started its "
        "sequences over, so the broker could not recognise the retry)"
    )
    example = next((as_dict(e) for e in as_list(twice.get("examples"))), None)
    if example:
        ids, epochs = as_list(example.get("producer_ids")), as_list(example.get("producer_epochs"))
        offsets = as_list(example.get("offsets"))
        if len(ids) == len(epochs) == 2 and len(offsets) >= 2:
            said += (
                f", e.g. value {example.get('value')} at offsets {offsets[0]} (producer "
                f"{ids[0]}, epoch {epochs[0]}) and {offsets[1]} (producer {ids[1]}, "
                f"epoch {epochs[1]})"
            )
    return said + "."


def damage_sentences(data: dict[str, Any]) -> list[str]:
    """Damaged segments in words: those a broker found and cut back on start, and those
    only reading them found (a batch failing its CRC, a segment the dump could not
    read past), which a broker never re-reads below its recovery point."""
    said = [
        f"{c.get('node')} found a damaged segment of partition {c.get('partition')} on start "
        f"and cut it back: {c.get('line')}"
        for c in (as_dict(x) for x in as_list(data.get("corruptions")))
    ]
    said += [
        f"{b.get('node')}'s copy of partition {b.get('partition')} holds a batch that fails its "
        f"CRC: offsets {b.get('base_offset')}–{b.get('last_offset')} at byte "
        f"{b.get('position')} of {str(b.get('segment')).rsplit('/', 1)[-1]}. The broker did "
        "not find it on start (the segment is below its recovery point)."
        if b.get("invalid_bytes") is None
        else f"{b.get('node')}'s copy of partition {b.get('partition')} ends segment "
        f"{str(b.get('segment')).rsplit('/', 1)[-1]} with {b.get('invalid_bytes')} bytes that "
        "hold no whole batch: Kafka reads past them to the next segment, so the offsets in "
        "them cannot be read from this copy, and no error says so."
        for b in (as_dict(x) for x in as_list(data.get("invalid_batches")))
    ]
    said += [
        f"{u.get('node')}'s copy of partition {u.get('partition')} cannot be read past a damaged "
        f"batch of {str(u.get('segment')).rsplit('/', 1)[-1]} (DumpLogSegments: "
        f"{u.get('error')}); what it holds after that is not compared."
        for u in (as_dict(x) for x in as_list(data.get("unreadable")))
    ]
    return said


def replicas_section(run_dir: Path) -> dict[str, Any]:
    loaded = load_json(run_dir / "replicas.json")
    if loaded.missing:
        return {"missing": f"replica verification was not run ({loaded.missing})"}
    data = as_dict(loaded.data)
    if data.get("error"):
        return {"missing": f"replica verification could not run: {data['error']}"}
    parts = [as_dict(p) for p in as_list(data.get("partitions"))]
    findings = (
        [
            sentence(p.get("partition"), as_dict(c))
            for p in parts
            for c in as_list(p.get("compared"))
            if as_dict(c).get("agree") is False
        ]
        + [
            twice_sentence(p.get("partition"), as_dict(p["stored_twice"]))
            for p in parts
            if p.get("stored_twice")
        ]
        + damage_sentences(data)
    )
    live_agree = all(p.get("agree") is True for p in parts)
    return {
        "topic": data.get("topic"),
        "complete": data.get("complete"),
        "partitions": parts,
        "findings": findings,
        "headline": (
            f"All {len(parts)} partitions: every in-sync replica holds the same log below the "
            "high watermark."
            if live_agree
            else "Some replicas could not be compared, or disagree: see the table."
        ),
        "truncations": [as_dict(t) for t in as_list(data.get("truncations"))],
    }


def truncation_marks(run_dir: Path) -> list[tuple[int, float, str]]:
    """(partition, seconds on the history's axis, tooltip) of every truncation with a time."""
    data = as_dict(load_json(run_dir / "replicas.json").data)
    marks = []
    for t in as_list(data.get("truncations")):
        t = as_dict(t)
        if not isinstance(t.get("history_s"), (int, float)):
            continue
        below = t.get("high_watermark")
        tip = (
            f"{t.get('node')} truncated partition {t.get('partition')} to offset {t.get('offset')}"
        )
        if below is not None:
            tip += f" (below high watermark {below})"
        marks.append((t.get("partition"), float(t["history_s"]), tip))
    return marks
