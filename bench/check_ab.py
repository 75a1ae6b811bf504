"""Side by side: time `kafka-chaos check` on one history under Spark setting variants,
alternating the variants round by round so that machine noise hits them alike.

    python bench/check_ab.py /tmp/kc-bench/h1e07.jsonl "" "spark.sql.shuffle.partitions=2"
    python bench/check_ab.py HISTORY "" "spark.driver.extraJavaOptions=..." --rounds 3 --cold

A variant is a KC_SPARK_CONF value ("key=value,...", see checkers/session.py);
"" is the defaults.  --cold removes the Parquet cache before every run, so
the conversion is timed too; --config judges under that run config;
--threads prints the JVM's CPU by thread kind too (tasks, the JIT compilers,
the collector, the driver's planning: bench/timed_check.py), which tells a
setting that saves work from one that moves it.  Prints
every run (and whether its output is the first variant's, by
bench/check_diff.py's rule), then each variant's mean and its ratio to the
first variant's.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_diff import differences, normalized  # noqa: E402
from timed_check import measured_check  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("history", type=Path)
    parser.add_argument("variants", nargs="+", help='KC_SPARK_CONF values; "" = defaults')
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cold", action="store_true", help="convert afresh every run")
    parser.add_argument("--config", type=Path, help="the run config to judge under")
    parser.add_argument(
        "--threads", action="store_true", help="also each run's JVM CPU by thread kind"
    )
    args = parser.parse_args()
    times: dict[str, list[float]] = {v: [] for v in args.variants}
    cpus: dict[str, list[float]] = {v: [] for v in args.variants}
    first: dict | None = None  # the first run's output, the one every other must equal
    for round_ in range(1, args.rounds + 1):
        for variant in args.variants:
            if args.cold:
                shutil.rmtree(args.history.with_suffix(".parquet"), ignore_errors=True)
            done = measured_check(args.history, spark_conf=variant, config=args.config)
            took, results = done.seconds, done.results
            times[variant].append(took)
            cpus[variant].append(done.jvm_cpu_s)
            first = first if first is not None else normalized(results)
            same = not any(differences(first, normalized(results)))
            print(f"round {round_} {took:7.1f} s  JVM {done.jvm_cpu_s:6.1f} CPU-s  "
                  f"{results['verdict']:8} "
                  f"{'same' if same else 'DIFFERENT'} [{variant}]", flush=True)  # fmt: skip
            if args.threads:
                kinds = sorted(done.by_thread.items(), key=lambda kv: -kv[1])
                print("        " + ", ".join(f"{k} {v:.1f}" for k, v in kinds), flush=True)
    base = statistics.mean(times[args.variants[0]])
    base_cpu = statistics.mean(cpus[args.variants[0]]) or 1.0
    for variant, runs in times.items():
        mean, cpu = statistics.mean(runs), statistics.mean(cpus[variant])
        print(f"mean {mean:7.1f} s  {mean / base:5.2f}x  JVM {cpu:6.1f} CPU-s  "
              f"{cpu / base_cpu:5.2f}x  [{variant}]")  # fmt: skip


if __name__ == "__main__":
    main()
