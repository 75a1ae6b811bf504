"""Stress the control plane: N chaos runs while both cores are kept busy.

Each run is a real ``kafka-chaos run`` (default 60 s, kill + pause +
partition + clock faults) on one local cluster, with two spinning processes
competing for the machine's cores the whole time.  From each run's history
and schedule it counts what a trustworthy nemesis never does:

- failed heals: a fault healed with an error, or never healed;
- hangs: a run that had to be killed (time limit + HANG_MARGIN_S);
- late stops: a workload still operating past time limit + 10 s;
- faults off plan: a start or end more than 1 s from the schedule;
- the worst deviation of any fault from its plan.

    python bench/control_plane.py [--runs 20] [--time-limit 60]

The figures go into the README's benchmark table; the target is 0 of each.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafka_chaos.nemeses import registry

HANG_MARGIN_S = 300.0
LATE_STOP_S = 10.0
OFF_PLAN_S = 1.0


@dataclass
class RunFigures:
    exit_code: int | None  # None: hung and killed
    wall_s: float
    failed_heals: int = 0
    late_stop: bool = False
    workload_span_s: float = 0.0
    faults: int = 0
    off_plan: int = 0
    worst_deviation_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def default_faults() -> str:
    clock = [k for k in registry.names() if k.startswith("clock")]
    return ",".join(["kill", "pause", "partition", *clock])


def spin(n: int) -> list[subprocess.Popen]:
    """Processes that keep ``n`` cores busy until killed."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def one_run(i: int, args: argparse.Namespace, store: Path) -> RunFigures:
    cmd = [
        sys.executable, "-m", "kafka_chaos.cli", "run",
        "--name", f"cp{i}", "--store", str(store), "--cluster-name", args.cluster,
        "--time-limit", str(args.time_limit), "--faults", args.faults,
        "--fault-interval", str(args.fault_interval), "--fault-duration",
        str(args.fault_duration), "--seed", str(args.seed + i),
    ]  # fmt: skip
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=args.time_limit + HANG_MARGIN_S
        )
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        code = None
    figures = RunFigures(code, time.monotonic() - t0)
    runs = sorted(store.glob(f"cp{i}/*/history.jsonl"))
    if not runs:
        figures.notes.append("no history")
        return figures
    judge(runs[-1].parent, args.time_limit, figures)
    if code not in (0, 1, 2):
        figures.notes.append(f"exit {code}: {(proc.stderr if code else '').strip()[-200:]}")
    return figures


def judge(run_dir: Path, time_limit: float, figures: RunFigures) -> None:
    """Fill ``figures`` from what the run recorded."""
    starts: dict[int, dict] = {}
    ends: dict[int, dict] = {}
    first = last = None
    with (run_dir / "history.jsonl").open() as f:
        for line in f:
            op = json.loads(line)
            value = op.get("value") if isinstance(op.get("value"), dict) else {}
            if op["process"] == "nemesis":
                (starts if value.get("phase") == "start" else ends)[value["id"]] = value
            elif not value.get("final"):
                first = op["time"] if first is None else first
                last = op["time"]
    if first is not None and last is not None:
        figures.workload_span_s = (last - first) / 1e9
        figures.late_stop = figures.workload_span_s > time_limit + LATE_STOP_S
    figures.faults = len(starts)
    for fid, start in starts.items():
        end = ends.get(fid)
        if end is None or end.get("heal_error"):
            figures.failed_heals += 1
            figures.notes.append(f"fault {fid} ({start.get('targets')}): " + (
                "never healed" if end is None else end["heal_error"]))  # fmt: skip
        deviations = [
            abs(v["at_s"] - v["planned_s"]) for v in (start, end) if v and "planned_s" in v
        ]
        worst = max(deviations, default=0.0)
        figures.worst_deviation_s = max(figures.worst_deviation_s, worst)
        if worst > OFF_PLAN_S or end is None:
            figures.off_plan += 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--faults", default=default_faults())
    parser.add_argument("--fault-interval", type=float, default=8.0)
    parser.add_argument("--fault-duration", type=float, default=6.0)
    parser.add_argument("--load", type=int, default=2, help="spinning processes (cores)")
    parser.add_argument("--cluster", default="cp-bench")
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--store", type=Path, default=None)
    args = parser.parse_args()
    store = args.store or Path(tempfile.mkdtemp(prefix="kc-control-plane-"))
    print(f"{args.runs} runs of {args.time_limit:g} s, faults {args.faults}, "
          f"{args.load} spinning processes; store {store}", flush=True)  # fmt: skip
    load = spin(args.load)
    all_figures = []
    try:
        for i in range(args.runs):
            fig = one_run(i, args, store)
            all_figures.append(fig)
            print(
                f"run {i + 1}: exit {fig.exit_code} in {fig.wall_s:.0f} s, workload "
                f"{fig.workload_span_s:.1f} s, {fig.faults} faults, {fig.failed_heals} failed "
                f"heals, {fig.off_plan} off plan, worst {fig.worst_deviation_s:.3f} s"
                + "".join(f"\n    {n}" for n in fig.notes),
                flush=True,
            )
    finally:
        for p in load:
            p.kill()
            p.wait()
    faults = sum(f.faults for f in all_figures)
    print("\nsummary")
    print(f"  runs:                      {len(all_figures)}")
    print(f"  faults:                    {faults}")
    print(f"  failed heals:              {sum(f.failed_heals for f in all_figures)}")
    print(f"  hangs:                     {sum(f.exit_code is None for f in all_figures)}")
    print(f"  past time limit + 10 s:    {sum(f.late_stop for f in all_figures)}")
    print(f"  harness errors (exit >=3): {sum((f.exit_code or 0) >= 3 for f in all_figures)}")
    print(f"  faults off plan by > 1 s:  {sum(f.off_plan for f in all_figures)}")
    worst = max((f.worst_deviation_s for f in all_figures), default=0.0)
    print(f"  worst deviation:           {worst:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
