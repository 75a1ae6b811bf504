"""Where a real check's CPU goes: one `kafka-chaos check` with Spark's event log
on, then its stages by task time.

    python bench/check_stages.py HISTORY [--config CONFIG_JSON] [--top 15]

``bench/check_parts.py`` forces each table and check alone, which tells
what each costs but not what a real check pays: a real check plans every
check into one Spark job, and single-task stages overlap other work there.
This reads the job Spark actually ran.  It prints the Spark part's wall
time, the task time of all its stages together and what share of the
cores that kept busy (near 100 %: the check is bound by work, so only less
work makes it faster; far below: by stages that leave cores idle), then the
stages with the most task time, each with the operators it runs and the
cached tables (``checkers.tables``) it builds or reads.
Figures only; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timed_check import timed_check  # noqa: E402


@dataclass
class Stage:
    id: int
    tasks: int
    task_s: float  # executor run time of all its tasks
    start_ms: int
    end_ms: int
    output: str  # the operator whose rows the stage hands on (its last RDD's)
    operators: str  # how many of each operator it runs, most first
    cached: list[str]  # first plan lines of the cached tables it builds or reads

    @property
    def wall_s(self) -> float:
        return (self.end_ms - self.start_ms) / 1000


def stages(event_log: Path) -> list[Stage]:
    """Completed stages of an uncompressed event log, with their tasks' run time."""
    task_ms: dict[int, int] = {}
    done = []
    with event_log.open() as fh:
        for line in fh:
            event = json.loads(line)
            kind = event["Event"]
            if kind == "SparkListenerTaskEnd":
                metrics = event.get("Task Metrics") or {}
                sid = event["Stage ID"]
                task_ms[sid] = task_ms.get(sid, 0) + metrics.get("Executor Run Time", 0)
            elif kind == "SparkListenerStageCompleted":
                done.append(event["Stage Info"])
    out = []
    for info in done:
        if "Submission Time" not in info or "Completion Time" not in info:
            continue  # skipped: its output was already there
        rdds = sorted(info.get("RDD Info", []), key=lambda rdd: rdd["RDD ID"])
        scopes = [_scope(rdd) for rdd in rdds]
        counts = Counter(name for name in scopes if name)
        out.append(
            Stage(
                id=info["Stage ID"],
                tasks=info["Number of Tasks"],
                task_s=task_ms.get(info["Stage ID"], 0) / 1000,
                start_ms=info["Submission Time"],
                end_ms=info["Completion Time"],
                output=scopes[-1] if scopes else "",
                operators=", ".join(f"{name} x{n}" for name, n in counts.most_common()),
                cached=[
                    rdd["Name"].splitlines()[0]
                    for rdd in rdds
                    if rdd.get("Storage Level", {}).get("Use Memory")
                ],
            )
        )
    return out


@dataclass
class Job:
    id: int
    phase: str  # checkers.phases' label, without "kc:"; "" if none
    start_ms: int
    end_ms: int
    stage_ids: list[int]
    name: str = ""  # its call site ("localCheckpoint at tables.py:210"), from Spark's job name


def jobs(event_log: Path) -> tuple[list[Job], int | None, int | None]:
    """The finished jobs of an event log, and the application's start and end times."""
    started: dict[int, Job] = {}
    done: list[Job] = []
    app_start = app_end = None
    with event_log.open() as fh:
        for line in fh:
            event = json.loads(line)
            kind = event["Event"]
            if kind == "SparkListenerJobStart":
                label = (event.get("Properties") or {}).get("spark.job.description") or ""
                started[event["Job ID"]] = Job(
                    event["Job ID"],
                    label.removeprefix("kc:"),
                    event["Submission Time"],
                    event["Submission Time"],
                    event.get("Stage IDs", []),
                    _job_name(event),
                )
            elif kind == "SparkListenerJobEnd" and event["Job ID"] in started:
                job = started.pop(event["Job ID"])
                job.end_ms = event["Completion Time"]
                done.append(job)
            elif kind == "SparkListenerApplicationStart":
                app_start = event["Timestamp"]
            elif kind == "SparkListenerApplicationEnd":
                app_end = event["Timestamp"]
    return sorted(done, key=lambda j: j.start_ms), app_start, app_end


