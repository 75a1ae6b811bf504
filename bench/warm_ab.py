"""Two revisions' check of one history, warm and cold, side by side, alternating.

    python bench/warm_ab.py HISTORY BEFORE AFTER [--config C] [--rounds 2] [--cold 1]

``warm``: one Spark Connect server (checkers/connect_server.py, this tree's),
started once; each round, BEFORE then AFTER (the order flips every round)
runs ``kafka-chaos check HISTORY --json --spark-remote URL`` in a fresh
client process of its own tree (bench/check_diff.py's ``export``: ``git
archive``, or WORKTREE).  The engine is the same warm JVM for both, and only
the client's code differs, so the two are measured alike.  A first round
warms the server's JIT and is shown apart.  ``cold``: each side's check in a
fresh process with its own local Spark, alternating too.

Prints each check's wall seconds and the CPU seconds its engine's JVM spent
(the server's, read from /proc before and after; a cold check's own JVM's:
bench/timed_check.py), then whether the two sides' ``--json`` are identical
(bench/check_diff.py's comparison).  HISTORY may be a Parquet rows directory
(checkers/ingest/load.py ``rows_dir``), so neither side converts: both must
then read the same rows format.  Figures only; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from check_diff import Tree, differences, export, normalized, tree_env  # noqa: E402
from kafka_chaos.checkers import connect_server  # noqa: E402
from timed_check import POLL_S, _children_cpu_s, child_pids, stat_cpu_s  # noqa: E402


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its live descendants."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            total += stat_cpu_s(Path(f"/proc/{p}/stat").read_text())
        except OSError:
            continue
        todo += [int(kid) for kid in child_pids(p)]
    return total


def run_check(tree: Tree, argv: list[str], server_pid: int | None) -> tuple[float, float, dict]:
    """One check by ``tree``'s CLI in a fresh process: wall s, engine CPU s, its JSON."""
    cmd = [sys.executable, "-m", tree.cli, *argv]
    before = cpu_s(server_pid) if server_pid else 0.0
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=tree.path, env=tree_env(tree), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(proc.communicate()))
    reader.start()
    jvm = 0.0
    while reader.is_alive():
        if server_pid is None:
            jvm = max(jvm, _children_cpu_s(proc.pid))
        reader.join(POLL_S)
    took = time.monotonic() - t0
    if server_pid:
        jvm = cpu_s(server_pid) - before
    stdout, stderr = out
    if proc.returncode not in (0, 1, 2):
        raise SystemExit(f"{tree.label}: check failed ({proc.returncode}): {stderr[-2000:]}")
    return took, jvm, json.loads(stdout[stdout.index("{") :])


def alternate(
    trees: list[Tree], argv: list[str], rounds: int, server_pid: int | None, label: str
) -> dict[str, list[tuple[float, float]]]:
    """``rounds`` rounds, each side once a round, the order flipped every round."""
    figures: dict[str, list[tuple[float, float]]] = {t.label: [] for t in trees}
    outputs: dict[str, dict] = {}
    for r in range(rounds):
        for tree in trees if r % 2 == 0 else trees[::-1]:
            took, jvm, res = run_check(tree, argv, server_pid)
            figures[tree.label].append((took, jvm))
            outputs[tree.label] = res
            print(f"{label} round {r}: {tree.label:28} {took:7.1f} s  {jvm:7.1f} CPU-s "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)  # fmt: skip
    a, b = (normalized(outputs[t.label]) for t in trees)
    diff = list(differences(a, b))
    print(f"{label}: output " + ("identical" if not diff else "DIFFERENT: " + "; ".join(diff[:5])))
    return figures


def summary(label: str, figures: dict[str, list[tuple[float, float]]], skip: int) -> None:
    """Best and each wall / CPU figure per side, ``skip`` first rounds left out."""
    best = {}
    for side, runs in figures.items():
        kept = runs[skip:] or runs
        best[side] = min(t for t, _ in kept), min(c for _, c in kept)
        each = " ".join(f"{t:.1f}/{c:.1f}" for t, c in kept)
        print(f"{label:5} {side:28} best {best[side][0]:7.1f} s {best[side][1]:7.1f} CPU-s  "
              f"(wall/CPU each: {each})")  # fmt: skip
    (b_wall, b_cpu), (a_wall, a_cpu) = best.values()
    print(f"{label:5} before/after: wall {b_wall / a_wall:.2f}x, CPU {b_cpu / a_cpu:.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("history", type=Path)
    parser.add_argument("before", help="git revision, or WORKTREE")
    parser.add_argument("after", help="git revision, or WORKTREE")
    parser.add_argument("--config", type=Path, help="the run config to judge under")
    parser.add_argument("--rounds", type=int, default=2, help="warm rounds after the first")
    parser.add_argument("--cold", type=int, default=1, help="cold rounds (0: none)")
    args = parser.parse_args()
    if not args.history.exists():
        raise SystemExit(f"{args.history}: no such history")
    work = Path(tempfile.mkdtemp(prefix="kc-warm-ab-"))
    trees = [export(args.before, work / "before"), export(args.after, work / "after")]
    argv = ["check", str(args.history.resolve()), "--json"]
    if args.config:
        argv += ["--config", str(args.config.resolve())]
    print(f"# {args.history}; {os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}", flush=True)
    server = connect_server.start(expected_ops=int(1e7))
    try:
        print(f"# server pid {server.pid} at {server.url}", flush=True)
        remote = [*argv, "--spark-remote", server.url]
        warm = alternate(trees, remote, args.rounds + 1, server.pid, "warm")
    finally:
        connect_server.stop(server)
        print(f"# server pid {server.pid} stopped", flush=True)
    cold = alternate(trees, argv, args.cold, None, "cold") if args.cold else None
    summary("warm", warm, skip=1)
    if cold:
        summary("cold", cold, skip=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
