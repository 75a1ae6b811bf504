"""Power loss, measured: loss rate and acknowledged throughput per flush setting x RF x targets.

    python bench/power_loss.py --runs 5 --flush default,every --rf 3 --targets minority,all

Each cell is the power-loss-all scenario (lazyfs, 13 partitions, acks=all,
idempotence off, a power loss about every 16 s) with the cell's settings:

- ``--flush``: ``default`` (Kafka never fsyncs) or ``every``
  (``log.flush.interval.messages=1`` broker-wide);
- ``--rf``: the topic's replication factor, min.insync.replicas = min(2, RF);
- ``--targets``: ``minority`` (one of the three brokers), ``all``, or ``isr``
  (the in-sync replicas of the busiest partition, looked up at each cut);
- ``--faults``: ``power-loss`` (SIGKILL and drop what was not fsynced), and
  ``kill`` to set the same cut beside it with the page cache kept.

Rounds run every selected cell once, cells ordered so the brokers restart
for a new flush setting only when it changes; round r uses seed 5000 + r.
Per cell it prints: runs that lost an acknowledged value (k/n, 95 % Wilson
interval), the mean share of acknowledged values lost, and acknowledged
msg/s over the run's time limit (mean, 95 % t-interval).  Runs go to
``store-bench/``; the cluster is taken down at the end.

A cluster that did not come back (a broker still unregistered 90 s after a
run, or one that kept the next run from starting) is its own column: that
run's figures are not in the loss and throughput columns.  The broker's
error lines and the files they name are copied to ``<run>/not-back/`` and
the cluster is rebuilt (down, then up by the next run) before going on.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import itertools
import json
import math
import re
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_chaos.harness.backends import cluster_exists, destroy_cluster, load_cluster
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.rates import wilson
from kafka_chaos.harness.run_files import read_lines
from scipy.stats import t as student_t

from kafka_chaos import not_back
from kafka_chaos.options import build_spec
from kafka_chaos.run import run_test
from kafka_chaos.scenarios import SCENARIOS

FLUSH = {"default": {}, "every": {"log.flush.interval.messages": "1"}}
TARGETS = ("minority", "all", "isr")
FAULTS = ("power-loss", "kill")
CLUSTER = "kc-bench-power"
BACK_WAIT_S = 90.0  # a broker restart takes 5 to 7 s here; a loaded machine, more
NOT_BACK = "cluster did not come back"


@dataclass(frozen=True)
class Cell:
    flush: str
    rf: int
    targets: str
    fault: str

    @property
    def name(self) -> str:
        return f"flush={self.flush} rf={self.rf} targets={self.targets} fault={self.fault}"


def cell_layer(
    cell: Cell, time_limit_s: float, seed: int, cluster: str, rate: float | None = None
) -> dict[str, Any]:
    """The run options of one cell, over the power-loss-all preset; ``rate``: the
    producers' target sends per second instead of the preset's 1,000 (one far above
    what the machine can send measures acknowledged msg/s at saturation)."""
    preset = {k: v for k, v in SCENARIOS["power-loss-all"].items() if k not in ("description",)}
    preset.pop("expected_verdict", None)
    nemesis = {**preset["nemesis"], "faults": [cell.fault], "targets": cell.targets}
    return {
        **preset,
        "name": "bench-power-loss",
        "seed": seed,
        "time_limit_s": time_limit_s,
        "cluster": {**preset["cluster"], "name": cluster, "broker_config": FLUSH[cell.flush]},
        "topic": {
            **preset["topic"],
            "replication_factor": cell.rf,
            "min_insync_replicas": min(2, cell.rf),
        },
        "nemesis": nemesis,
        "producer": {**preset["producer"], **({"rate": rate} if rate else {})},
    }


def run_figures(run_dir: Path, time_limit_s: float) -> dict[str, Any]:
    """Verdict, acked, lost and acked msg/s (acks within the time limit) of one run."""
    results = json.loads((run_dir / "results.json").read_text())
    summary = results.get("summary", {})
    in_time = sum(
        1
        for op in read_lines(run_dir / "history.jsonl")
        if op.get("f") == "send" and op.get("type") == "ok" and op["time"] <= time_limit_s * 1e9
    )
    return {
        "verdict": results.get("verdict"),
        "acked": summary.get("acked"),
        "lost": summary.get("acked_lost"),
        "acked_per_s": in_time / time_limit_s,
        "run_dir": str(run_dir),
    }


def one_run(layer: dict[str, Any], store: Path, time_limit_s: float, name: str) -> dict[str, Any]:
    """One run's figures; a cluster that did not come back is marked, kept as evidence,
    and taken down so the next run brings up a fresh one."""
    try:
        outcome = run_test(build_spec(layer), store=store)
        figures = run_figures(outcome.run_dir.path, time_limit_s)
    except HarnessError as e:
        figures = {"verdict": f"harness error: {e}", "run_dir": str(newest_run(store, layer))}
    if not cluster_exists(name):
        return figures
    cluster = load_cluster(name)
    try:
        missing = not_back.unregistered(cluster, BACK_WAIT_S)
        if missing:
            dest = Path(figures["run_dir"]) / "not-back"
            try:
                kept: dict[str, Any] = not_back.save_evidence(cluster, missing, dest)
            except OSError as e:  # the verdict stands without its evidence; say so
                kept = {"error": f"saving evidence: {e}"}
            figures.update(not_back=missing, evidence=str(dest), kept=kept)
    finally:
        cluster.close()
    if missing:
        destroy_cluster(name)
    return figures


def newest_run(store: Path, layer: dict[str, Any]) -> Path:
    """The run directory a failed ``run_test`` left (it always leaves one)."""
    runs = sorted(p for p in (store / layer["name"]).glob("*T*Z") if p.is_dir())
    return runs[-1] if runs else store


def t_interval(xs: list[float]) -> tuple[float, float, float]:
    """Mean and its 95 % t-interval (the mean twice when there is one value)."""
    mean = statistics.fmean(xs)
    if len(xs) < 2:
        return mean, mean, mean
    half = student_t.ppf(0.975, len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))
    return mean, mean - half, mean + half


def came_back(run: dict[str, Any]) -> bool:
    """False for a run after which a broker never registered, or that one kept from starting."""
    return not run.get("not_back") and "brokers not registered" not in str(run.get("verdict"))


def cell_row(cell: Cell, runs: list[dict[str, Any]]) -> str:
    gone = sum(1 for r in runs if not came_back(r))
    done = [r for r in runs if came_back(r) and isinstance(r.get("lost"), int) and r.get("acked")]
    head = f"| {cell.flush} | {cell.rf} | {cell.targets} | {cell.fault} | {len(runs)} | {gone} "
    if not done:
        return head + "| 0 | — | — | — |"
    hits = sum(1 for r in done if r["lost"] > 0)
    lo, hi = wilson(hits, len(done))
    share, s_lo, s_hi = t_interval([r["lost"] / r["acked"] for r in done])
    rate, r_lo, r_hi = t_interval([r["acked_per_s"] for r in done])
    return (
        head + f"| {len(done)} "
        f"| {hits}/{len(done)} ({lo:.0%}–{hi:.0%}) "
        f"| {share:.1%} ({max(0.0, s_lo):.1%}–{min(1.0, s_hi):.1%}) "
        f"| {rate:.0f} ({max(0.0, r_lo):.0f}–{r_hi:.0f}) |"
    )


@contextlib.contextmanager
def held(lock: Path) -> Iterator[None]:
    """An exclusive flock on ``lock`` for the duration (what ``flock LOCK cmd`` does)."""
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def choices(text: str, allowed: tuple[str, ...] | None, what: str) -> list[str]:
    picked = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in picked if allowed is not None and x not in allowed]
    if not picked or bad:
        sys.exit(f"--{what}: {', '.join(bad) or 'nothing'} not one of {', '.join(allowed or ())}")
    return picked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--time-limit", type=float, default=40.0)
    parser.add_argument("--flush", default="default,every", help="default,every")
    parser.add_argument("--rf", default="3", help="replication factors, e.g. 1,2,3")
    parser.add_argument("--targets", default="minority,all", help="minority,all,isr")
    parser.add_argument("--faults", default="power-loss", help="power-loss,kill")
    parser.add_argument(
        "--rate",
        type=float,
        help="producers' target sends per second (default: the preset's 1,000); one far "
        "above what the machine sends, e.g. 50000, measures the cost of flushing at saturation",
    )
    parser.add_argument("--cluster-name", default=CLUSTER)
    parser.add_argument("--store", type=Path, default=Path("store-bench"))
    parser.add_argument("--keep-cluster", action="store_true")
    parser.add_argument(
        "--lock",
        type=Path,
        default=Path("/tmp/kc-itest.lock"),
        help="held around each run, so runs of other benches and tests on the machine wait",
    )
    parser.add_argument(
        "--table-from",
        type=Path,
        metavar="OUTPUT",
        help="print the table from the 'round ...' lines of an earlier (or cut short) bench output",
    )
    args = parser.parse_args()
    if args.table_from is not None:
        print_table(runs_from_output(args.table_from))
        return
    rfs = choices(args.rf, ("1", "2", "3"), "rf")
    cells = [
        Cell(f, int(rf), tg, fault)
        for f, rf, tg, fault in itertools.product(
            choices(args.flush, tuple(FLUSH), "flush"),
            rfs,
            choices(args.targets, TARGETS, "targets"),
            choices(args.faults, FAULTS, "faults"),
        )
    ]
    if args.runs < 1:
        sys.exit("--runs: at least 1")
    per_cell: dict[Cell, list[dict[str, Any]]] = {c: [] for c in cells}
    started = time.time()
    try:
        for r in range(args.runs):
            # Odd rounds walk the flush settings backwards: one broker restart per round.
            order = cells if r % 2 == 0 else list(reversed(cells))
            for cell in order:
                layer = cell_layer(cell, args.time_limit, 5000 + r, args.cluster_name, args.rate)
                with held(args.lock):
                    figures = one_run(layer, args.store, args.time_limit, args.cluster_name)
                per_cell[cell].append(figures)
                print(f"round {r + 1} {cell.name}: {json.dumps(figures)}", flush=True)
    finally:
        if not args.keep_cluster:
            destroy_cluster(args.cluster_name)
    took = time.time() - started
    print(f"\n{args.runs} rounds in {took:.0f} s; time limit {args.time_limit:g} s")
    print_table(per_cell)


def print_table(per_cell: dict[Cell, list[dict[str, Any]]]) -> None:
    print(
        f"| flush | RF | targets | fault | runs | {NOT_BACK} | runs counted "
        "| runs losing acked values (95% Wilson) "
        "| acked values lost, mean (95% t) | acked msg/s, mean (95% t) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for cell, runs in per_cell.items():
        print(cell_row(cell, runs))


_ROUND = re.compile(
    r"^round \d+ flush=(?P<flush>\S+) rf=(?P<rf>\d+) targets=(?P<targets>\S+) "
    r"fault=(?P<fault>\S+): (?P<figures>\{.*\})$"
)


def runs_from_output(path: Path) -> dict[Cell, list[dict[str, Any]]]:
    """Each cell's figures from a bench output's "round ..." lines, in first-seen order."""
    per_cell: dict[Cell, list[dict[str, Any]]] = {}
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        sys.exit(f"--table-from: {e}")
    for line in text.splitlines():
        m = _ROUND.match(line)
        if m:
            cell = Cell(m["flush"], int(m["rf"]), m["targets"], m["fault"])
            per_cell.setdefault(cell, []).append(json.loads(m["figures"]))
    if not per_cell:
        sys.exit(f"--table-from: {path} has no 'round ...' lines")
    return per_cell


if __name__ == "__main__":
    main()
