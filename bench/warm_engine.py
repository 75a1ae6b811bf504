"""A check cold, on a warm local session, and attached to a warm Spark Connect server.

    python bench/warm_engine.py [--ops 120000] [--history H] [--rounds 3] [--held]

Side by side in one run, on one history (default: bench/gen_history.py's
generator at the size of ``./run.sh``'s default run, about 120k ops):

* ``cold``: ``kafka-chaos check --json`` alone, a fresh process and Spark
  (what ``run`` and ``check`` do by themselves);
* ``local``: ``--rounds`` checks in one process, its local session kept
  alive between them (the first pays the start);
* ``remote``: a Spark Connect server started here (checkers/connect_server.py)
  with the same settings, then ``--rounds`` checks in one process attached
  to it (``--spark-remote``); the server is stopped at the end.

Every check's ``--json`` must be identical (bench/check_diff.py's comparison,
its volatile fields ignored).  ``--held`` also runs bench/check_diff.py over
the held test histories with its AFTER side attached to the server.  The
engines run one after another (the machine is small): never two checks at once.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from check_diff import differences, normalized  # noqa: E402
from kafka_chaos.checkers import connect_server  # noqa: E402


def rounds(history: Path, n: int, remote: str | None, out: Path) -> list[float]:
    """``n`` checks of ``history`` in one fresh process; seconds of each; last JSON to ``out``."""
    inner = [sys.executable, __file__, "_rounds", str(history), str(n), str(out), remote or ""]
    done = subprocess.run(inner, capture_output=True, text=True, cwd=REPO)
    if done.returncode:
        raise SystemExit(f"checks failed:\n{done.stderr[-3000:]}")
    return [float(x) for x in done.stdout.split()]


def _rounds_here(history: Path, n: int, out: Path, remote: str) -> None:
    """The inner process: ``n`` checks through ``check_history``, as a suite's cells do."""
    from kafka_chaos.checkers.api import check_history
    from kafka_chaos.harness.spec import TestSpec

    config = TestSpec().to_dict()
    took = []
    for _ in range(n):
        t0 = time.monotonic()
        res = check_history(history, config, from_lines=True, spark_remote=remote or None)
        took.append(time.monotonic() - t0)
    out.write_text(json.dumps(res))
    print(" ".join(f"{t:.2f}" for t in took))


def cold(history: Path, out: Path) -> float:
    """``kafka-chaos check --json`` alone, as a user runs it."""
    argv = [sys.executable, "-m", "kafka_chaos.cli", "check", str(history), "--json"]
    t0 = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO)
    took = time.monotonic() - t0
    if done.returncode not in (0, 1, 2):
        raise SystemExit(f"cold check failed:\n{done.stderr[-3000:]}")
    out.write_text(done.stdout[done.stdout.index("{") :])
    return took


def same(a: Path, b: Path) -> str:
    lines = list(
        differences(normalized(json.loads(a.read_text())), normalized(json.loads(b.read_text())))
    )
    return "identical" if not lines else "DIFFERENT: " + "; ".join(lines[:5])


def print_figures(figures: dict[str, list[float]], outs: dict[str, Path]) -> None:
    print(f"{'engine':8} {'first s':>8} {'warm s (each)':>24}  output vs cold")
    for name, took in figures.items():
        warm = " ".join(f"{t:.1f}" for t in took[1:]) or "-"
        verdict = "-" if name == "cold" else same(outs["cold"], outs[name])
        print(f"{name:8} {took[0]:8.1f} {warm:>24}  {verdict}")
    cold_s = figures["cold"][0]
    for name, took in figures.items():
        if len(took) > 1:
            print(f"cold / warm {name}: {cold_s:.1f} / {min(took[1:]):.1f} s = "
                  f"{cold_s / min(took[1:]):.2f}x")  # fmt: skip
    sys.stdout.flush()


def main() -> int:
    if sys.argv[1:2] == ["_rounds"]:
        history, n, out, remote = sys.argv[2:6]
        _rounds_here(Path(history), int(n), Path(out), remote)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=float, default=120_000, help="generated history size")
    parser.add_argument("--history", type=Path, help="a history.jsonl instead of a generated one")
    parser.add_argument("--rounds", type=int, default=3, help="checks per warm engine")
    parser.add_argument("--held", action="store_true", help="also check_diff the held histories")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kc-warm-"))
    history = args.history
    if history is None:
        history = work / "history.jsonl"
        gen = [sys.executable, str(REPO / "bench" / "gen_history.py"), str(args.ops), str(history)]
        subprocess.run(gen, check=True, capture_output=True)
    ops = sum(1 for _ in history.open("rb"))
    print(f"# {history}: {ops} ops; {os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}")
    outs = {k: work / f"{k}.json" for k in ("cold", "local", "remote")}
    figures = {"cold": [cold(history, outs["cold"])]}
    figures["local"] = rounds(history, args.rounds, None, outs["local"])
    t0 = time.monotonic()
    server = connect_server.start()
    start_s = time.monotonic() - t0
    try:
        figures["remote"] = rounds(history, args.rounds, server.url, outs["remote"])
        print(f"server start {start_s:.1f} s (pid {server.pid})")
        print_figures(figures, outs)
        if args.held:  # the same server, so the held histories are judged attached too
            diff = [sys.executable, str(REPO / "bench" / "check_diff.py"), "WORKTREE", "WORKTREE",
                    "--histories", "held", "--batch", "--after-remote", server.url]  # fmt: skip
            print(f"# {' '.join(diff[1:])}", flush=True)
            subprocess.run(diff, cwd=REPO)
    finally:
        connect_server.stop(server)
    print(f"server pid {server.pid} stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
