"""How the checkers scale: time `kafka-chaos check` on 1e5, 1e6 and 1e7-op histories,
then run one check on a standalone Spark cluster (master + worker on 127.0.0.1).

    python bench/check_scale.py [--sizes 1e5 1e6 1e7] [--dir /tmp/kc-bench] [--no-standalone]

Each size is checked in a fresh `kafka-chaos check` process (JVM start
included), from JSONL (Parquet conversion included) and then again from the
Parquet cache.  Histories are generated once and reused.  Each size is also
judged by DuckDB (bench/check_reference.py, when ``.[bench]`` is installed)
on the same file in the same run: its time, the cold check's ratio to it, and
whether the four core queue checks' counts agree.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyspark

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # testkit is not installed
from testkit.synthetic import generate  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_reference import agreement, duckdb_counts, read_committed_of  # noqa: E402
from timed_check import timed_check  # noqa: E402

HERE = Path(__file__).resolve().parent


def scale(sizes: list[float], where: Path) -> None:
    where.mkdir(parents=True, exist_ok=True)
    previous = None
    print(
        f"{'ops':>10} {'from jsonl s':>13} {'ops/s':>12} {'parquet s':>10} {'growth':>8} "
        f"{'duckdb s':>9} {'cold/duckdb':>11}  verdict; the four core checks"
    )
    for size in sizes:
        history = where / f"h{size:.0e}.jsonl".replace("+", "")
        if not history.exists():
            generate(int(size), history)
        shutil.rmtree(history.with_suffix(".parquet"), ignore_errors=True)
        cold, results = timed_check(history)
        warm, _ = timed_check(history)
        growth = f"{cold / previous:.2f}x" if previous else "-"
        previous = cold
        ops = results["ops"]
        duck_s, agreed = reference(history, results)
        ratio = f"{cold / duck_s:.1f}x" if duck_s else "-"
        print(
            f"{ops:>10} {cold:>13.1f} {ops / cold:>12,.0f} {warm:>10.1f} {growth:>8} "
            f"{duck_s or float('nan'):>9.1f} {ratio:>11}  {results['verdict']}; {agreed}",
            flush=True,
        )


def reference(history: Path, results: dict) -> tuple[float | None, str]:
    """DuckDB's seconds on ``history`` and whether its counts agree with ``results``."""
    try:
        took, counts = duckdb_counts(history, read_committed_of(None))
    except ImportError:
        return None, "no DuckDB reference (pip install -e '.[bench]')"
    return took, agreement(results, counts)[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            s.settimeout(1)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(1)
    raise SystemExit(f"Spark master did not listen on 127.0.0.1:{port} within {timeout}s")


def standalone(history: Path) -> None:
    """Start a master and one worker bound to 127.0.0.1, check once, stop both."""
    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    work = Path(tempfile.mkdtemp(prefix="kc-spark-"))
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_WORKER_DIR": str(work / "work")}
    port, ui, wui = _free_port(), _free_port(), _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    started: list[subprocess.Popen] = []
    try:
        for args in (
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(ui),
            ],
            [
                "org.apache.spark.deploy.worker.Worker",
                master_url,
                "--host",
                "127.0.0.1",
                "--cores",
                "2",
                "--memory",
                "2g",
                "--webui-port",
                str(wui),
            ],
        ):
            log = open(work / f"{args[0].rsplit('.', 1)[1]}.log", "w")  # noqa: SIM115
            started.append(
                subprocess.Popen([str(spark_class), *args], env=env, stdout=log, stderr=log)
            )
            if len(started) == 1:
                _wait_port(port)
        print(f"standalone master {master_url} (pid {started[0].pid}), worker pid {started[1].pid}")
        took, results = timed_check(history, master_url)
        counts = {k: v["count"] for k, v in results["checks"].items() if v["count"]}
        print(
            f"standalone check of {results['ops']} ops: {took:.1f} s, verdict "
            f"{results['verdict']}, anomalies {counts or 'none'}"
        )
    finally:
        for proc in reversed(started):  # only the processes this script started, by handle
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e5, 1e6, 1e7])
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "kc-bench")
    parser.add_argument("--no-standalone", action="store_true")
    args = parser.parse_args()
    os.chdir(HERE.parent)
    scale(args.sizes, args.dir)
    if not args.no_standalone:
        smallest = args.dir / f"h{min(args.sizes):.0e}.jsonl".replace("+", "")
        standalone(smallest)


if __name__ == "__main__":
    main()
