"""``kafka-chaos shrink RUN_DIR``: cut a failing run down to a minimal reproduction.

The anomaly to keep is the run's error-severity checks that found something,
or, when it found none, its warning-severity ones (a loss the run's settings
allow, such as unclean leader election's, is a warning and still worth a
shorter reproduction); ``--anomaly NAME`` picks one.  Each candidate is a real run on the run's
cluster (``run --replay`` of the candidate's recipe), named ``NAME-shrink``.
The search's log is saved after every step as ``shrink.json`` in RUN_DIR, so
a second ``shrink RUN_DIR`` resumes where the first stopped; at the end it is
copied into the smallest failing run's directory, beside its report.  SIGTERM
or Ctrl-C stops the search after the run in progress heals, and keeps what it
has.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka_chaos.child_run import needs_own_process, run_in_child
from kafka_chaos.engine import shared_engine
from kafka_chaos.harness import store as store_mod
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.rates import rate_text
from kafka_chaos.options import add_debug_options, build_spec, debug_overrides
from kafka_chaos.reports.index import write_index
from kafka_chaos.reports.render import write_report
from kafka_chaos.run import run_test
from kafka_chaos.shrink.recipe import CUT_KINDS, Recipe
from kafka_chaos.shrink.search import Budget, RunOnce, Search

LOG = "shrink.json"


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "shrink",
        help="cut a failing run down to a minimal reproduction",
        description="Re-run smaller versions of RUN_DIR (fewer faults, a shorter run, less "
        "load), keeping each that still shows the anomaly in K of N runs.",
    )
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    p.add_argument(
        "--anomaly",
        help="the check to keep finding, a warning too (default: the errors found, else the "
        "warnings)",
    )
    p.add_argument("--repeat", type=int, default=3, help="N: runs per candidate (default 3)")
    p.add_argument("--k", type=int, default=1, help="K: failing runs that make it fail")
    p.add_argument("--budget", default="2h", help="wall time, e.g. 90m, 2h (default 2h)")
    p.add_argument("--max-runs", type=int, default=200, help="runs at most (default 200)")
    p.add_argument(
        "--confirm",
        type=int,
        default=3,
        metavar="M",
        help="re-run the result M more times for its reproduction rate (default 3)",
    )
    p.add_argument(
        "--cuts",
        default=",".join(CUT_KINDS),
        help=f"the kinds of cut to try, of {','.join(CUT_KINDS)} (default: all, in that order)",
    )
    p.add_argument("--store", type=Path, default=store_mod.DEFAULT_STORE)
    p.add_argument(
        "--cluster-name",
        help="run the candidates on this cluster, not the run's own (brought up if absent)",
    )
    add_debug_options(p)
    p.set_defaults(handler=_shrink)


def parse_budget(text: str) -> float:
    """``90m``, ``2h``, ``45s`` or plain seconds, as seconds."""
    units = {"s": 1, "m": 60, "h": 3600}
    number, unit = (text[:-1], text[-1]) if text and text[-1] in units else (text, "s")
    try:
        seconds = float(number) * units[unit]
    except ValueError:
        raise ConfigError(f"--budget: {text!r} is not a duration like 90m or 2h") from None
    if seconds <= 0:
        raise ConfigError("--budget must be positive")
    return seconds


def parse_cuts(text: str) -> tuple[str, ...]:
    """``faults,time`` as the cut families to try; an unknown one is a one-line error."""
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in CUT_KINDS]
    if unknown or not kinds:
        raise ConfigError(f"--cuts: {text!r}; known: {', '.join(CUT_KINDS)}")
    return kinds


def anomalies(results: dict[str, Any], errors_only: bool = True) -> set[str]:
    """The checks that found something: of error severity, or of any."""
    return {
        name
        for name, c in results.get("checks", {}).items()
        if c.get("count", 0) > 0 and (c.get("severity") == "error" or not errors_only)
    }


def default_anomalies(results: dict[str, Any]) -> set[str]:
    """What a shrink (or a reproduction) keeps by default: the errors found, else the
    warnings found.  Info findings are legal by every source, never a failure."""
    errors = anomalies(results)
    if errors:
        return errors
    return {
        name
        for name, c in results.get("checks", {}).items()
        if c.get("count", 0) > 0 and c.get("severity") == "warning"
    }


def _shrink(args: argparse.Namespace) -> int:
    run = store_mod.resolve_run_dir(args.run_dir)
    config = run.read_json(store_mod.CONFIG)
    schedule = run.read_json(store_mod.SCHEDULE)
    results = run.read_json(store_mod.RESULTS)
    # By default the errors, else the warnings; --anomaly may name any finding.
    found = anomalies(results, errors_only=False) if args.anomaly else default_anomalies(results)
    keep = {args.anomaly} if args.anomaly else found
    if not keep or not keep <= found:
        wanted = f"anomaly {args.anomaly!r}" if args.anomaly else "error or warning"
        raise ConfigError(
            f"{run.path}: no {wanted} to keep (found: {', '.join(sorted(found)) or 'none'})"
        )
    if not args.anomaly and not anomalies(results):
        print(f"no error found: keeping the run's warnings ({', '.join(sorted(keep))}); "
              "--anomaly NAME keeps one", flush=True)  # fmt: skip
    options = build_spec(config, debug_overrides(args)).to_dict()
    if args.cluster_name:
        options["cluster"]["name"] = args.cluster_name
    name = f"{options['name']}-shrink"
    start = Recipe.of(options, schedule.get("ops", []))
    log_path = run.file(LOG)
    search = (
        Search.resume(start, json.loads(log_path.read_text()))
        if log_path.exists()
        else Search(start, k=args.k, n=args.repeat, kinds=parse_cuts(args.cuts))
    )
    stopping = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stopping.set()) for s in _SIGNALS}

    def run_once(recipe: Recipe) -> tuple[bool, str]:
        spec = build_spec(recipe.options, {"name": name})
        outcome = (
            run_in_child(spec, args.store)
            if needs_own_process(spec)
            else run_test(spec, args.store)
        )
        if outcome.interrupted:
            stopping.set()
            return False, str(outcome.run_dir.path)
        got = anomalies(outcome.run_dir.read_json(store_mod.RESULTS), errors_only=False)
        failed = bool(got & keep)
        print(f"  run {outcome.run_dir.path}: {'FAILS' if failed else 'passes'}", flush=True)
        return failed, str(outcome.run_dir.path)

    announced: set[tuple[int, bool]] = set()

    kept_confirm = json.loads(log_path.read_text()).get("confirm") if log_path.exists() else None

    def save(s: Search) -> None:
        saved = {**s.to_dict(), "anomaly": sorted(keep), "source": str(run.path)}
        if kept_confirm:  # a resumed search keeps the confirming runs it had
            saved["confirm"] = kept_confirm
        log_path.write_text(json.dumps(saved, indent=1))
        last = s.log[-1] if s.log else None
        if last is not None and last.complete and (len(s.log), last.kept) not in announced:
            announced.add((len(s.log), last.kept))
            mark = "kept" if last.kept else ("fails" if last.failing else "passes")
            print(f"{mark}: {last.what} ({sum(r['failed'] for r in last.runs)} of "
                  f"{len(last.runs)} runs failed)", flush=True)  # fmt: skip

    try:
        with shared_engine():  # every candidate's check on one warm Spark
            result = search.run(
                run_once,
                Budget(runs=args.max_runs, seconds=parse_budget(args.budget)),
                on_step=save,
                stop=stopping.is_set,
            )
            save(search)
            confirm = _confirm(result, run_once, args.confirm, stopping.is_set, log_path)
    finally:  # SIGTERM stops the confirming runs cleanly too
        for s, handler in previous.items():
            signal.signal(s, handler)
    shrunk = _shrunk_run(search)
    if shrunk is not None:
        _publish(shrunk, log_path)
    print(_summary(search, start, result, shrunk, confirm))
    return 0


def _confirm(
    result: Recipe,
    run_once: RunOnce,
    times: int,
    stopping: Callable[[], bool],
    log_path: Path,
) -> list[dict[str, Any]]:
    """Re-run the result ``times`` times, apart from the search, for an unbiased rate.

    The search stops judging a candidate at its first failure, so the kept
    candidate's own runs overstate how often it fails.  These runs are saved
    in the log as ``confirm`` and, for the same result, not run again.
    """
    saved = json.loads(log_path.read_text())
    previous = saved.get("confirm") or {}
    runs = list(previous.get("runs", [])) if previous.get("key") == result.key() else []
    while len(runs) < times and not stopping():
        failed, where = run_once(result)
        runs.append({"failed": failed, "run": where})
        saved["confirm"] = {"key": result.key(), "runs": runs}
        log_path.write_text(json.dumps(saved, indent=1))
    return runs


_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _shrunk_run(search: Search) -> Path | None:
    """The smallest failing run: the last failing run of the last kept candidate."""
    kept = [j for j in search.log if j.kept]
    failing = [r for r in kept[-1].runs if r["failed"]] if kept else []
    return Path(failing[-1]["run"]) if failing else None


def _publish(shrunk: Path, log_path: Path) -> None:
    """Put the log beside the shrunk run's report, and re-render it and the index."""
    shutil.copy(log_path, shrunk / LOG)
    write_report(shrunk)  # now with what was cut, from what
    write_index(shrunk.parents[1])


def _summary(
    search: Search,
    start: Recipe,
    result: Recipe,
    shrunk: Path | None,
    confirm: list[dict[str, Any]],
) -> str:
    """What was cut, from what, and the result's failing runs, with a rate."""
    kept = [j for j in search.log if j.kept]
    lines = [f"shrink: {search.stop_reason}; {sum(len(j.runs) for j in search.log)} runs"]
    lines.append(f"from {start.size()} to {result.size()}")
    for j in kept:
        lines.append(f"  cut: {j.what}")
    if kept and shrunk is not None:
        last = kept[-1]
        hits = sum(r["failed"] for r in last.runs)
        lines.append(f"failed {hits} of {len(last.runs)} runs while the search judged it")
        lines.append(f"shrunk run: {shrunk} (replay: kafka-chaos run --replay {shrunk})")
    else:
        lines.append("no smaller recipe failed: the run is its own minimal reproduction")
    if confirm:
        hits = sum(r["failed"] for r in confirm)
        lines.append(f"reproduces {rate_text(hits, len(confirm))} (confirming runs)")
    return "\n".join(lines)
