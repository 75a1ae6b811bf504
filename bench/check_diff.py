"""Diff `kafka-chaos check --json` of two revisions on the same histories (issue 31).

Does a change keep every check's output?  Both revisions judge the same files
and their outputs must be equal, field by field, but for VOLATILE.

    python bench/check_diff.py BEFORE AFTER [--histories held evidence queue txn]
                               [--ops 1e6] [--txn-ops 1e6] [--filter SUBSTR] [--batch] [--keep]

AFTER (or BEFORE) may be ``WORKTREE``: the work tree as it is.  Each revision
is exported with ``git archive`` (the repository's index and work tree are
left alone) and its own CLI (``kafka_chaos.cli``, or ``harness.cli`` before
fd51da9) runs with PYTHONPATH and cwd set to that export, one fresh process
per history, the two sides alternating, histories serially (Spark takes both
cores); ``--batch`` runs one process per side that calls the CLI's ``main``
once per history (same argv, same code path to the JSON), for the many tiny
histories whose checks are mostly JVM start-up.  Every run gets its own
copy of the history, so the Parquet rows a check derives beside it are never
shared between the sides.

The histories:

* ``held``: the hand-written histories the unit tests hold in code
  (tests/unit: test_checker_examples, test_txn_examples, test_seek_positions,
  test_cycle_wr under both its configs, test_checker_cli, test_fault_plan),
  each written as its own file with the config its test judges it under;
* ``evidence``: the recorded runs kept in evidence/*/ (history.jsonl.gz,
  config.json);
* ``queue``: ``--ops`` ops of bench/gen_history.py's generator;
* ``txn``: ``--txn-ops`` ops of bench/txn_check_scale.py's transactional
  generator (mixed mode, crashes and rebalances) with ``--inject`` cycles that
  Elle must report, judged with the cycle search on.

All are written once, by the AFTER tree's code (``--cases-from`` another), and
the same files go to both sides.  ``--record``: the AFTER side gets each
history's Parquet rows as a run writes them while recording
(checkers/ingest/recorded_rows.py), and its check starts from them.
Prints one line per history and, for a
difference, the differing paths; exit code 1 if any history differs.  A
difference is either a regression or run-to-run noise: judge that history
again with the same revision on both sides (``--filter``) to tell them apart.
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
WORKTREE = "WORKTREE"
MAVEN_MIRROR = "file:///work/shared/maven"

# Output fields that differ between two runs of the same code, with why.  Each
# is a dotted path; "*" matches any one key.  Nothing else is dropped.
VOLATILE: dict[str, str] = {
    "cycles.seconds": "wall time of the cycle search (checkers/txn/cycle_checks.py)",
    "cycles.elle_seconds": "wall time of the Elle calls (checkers/txn/cycle_checks.py)",
}


@dataclass
class Tree:
    """One side: a revision exported to ``path`` and the CLI module it has."""

    label: str
    path: Path
    cli: str
    checkers: str = "checkers"  # the checkers package's name in this tree
    rows: str = "checkers.recorded_rows"  # the module that records a history's rows
    record: bool = False  # check from Parquet rows recorded as a run writes them (--record)
    remote: str | None = None  # sc://HOST:PORT: check on that Spark Connect server


@dataclass
class History:
    """A history to judge: ``dir`` holds history.jsonl and maybe config.json."""

    name: str
    dir: Path


@dataclass
class Outcome:
    output: dict[str, Any]
    seconds: float


def export(rev: str, into: Path) -> Tree:
    """``rev`` as a directory: ``git archive`` into ``into``, or the work tree itself."""
    if rev == WORKTREE:
        path, label = REPO, WORKTREE
    else:
        commit = git("rev-parse", "--verify", f"{rev}^{{commit}}")
        path, label = into, f"{rev} ({commit[:7]})"
        into.mkdir(parents=True)
        archive = subprocess.Popen(["git", "-C", str(REPO), "archive", commit],
                                   stdout=subprocess.PIPE)  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            raise SystemExit(f"git archive {commit} failed")
    cli = "kafka_chaos.cli" if (path / "kafka_chaos" / "cli.py").is_file() else "harness.cli"
    # Trees from issue 47 on install every package under kafka_chaos. (pyproject.toml),
    # and keep ingest in checkers/ingest/.
    namespaced = '"kafka_chaos.checkers" = "checkers"' in (path / "pyproject.toml").read_text()
    checkers = "kafka_chaos.checkers" if namespaced else "checkers"
    staged = (path / "checkers" / "ingest" / "recorded_rows.py").is_file()
    rows = f"{checkers}.ingest.recorded_rows" if staged else f"{checkers}.recorded_rows"
    return Tree(label, path, cli, checkers, rows)


def git(*args: str) -> str:
    """`git -C REPO ARGS`, read-only here: rev-parse."""
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True,
                          text=True).stdout.strip()  # fmt: skip


def tree_env(tree: Tree) -> dict[str, str]:
    """The environment a side runs in: only its own tree on the path (the editable
    install must not supply a module the tree lacks), Elle from the offline mirror."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(tree.path)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.setdefault("KC_EXTRA_MAVEN_REPOS", MAVEN_MIRROR)
    return env


