"""Parquet while recording (issue 46): what it costs the recorder, what it saves the check.

    python bench/recorded_parquet.py [--ops 120000] [--record-ops 1000000] [--reps 3]
                                     [--burst 8] [--paced-s 10] [--no-check]

Writes synthetic histories (testkit/synthetic.py; ``--ops``: the default
run's size) and prints, side by side in one run, alternating the variants
each repetition:

* recording: the lines/s a HistoryWriter sustains replaying ``--record-ops``
  lines as fast as it can in bursts of ``--burst`` (one ``append_encoded``
  each), without and with the RowsRecorder (checkers/ingest/recorded_rows.py), the
  time until the recorder's last rows are in place after ``close``, and the
  process's CPU seconds (wall times drift with the machine's load; CPU
  seconds much less); and that time after ``--paced-s`` seconds at the
  default run's pace (2,000 lines/s), as at the end of a run;
* the rows: ``checkers.ingest.load.rows_cache`` on the history without rows (the
  JSON parsed, as before) and with the recorded rows (only validated);
* the check: ``kafka-chaos check HISTORY --json`` in a fresh process (Spark
  starts cold each time), from the JSON and from the recorded rows, with the
  same output required.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]  # testkit, check_diff are not installed
from check_diff import normalized  # noqa: E402
from kafka_chaos.checkers.ingest import load  # noqa: E402
from kafka_chaos.checkers.ingest.recorded_rows import RowsRecorder  # noqa: E402
from kafka_chaos.harness.history import HistoryWriter  # noqa: E402

from testkit.synthetic import generate  # noqa: E402


def tails(source: Path) -> list[bytes]:
    """The lines without ``{"index":N,"time":T,``: what the workloads hand the writer."""
    out = []
    for line in source.read_bytes().splitlines():
        op = orjson.loads(line)
        del op["index"], op["time"]
        out.append(orjson.dumps(op, option=orjson.OPT_APPEND_NEWLINE)[1:])
    return out


def record(path: Path, lines: list[bytes], burst: int, mirror: bool) -> tuple[float, float, float]:
    """(wall seconds writing every line, wall seconds until the rows were in
    place after ``close``, CPU seconds of the process for both) for one recording."""
    path.unlink(missing_ok=True)
    shutil.rmtree(path.with_suffix(".parquet"), ignore_errors=True)
    recorder = RowsRecorder(path) if mirror else None
    writer = HistoryWriter(path, mirror=recorder)
    cpu, t0 = time.process_time(), time.perf_counter()
    for at in range(0, len(lines), burst):
        writer.append_encoded(lines[at : at + burst])
    t1 = time.perf_counter()
    writer.close()
    if recorder is not None:
        recorder.wait()
    return t1 - t0, time.perf_counter() - t1, time.process_time() - cpu


def paced(path: Path, lines: list[bytes], seconds: float, rate: float = 2000) -> float:
    """Seconds from ``close`` until the rows are in place, after ``seconds`` of
    lines at ``rate`` lines/s (what a run's check may wait for)."""
    path.unlink(missing_ok=True)
    recorder = RowsRecorder(path)
    writer = HistoryWriter(path, mirror=recorder)
    start, burst = time.perf_counter(), 20
    for i, at in enumerate(range(0, min(len(lines), int(seconds * rate)), burst)):
        writer.append_encoded(lines[at : at + burst])
        time.sleep(max(0.0, start + (i + 1) * burst / rate - time.perf_counter()))
    t0 = time.perf_counter()
    writer.close()
    recorder.wait()
    return time.perf_counter() - t0


def check(history: Path) -> tuple[float, dict]:
    """Wall seconds and output of ``kafka-chaos check HISTORY --json`` in a fresh process."""
    env = {**os.environ, "KC_EXTRA_MAVEN_REPOS": "file:///work/shared/maven"}
    argv = [sys.executable, "-m", "kafka_chaos.cli", "check", str(history), "--json"]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=env)
    took = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"check failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return took, json.loads(proc.stdout[proc.stdout.index("{") :])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", type=int, default=120_000, help="the checked history's size")
    p.add_argument("--record-ops", type=float, default=1e6, help="lines replayed for lines/s")
    p.add_argument("--paced-s", type=float, default=10, help="seconds of paced recording")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--burst", type=int, default=8, help="lines per append_encoded")
    p.add_argument("--no-check", action="store_true", help="skip the Spark checks")
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kc-recorded-parquet-"))
    try:
        history = work / "history.jsonl"
        generate(int(a.record_ops), work / "big.jsonl", 2)
        big = tails(work / "big.jsonl")
        (work / "big.jsonl").unlink()
        mb = sum(map(len, big)) / 1e6
        print(f"# recording {len(big)} lines (~{mb:.0f} MB), bursts of {a.burst}, {a.reps} reps")
        rec: dict[str, list[tuple[float, float, float]]] = {"json only": [], "json + parquet": []}
        for _ in range(a.reps):
            for name, mirror in (("json only", False), ("json + parquet", True)):
                rec[name].append(record(history, big, a.burst, mirror))
        print("recording          lines/s (median)  writing s  rows done s  CPU s  lines/CPU-s")
        for name, runs in rec.items():
            write_s, done_s, cpu_s = (statistics.median(r[i] for r in runs) for i in range(3))
            print(f"  {name:16} {len(big) / write_s:15,.0f}  {write_s:9.2f}  {done_s:11.2f}"
                  f"  {cpu_s:5.2f}  {len(big) / cpu_s:11,.0f}")  # fmt: skip
        base = statistics.median(r[0] for r in rec["json only"])
        ratio = statistics.median(r[0] for r in rec["json + parquet"]) / base
        print(f"  writing time with the Parquet writer / without: {ratio:.2f}x")
        if a.paced_s:
            waited = paced(history, big, a.paced_s)
            print(f"  rows in place {waited:.2f} s after close, {a.paced_s:.0f} s at 2,000 lines/s")
        del big

        n = generate(a.ops, work / "source.jsonl", 1)
        lines = tails(work / "source.jsonl")
        print(f"# checked history: {n} lines")

        parquet = history.with_suffix(".parquet")
        record(history, lines, a.burst, True)
        recorded = work / "recorded.parquet"
        shutil.copytree(parquet, recorded)
        rows: dict[str, list[float]] = {"from JSON": [], "from recorded Parquet": []}
        for _ in range(a.reps):
            for name in rows:
                shutil.rmtree(parquet, ignore_errors=True)
                if name == "from recorded Parquet":
                    shutil.copytree(recorded, parquet)
                t0 = time.perf_counter()
                load.rows_cache(history)
                rows[name].append(time.perf_counter() - t0)
        print("rows for the check (load.rows_cache)   median s")
        for name, times in rows.items():
            print(f"  {name:34}  {statistics.median(times):8.3f}")

        if a.no_check:
            return
        checks: dict[str, list[float]] = {"from JSON": [], "from recorded Parquet": []}
        outputs = {}
        for _ in range(a.reps):
            for name in checks:
                shutil.rmtree(parquet, ignore_errors=True)
                if name == "from recorded Parquet":
                    shutil.copytree(recorded, parquet)
                took, out = check(history)
                checks[name].append(took)
                outputs[name] = normalized(out)  # without the search's wall times
        print("kafka-chaos check, fresh process    median s   runs")
        for name, times in checks.items():
            runs = " ".join(f"{t:.1f}" for t in times)
            print(f"  {name:32}  {statistics.median(times):8.1f}   {runs}")
        same = outputs["from JSON"] == outputs["from recorded Parquet"]
        print(f"  same output: {same}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
