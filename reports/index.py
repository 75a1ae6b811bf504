"""The store index: every run with its verdict, newest first, plus per-scenario trends.

It reads only each run's config.json and results.json (never histories), so a
nightly store with hundreds of runs indexes in well under a second per run.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from kafka_chaos.reports import svg
from kafka_chaos.reports.render import (
    ReportError,
    as_dict,
    expectation,
    headline,
    load_json,
    stylesheet,
    verdict_of,
    write_atomic,
)
from kafka_chaos.reports.shrink_view import shrink_view
from kafka_chaos.reports.templating import environment

RUN_MARKERS = ("config.json", "results.json", "history.jsonl")
STAMP = "%Y%m%dT%H%M%SZ"
TREND_RUNS = 30  # newest runs per scenario shown in the trend


@dataclass
class RunEntry:
    test: str
    stamp: str
    when: dt.datetime
    href: str
    has_report: bool
    verdict: str
    verdict_reason: str
    head: dict[str, Any]
    expectation: dict[str, Any] | None
    anomalies: dict[str, int] = field(default_factory=dict)  # check -> count, count > 0 only
    error_checks: set[str] = field(default_factory=set)  # anomalous checks of error severity
    summary: dict[str, Any] = field(default_factory=dict)  # results.json's answer (acked, lost)
    shrink: dict[str, Any] | None = None  # the shrink this run is the result of (shrink.json)

    @property
    def total(self) -> int:
        return sum(self.anomalies.values())


def run_time(run_dir: Path, config: dict[str, Any]) -> dt.datetime:
    """The run's start: directory name, else config started_at, else mtime."""
    try:
        return dt.datetime.strptime(run_dir.name, STAMP).replace(tzinfo=dt.UTC)
    except ValueError:
        pass
    started = config.get("started_at")
    if isinstance(started, str):
        try:
            parsed = dt.datetime.fromisoformat(started.replace("Z", "+00:00"))
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
        except ValueError:
            pass
    return dt.datetime.fromtimestamp(run_dir.stat().st_mtime, dt.UTC)


def read_run(store_dir: Path, run_dir: Path) -> RunEntry:
    config_in, results_in = load_json(run_dir / "config.json"), load_json(run_dir / "results.json")
    config, results = as_dict(config_in.data), as_dict(results_in.data)
    verdict, reason = verdict_of(results_in)
    entry = RunEntry(
        test=run_dir.parent.name,
        stamp=run_dir.name,
        when=run_time(run_dir, config),
        href=quote((run_dir / "report.html").relative_to(store_dir).as_posix()),
        has_report=(run_dir / "report.html").is_file(),
        verdict=verdict,
        verdict_reason=reason,
        head=headline(config),
        expectation=expectation(config, verdict),
        summary=as_dict(results.get("summary")),
        shrink=shrink_view(run_dir, base=store_dir),
    )
    for name, check in as_dict(results.get("checks")).items():
        count = as_dict(check).get("count")
        if isinstance(count, int) and count > 0:
            entry.anomalies[name] = count
            if as_dict(check).get("severity", "error") == "error":
                entry.error_checks.add(name)
    return entry


def scan_store(store_dir: Path) -> list[RunEntry]:
    """Runs under ``store/<test>/<timestamp>/``, newest first; symlinks (latest) skipped."""
    runs = []
    for test_dir in sorted(p for p in store_dir.iterdir() if p.is_dir() and not p.is_symlink()):
        for run_dir in test_dir.iterdir():
            if run_dir.is_symlink() or not run_dir.is_dir():
                continue
            if any((run_dir / m).exists() for m in RUN_MARKERS):
                runs.append(read_run(store_dir, run_dir))
    runs.sort(key=lambda r: (r.when, r.test, r.stamp), reverse=True)
    return runs


def runs_by_test(runs: list[RunEntry]) -> dict[str, list[RunEntry]]:
    """Runs grouped by test name, each group in the order given (newest first)."""
    by_test: dict[str, list[RunEntry]] = defaultdict(list)
    for r in runs:
        by_test[r.test].append(r)
    return by_test


def verdict_counts(runs: list[RunEntry]) -> dict[str, int]:
    return {v: sum(1 for r in runs if r.verdict == v) for v in ("valid", "invalid", "unknown")}


def trends(runs: list[RunEntry]) -> list[dict[str, Any]]:
    """Per test name: its newest runs oldest-first with anomaly counts per check."""
    by_test = runs_by_test(runs)
    out = []
    for test in sorted(by_test):
        series = list(reversed(by_test[test][:TREND_RUNS]))
        checks = sorted({c for r in series for c in r.anomalies})
        out.append(
            {
                "test": test,
                "runs": series,
                "checks": checks,
                "spark": svg.sparkline(
                    [float(r.total) for r in series], title=f"anomalies per run of {test}"
                ),
                "invalid": sum(1 for r in series if r.verdict == "invalid"),
            }
        )
    return out


def side_by_side(runs: list[RunEntry]) -> list[dict[str, Any]]:
    """One row per test, its newest run first: a suite's cells (versions, modes,
    consumer protocols) compared at a glance, with how its earlier runs ended."""
    rows = [
        {"test": test, "latest": series[0], "verdicts": verdict_counts(series)}
        for test, series in runs_by_test(runs).items()
    ]
    return sorted(rows, key=lambda row: (row["latest"].head["kafka"], row["latest"].head["mode"],
                                         row["test"]))  # fmt: skip


def write_index(store_dir: Path) -> Path:
    """Write ``store_dir/index.html`` listing every run; return its path."""
    store_dir = Path(store_dir)
    if not store_dir.is_dir():
        raise ReportError(f"{store_dir}: not a run store (no such directory)")
    runs = scan_store(store_dir)
    counts = verdict_counts(runs)
    html = (
        environment()
        .get_template("index.j2")
        .render(
            runs=runs,
            counts=counts,
            trends=trends(runs),
            cells=side_by_side(runs),
            store=str(store_dir),
            css=stylesheet(),
            generated_at=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        )
    )
    out = store_dir / "index.html"
    write_atomic(out, html)
    return out