def python(
    tree: Tree, args: list[str], timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    """``python3 ARGS`` in ``tree`` (cwd too: ``-m`` puts cwd first on sys.path)."""
    return subprocess.run([sys.executable, *args], cwd=tree.path, env=tree_env(tree),
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip


def imports_own(tree: Tree) -> str:
    """Where ``tree``'s processes import checkers and the CLI from; refuses any other tree."""
    code = (f"import {tree.checkers} as k, {tree.cli} as c; "
            "print(k.__file__); print(c.__file__)")  # fmt: skip
    proc = python(tree, ["-c", code])
    files = proc.stdout.split()
    if proc.returncode or not all(Path(f).is_relative_to(tree.path) for f in files):
        raise SystemExit(f"{tree.label} does not import its own tree: {proc.stdout}{proc.stderr}")
    return files[0]


def cli_args(tree: Tree, history: History, work: Path) -> list[str]:
    """``check HISTORY --json`` on a private copy of the history, for ``tree``."""
    run_dir = work / re.sub(r"\W", "_", tree.label) / history.name
    shutil.copytree(history.dir, run_dir)
    if tree.record:
        record = python(tree, ["-m", tree.rows, str(run_dir / "history.jsonl")])
        if record.returncode:
            raise SystemExit(f"{tree.label}: recording the rows failed:\n{record.stderr[-3000:]}")
    argv = ["check", str(run_dir / "history.jsonl"), "--json"]
    if tree.remote:
        argv += ["--spark-remote", tree.remote]
    if (run_dir / "config.json").is_file():
        argv += ["--config", str(run_dir / "config.json")]
    return argv


def outcome(rc: int, stdout: str, stderr: str, took: float) -> Outcome:
    """A CLI run as an Outcome: its JSON, or for a harness error its exit and last line."""
    if rc not in (0, 1, 2):
        # An error is an outcome too: both sides refusing alike is "identical".
        tail = stderr.strip().splitlines()[-1:] or [""]
        return Outcome({"error": {"exit": rc, "last_line": tail[0]}}, took)
    return Outcome(json.loads(stdout[stdout.index("{") :]), took)


def check(tree: Tree, history: History, work: Path, timeout: float) -> Outcome:
    """One history judged by ``tree``'s CLI in a fresh process, as a user runs it."""
    argv = cli_args(tree, history, work)
    t0 = time.monotonic()
    proc = python(tree, ["-m", tree.cli, *argv], timeout)
    took = time.monotonic() - t0
    shutil.rmtree(Path(argv[1]).parent)  # the Parquet rows of a 1e6-op history: hundreds of MB
    if tree.record and ": building it from" in proc.stderr:  # checkers/ingest/load.py rebuilt them
        print(f"    {tree.label} did not check from the recorded rows: {proc.stderr[-500:]}")
    return outcome(proc.returncode, proc.stdout, proc.stderr, took)


# ``--batch``: one process per side calls its CLI's main() once per history, so
# the JVM and Spark start once (30-60 s a check on this machine, most of it
# start-up, for histories of 12 ops).  Same code path from argv to the JSON.
BATCH_DRIVER = """
import contextlib, importlib, io, json, sys, time
cli = importlib.import_module(sys.argv[1])
with open(sys.argv[2]) as fh, open(sys.argv[3], "w") as out:
    for name, argv in json.load(fh):
        so, se = io.StringIO(), io.StringIO()
        t0 = time.monotonic()
        with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
            rc = cli.main(argv)
        took = time.monotonic() - t0
        line = dict(name=name, rc=rc, took=took, stdout=so.getvalue(), stderr=se.getvalue())
        out.write(json.dumps(line) + "\\n")
        out.flush()
"""


def check_batch(
    tree: Tree, histories: list[History], work: Path, timeout: float
) -> dict[str, Outcome]:
    """Every history judged by ``tree``'s CLI, in one process."""
    jobs = [(h.name, cli_args(tree, h, work)) for h in histories]
    side = re.sub(r"\W", "_", tree.label)
    (work / f"{side}.jobs.json").write_text(json.dumps(jobs))
    results = work / f"{side}.results.jsonl"
    proc = python(tree, ["-c", BATCH_DRIVER, tree.cli, str(work / f"{side}.jobs.json"),
                         str(results)], timeout * len(jobs))  # fmt: skip
    if proc.returncode:
        raise SystemExit(f"{tree.label}: the batch failed:\n{proc.stderr[-3000:]}")
    shutil.rmtree(work / side)
    done = [json.loads(line) for line in results.read_text().splitlines()]
    return {d["name"]: outcome(d["rc"], d["stdout"], d["stderr"], d["took"]) for d in done}


def normalized(output: dict[str, Any]) -> dict[str, Any]:
    """``output`` without the VOLATILE fields."""

    def drop(node: Any, path: list[str]) -> Any:
        if not isinstance(node, dict):
            return node
        out = {}
        for k, v in node.items():
            here = [*path, k]
            if any(_matches(p.split("."), here) for p in VOLATILE):
                continue
            out[k] = drop(v, here)
        return out

    return drop(output, [])


def _matches(pattern: list[str], path: list[str]) -> bool:
    return len(pattern) == len(path) and all(
        p in ("*", k) for p, k in zip(pattern, path, strict=True)
    )


def differences(a: Any, b: Any, path: str = "") -> Iterator[str]:
    """``path: a -> b`` for every leaf where ``a`` and ``b`` differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            yield from differences(a.get(k, MISSING), b.get(k, MISSING), f"{path}.{k}".lstrip("."))
    elif isinstance(a, list) and isinstance(b, list) and a != b:
        for i in range(max(len(a), len(b))):
            x = a[i] if i < len(a) else MISSING
            y = b[i] if i < len(b) else MISSING
            yield from differences(x, y, f"{path}[{i}]")
    elif a != b or type(a) is not type(b):
        yield f"{path}: {_short(a)} -> {_short(b)}"


MISSING = type("Missing", (), {"__repr__": lambda self: "<absent>"})()


def _short(value: Any, width: int = 100) -> str:
    text = repr(value) if value is MISSING else json.dumps(value, sort_keys=True)
    return text if len(text) <= width else text[: width - 3] + "..."


# ---- writing the histories (runs under the generating tree's PYTHONPATH) ----


def emit(kind: str, tree: Path, out: Path, ops: int, seed: int, inject: int) -> None:
    """Write the ``kind`` histories into ``out``/NAME/ with ``tree``'s own code."""
    sys.path[:0] = [str(tree / "tests" / "unit"), str(tree / "bench"), str(tree)]
    if kind == "held":
        emit_held(tree, out)
    elif kind == "evidence":
        for run in sorted((tree / "evidence").glob("*/history.jsonl.gz")):
            dest = out / f"evidence.{run.parent.name}"
            dest.mkdir(parents=True)
            with gzip.open(run, "rb") as src, open(dest / "history.jsonl", "wb") as dst:
                shutil.copyfileobj(src, dst)
            if (run.parent / "config.json").is_file():
                shutil.copy(run.parent / "config.json", dest / "config.json")
    elif kind == "queue":
        (out / f"queue.{size(ops)}").mkdir(parents=True)
        kit(tree, "synthetic").generate(ops, out / f"queue.{size(ops)}" / "history.jsonl", seed)
    elif kind == "txn":
        from txn_check_scale import inject_cycles  # type: ignore[import-not-found]

        txn = kit(tree, "synthetic_txn")
        shape = txn.Shape(mode="mixed", crash_p=0.001, rebalance_p=0.001)  # as txn_check_scale
        dest = out / f"txn.{size(ops)}"
        dest.mkdir(parents=True)
        txn.write(dest / "history.jsonl", ops, seed=seed, shape=shape)
        inject_cycles(dest / "history.jsonl", inject, seed)
        (dest / "config.json").write_text(json.dumps(txn.config(shape)))


def kit(tree: Path, name: str) -> Any:
    """Test-support module ``name`` of ``tree``: testkit/ once it moved there, else
    checkers/.  Chosen by the tree's files, not by trying imports: an import that
    fails in an old tree could be answered by another tree's installed package."""
    package = "testkit" if (tree / "testkit" / f"{name}.py").is_file() else "checkers"
    return importlib.import_module(f"{package}.{name}")


def emit_held(tree: Path, out: Path) -> None:
    """Each hand-written test history, under the config its test judges it by."""
    import test_checker_cli as cli  # type: ignore[import-not-found]
    import test_checker_examples as examples  # type: ignore[import-not-found]
    import test_cycle_wr as wr  # type: ignore[import-not-found]
    import test_fault_plan as plan  # type: ignore[import-not-found]
    import test_seek_positions as seeks  # type: ignore[import-not-found]
    import test_txn_examples as txn  # type: ignore[import-not-found]
    from _txn_hand import config as txn_config  # type: ignore[import-not-found]

    builder = kit(tree, "builder")
    HistoryBuilder, history_lines = builder.HistoryBuilder, builder.history_lines

    def put(name: str, lines: list[str], config: dict[str, Any] | None) -> None:
        dest = out / name
        dest.mkdir(parents=True)
        (dest / "history.jsonl").write_text("".join(line + "\n" for line in lines))
        if config:
            (dest / "config.json").write_text(json.dumps(config))

    def built(*steps: Any) -> list[str]:
        b = HistoryBuilder()
        for step in steps:
            step(b)
        return b.lines()

    # The examples test judges every case under {} (the lines' own workload).
    for name, (fn, *_) in examples.CASES.items():
        put(f"examples.{name}", built(fn), None)
    for prefix, cases in (("txn", txn.CASES), ("seek", seeks.CASES)):
        for name, case in cases.items():
            put(f"{prefix}.{name}", built(case.build), txn_config(case.isolation))
    for name, ops in wr.HISTORIES.items():
        put(f"cycle_wr.{name}", history_lines(ops), wr.CONFIG)
        put(f"cycle_wr.{name}.no_ww", history_lines(ops), wr.NO_WW)
    put("cli.drained", built(cli._valid, cli._drained), None)
    put("cli.lost", built(cli._valid, cli._lost), None)
    put("cli.no_drain", built(cli._valid, lambda b: b.send(1, 9, 0, 4)), None)
    put("fault_plan.faults", built(plan._faults), None)


def write_histories(kinds: list[str], source: Tree, into: Path, args: argparse.Namespace) -> None:
    """Write every kind's histories into ``into`` by ``source``'s code, in a child process."""
    for kind in kinds:
        ops = int(args.txn_ops if kind == "txn" else args.ops)
        t0 = time.monotonic()
        proc = python(source, [__file__, "_emit", kind, str(source.path), str(into), str(ops),
                               str(args.seed), str(args.inject)])  # fmt: skip
        if proc.returncode:
            raise SystemExit(f"writing the {kind} histories failed:\n{proc.stderr[-3000:]}")
        print(f"# wrote the {kind} histories in {time.monotonic() - t0:.1f} s", flush=True)


def size(ops: int) -> str:
    """1000000 -> "1e6": the generated histories' names."""
    mantissa, exponent = f"{ops:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def count_ops(history: Path) -> int:
    with open(history, "rb") as fh:
        return sum(1 for _ in fh)


def main() -> int:
    if sys.argv[1:2] == ["_emit"]:
        kind, tree, out, ops, seed, inject = sys.argv[2:8]
        emit(kind, Path(tree), Path(out), int(ops), int(seed), int(inject))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", help="git revision, or WORKTREE")
    parser.add_argument("after", help="git revision, or WORKTREE")
    kinds = ["held", "evidence", "queue", "txn"]
    parser.add_argument("--histories", nargs="+", choices=kinds, default=kinds)
    parser.add_argument("--ops", type=float, default=1e6, help="queue history size")
    parser.add_argument("--txn-ops", type=float, default=1e6, help="txn history size")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--inject", type=int, default=5, help="cycles injected into the txn one")
    parser.add_argument("--cases-from", help="revision whose code writes the histories (AFTER)")
    parser.add_argument("--filter", default="", help="only histories whose name contains this")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per check")
    parser.add_argument("--max-lines", type=int, default=20, help="diff lines shown per history")
    parser.add_argument(
        "--batch", action="store_true", help="one process per side, not one per history"
    )
    parser.add_argument(
        "--after-remote",
        metavar="sc://HOST:PORT",
        help="AFTER checks on this Spark Connect server (bench/warm_engine.py starts one)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (outputs, trees)")
    parser.add_argument(
        "--record",
        action="store_true",
        help="AFTER checks from Parquet rows recorded as a run writes them, not from the JSON",
    )
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="kc-check-diff-"))
    try:
        before = export(args.before, work / "before")
        after = export(args.after, work / "after")
        after.record = args.record
        after.remote = args.after_remote
        source = after
        if args.cases_from:
            source = export(args.cases_from, work / "source")
        for side, tree in (("BEFORE", before), ("AFTER", after)):
            print(f"# {side} {tree.label}: python3 -m {tree.cli} check; checkers from "
                  f"{imports_own(tree)}", flush=True)  # fmt: skip
        print(f"# ignored: {', '.join(VOLATILE)}", flush=True)
        write_histories(args.histories, source, work / "histories", args)
        histories = [History(d.name, d) for d in sorted((work / "histories").iterdir())
                     if args.filter in d.name]  # fmt: skip
        return compare(before, after, histories, work, args)
    finally:
        if args.keep:
            print(f"# kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def compare(
    before: Tree, after: Tree, histories: list[History], work: Path, args: argparse.Namespace
) -> int:
    """Judge each history by both sides, print its line; 1 if any differ."""
    (work / "out").mkdir()
    width = max(len(h.name) for h in histories)
    print(f"{'history':{width}} {'ops':>9}  {'result':9} {'before s':>8} {'after s':>8}")
    t0, differ = time.monotonic(), 0
    if args.batch:
        batched = [check_batch(tree, histories, work / "runs", args.timeout)
                   for tree in (before, after)]  # fmt: skip
    for h in histories:
        if args.batch:
            a, b = batched[0][h.name], batched[1][h.name]
        else:
            a = check(before, h, work / "runs", args.timeout)
            b = check(after, h, work / "runs", args.timeout)
        na, nb = normalized(a.output), normalized(b.output)
        for side, out in (("before", a.output), ("after", b.output)):
            (work / "out" / f"{h.name}.{side}.json").write_text(json.dumps(out, indent=1))
        lines = list(differences(na, nb))
        differ += bool(lines)
        ops = a.output.get("ops", count_ops(h.dir / "history.jsonl"))
        result = "DIFFERENT" if lines else "identical"
        if "error" in na:
            result += f" (error {na['error']['exit']})"
        print(
            f"{h.name:{width}} {ops:>9}  {result:9} {a.seconds:8.1f} {b.seconds:8.1f}", flush=True
        )
        for line in lines[: args.max_lines]:
            print(f"    {line}")
        if len(lines) > args.max_lines:
            print(f"    ... {len(lines) - args.max_lines} more")
        if "error" in na or "error" in nb:
            print(f"    before: {na.get('error')}\n    after:  {nb.get('error')}")
    print(f"# {len(histories) - differ} identical, {differ} different, "
          f"{time.monotonic() - t0:.0f} s", flush=True)  # fmt: skip
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