def by_phase(
    found_jobs: list[Job], found_stages: list[Stage]
) -> list[tuple[str, int, int, float, float]]:
    """Per phase, in order of first job: (phase, jobs, stages run, task s, wall s).

    A job's wall time runs from the previous job's end (the driver plans it in
    between) to its own end, so the phases' walls add up to the Spark part.
    """
    task = {s.id: s.task_s for s in found_stages}
    rows: dict[str, list] = {}
    previous_end = found_jobs[0].start_ms if found_jobs else 0
    for job in found_jobs:
        row = rows.setdefault(job.phase or "(none)", [0, 0, 0.0, 0.0])
        row[0] += 1
        ran = [sid for sid in job.stage_ids if sid in task]
        row[1] += len(ran)
        row[2] += sum(task[sid] for sid in ran)
        row[3] += max(job.end_ms - previous_end, 0) / 1000
        previous_end = max(previous_end, job.end_ms)
    return [(name, *values) for name, values in rows.items()]


def _job_name(event: dict) -> str:
    """A job's call site: its last stage's name (``collect at api.py:46``)."""
    infos = event.get("Stage Infos") or []
    return infos[-1].get("Stage Name", "") if infos else ""


def print_jobs(found_jobs: list[Job], found_stages: list[Stage]) -> None:
    """Every job in order: the driver's time before it (planning), its wall and task
    time, its stages run, its phase and call site.  Which action a job is, so a
    count of jobs says which of them a fused plan could save."""
    task = {s.id: s.task_s for s in found_stages}
    print(f"{'job':>4} {'gap s':>6} {'wall s':>6} {'task s':>6} {'stg':>3}  phase: call site")
    previous_end = found_jobs[0].start_ms if found_jobs else 0
    for job in found_jobs:
        ran = [sid for sid in job.stage_ids if sid in task]
        gap = max(job.start_ms - previous_end, 0) / 1000
        wall = (job.end_ms - job.start_ms) / 1000
        busy = sum(task[sid] for sid in ran)
        figures = f"{job.id:>4} {gap:>6.1f} {wall:>6.1f} {busy:>6.1f} {len(ran):>3}"
        print(f"{figures}  {job.phase}: {job.name}")
        previous_end = max(previous_end, job.end_ms)


def _scope(rdd: dict) -> str:
    """The Spark operator that made an RDD ("Exchange", "Window", ...)."""
    try:
        name = json.loads(rdd.get("Scope") or "{}").get("name", "")
    except json.JSONDecodeError:
        return ""
    return re.sub(r" \(\d+\)$", "", name.strip())  # "WholeStageCodegen (12)": one kind


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("history", type=Path)
    ap.add_argument("--config", type=Path)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--cached", type=int, default=3, help="cached tables named per stage")
    ap.add_argument("--jobs", action="store_true", help="also list every job in order")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kc-stages-") as tmp:
        conf = f"spark.eventLog.enabled=true,spark.eventLog.compress=false,spark.eventLog.dir=file://{tmp}"
        took, results = timed_check(args.history, spark_conf=conf, config=args.config)
        logs = [p for p in Path(tmp).rglob("events_*") if p.is_file() and p.stat().st_size]
        logs += [p for p in Path(tmp).glob("*") if p.is_file() and not p.name.startswith(".")]
        found = [s for log in logs for s in stages(log)]
        found_jobs, app_start, app_end = jobs(logs[0]) if logs else ([], None, None)
    if not found:
        raise SystemExit("no completed stage in the event log")
    cores = os.cpu_count() or 1
    wall = (max(s.end_ms for s in found) - min(s.start_ms for s in found)) / 1000
    busy = sum(s.task_s for s in found)
    print(f"check: {took:.1f} s in all, verdict {results['verdict']}")
    print(
        f"Spark: {wall:.1f} s from the first stage to the last, {len(found)} stages, "
        f"task time {busy:.1f} s: {100 * busy / (wall * cores):.0f} % of {cores} cores"
    )
    if found_jobs and app_start and app_end:
        first, last = found_jobs[0].start_ms, max(j.end_ms for j in found_jobs)
        print(
            f"session start to first job {(first - app_start) / 1000:.1f} s (rows read, "
            f"plans made), last job to session end {(app_end - last) / 1000:.1f} s"
        )
    print(f"{'phase':<24} {'jobs':>5} {'stages':>7} {'task s':>7} {'wall s':>7}")
    for name, n_jobs, n_stages, task_s, wall_s in by_phase(found_jobs, found):
        print(f"{name:<24} {n_jobs:>5} {n_stages:>7} {task_s:>7.1f} {wall_s:>7.1f}")
    if args.jobs:
        print_jobs(found_jobs, found)
    print(f"the {args.top} stages with the most task time:")
    for s in sorted(found, key=lambda s: -s.task_s)[: args.top]:
        print(f"{s.task_s:7.1f} s task {s.wall_s:7.1f} s wall {s.tasks:4d} tasks  stage {s.id}")
        print(f"      output {s.output}; operators: {s.operators}")
        for line in s.cached[: args.cached]:
            print(f"      cached: {line[:130]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
