"""Reproduction benchmark for the unclean-leader-election presets.

Runs each preset N times per Kafka version/mode and prints, per cell:
- reproduction rate: runs of the unsafe preset whose checker found acknowledged
  loss (acked-lost, lost-write or inconsistent-offsets), by their counts, whatever
  the verdict: under unclean election the loss is a warning and the verdict valid;
- acknowledged messages lost: the ``acked-lost`` count of each run, against the
  acknowledged sends (results.json ``summary``), unsafe and safe;
- false-positive rate: runs of the safe preset that were not valid;
- time to first detection: wall-clock seconds from the start of the cell until
  the first run that found the loss had its verdict;
- the mechanism seen: which replica was elected, from the fault's record.

    python bench/unclean_repro.py --runs 5
    python bench/unclean_repro.py --runs 10 --matrix 3.9.2:zk,3.9.2:kraft,4.4.0:kraft

Each version gets its own cluster (``bench-<version>-<mode>``), destroyed at
the end.  Runs go to ``store-bench/`` so the user's store stays clean.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from kafka_chaos.harness.backends import destroy_cluster

from kafka_chaos.options import build_spec
from kafka_chaos.run import run_test
from kafka_chaos.scenarios import scenario_layer

LOSS_CHECKS = ("acked-lost", "lost-write", "inconsistent-offsets")
PRESETS = ("unclean-leader-election", "unclean-leader-election-safe")
DEFAULT_MATRIX = "3.9.2:zk,3.9.2:kraft,4.4.0:kraft"


def found_loss(run_dir: Path) -> bool:
    """Whether the checks counted any loss, of any severity (not the verdict: unclean
    election's loss is a warning, its run valid)."""
    results = json.loads((run_dir / "results.json").read_text())
    return any(results["checks"].get(c, {}).get("count", 0) > 0 for c in LOSS_CHECKS)


def acked_lost(run_dir: Path) -> str:
    """Lost/acked of one run, from results.json's summary ("?" when unknown)."""
    summary = json.loads((run_dir / "results.json").read_text()).get("summary") or {}
    lost = summary.get("acked_lost")
    return f"{'?' if lost is None else lost}/{summary.get('acked', '?')}"


def mechanism(run_dir: Path) -> str:
    """Who was elected after the leader was killed, from the fault's end record."""
    for line in (run_dir / "history.jsonl").read_text().splitlines():
        op = json.loads(line)
        if op["f"] == "unclean-election" and op["value"].get("phase") == "end":
            r = op["value"].get("resolved") or {}
            return f"{r.get('killed')}->{r.get('elected')} isr={r.get('elected_isr')}"
    return "?"


def run_cell(version: str, mode: str, preset: str, runs: int, store: Path) -> dict:
    cluster = f"bench-{version.replace('.', '')}-{mode}"
    layers = [
        scenario_layer(preset),
        {"cluster": {"name": cluster, "kafka_version": version, "mode": mode}},
    ]
    start = time.monotonic()
    first_detection = None
    outcomes = []
    for i in range(runs):
        spec = build_spec(*layers, {"seed": 1000 + i})
        outcome = run_test(spec, store=store)
        loss = outcome.verdict is not None and found_loss(outcome.run_dir.path)
        if loss and first_detection is None:
            first_detection = time.monotonic() - start
        counted = acked_lost(outcome.run_dir.path) if outcome.verdict is not None else "?"
        outcomes.append((outcome.verdict, loss, mechanism(outcome.run_dir.path), counted))
        print(
            f"  {version} {mode} {preset} run {i + 1}: verdict={outcome.verdict} "
            f"loss={loss} acked-lost={counted} {outcomes[-1][2]}",
            flush=True,
        )
    return {"outcomes": outcomes, "first_detection_s": first_detection}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--matrix", default=DEFAULT_MATRIX)
    parser.add_argument("--store", type=Path, default=Path("store-bench"))
    args = parser.parse_args()
    rows = []
    for cell in args.matrix.split(","):
        version, mode = cell.split(":")
        try:
            unsafe = run_cell(version, mode, PRESETS[0], args.runs, args.store)
            safe = run_cell(version, mode, PRESETS[1], args.runs, args.store)
        finally:
            destroy_cluster(f"bench-{version.replace('.', '')}-{mode}")
        repro = sum(loss for _, loss, _, _ in unsafe["outcomes"])
        false_pos = sum(v != "valid" for v, _, _, _ in safe["outcomes"])
        rows.append(
            (
                version,
                mode,
                repro,
                false_pos,
                unsafe["first_detection_s"],
                unsafe["outcomes"][0][2] if unsafe["outcomes"] else "?",
                ", ".join(o[3] for o in unsafe["outcomes"]),
                ", ".join(o[3] for o in safe["outcomes"]),
            )
        )
    n = args.runs
    print()
    print(
        "| Kafka | mode | unsafe: loss reproduced | safe: false positives | "
        "acknowledged messages lost (lost/acked per run): unsafe | safe | "
        "time to first detection | mechanism (first run) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for version, mode, repro, fp, first, mech, lost_unsafe, lost_safe in rows:
        first_s = "never" if first is None else f"{first:.0f} s"
        print(
            f"| {version} | {mode} | {repro}/{n} ({100 * repro / n:.0f}%) | "
            f"{fp}/{n} ({100 * fp / n:.0f}%) | {lost_unsafe} | {lost_safe} | "
            f"{first_s} | {mech} |"
        )


if __name__ == "__main__":
    main()
