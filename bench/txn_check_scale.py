"""How the checker scales on transactional histories: time `kafka-chaos check` on
1e6- and 1e7-op histories of the txn workload, with and without the
transactional checks, side by side.

    python bench/txn_check_scale.py [--sizes 1e6 1e7] [--mode mixed|ctp] [--dir /tmp/kc-txn-bench]

Histories come from ``checkers.synthetic_txn.write`` (a model of Kafka's
transactional log; valid), generated once and reused.  Each check runs in a
fresh process (JVM start included) from the Parquet cache, so the figures
are the checks' own cost; the first, conversion included, is printed too.
"Existing only" judges the same history under a config without the
transactional checks (``workload: queue``), so the ratio is what the
txn checks add.  The target is the queue checks': at most 60 s at 1e7.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from checkers.synthetic_txn import Shape, config, write

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_scale import timed_check  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e6, 1e7])
    parser.add_argument("--mode", choices=["mixed", "ctp"], default="mixed")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/kc-txn-bench"))
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    shape = Shape(mode=args.mode, crash_p=0.001, rebalance_p=0.001)
    txn_config = {**config(shape), "checker": {"examples": 5}}
    queue_config = {**txn_config, "workload": "queue"}
    configs = {}
    for name, cfg in (("txn", txn_config), ("queue", queue_config)):
        configs[name] = args.dir / f"config-{args.mode}-{name}.json"
        configs[name].write_text(json.dumps(cfg))
    print(
        f"{'ops':>10} {'gen s':>7} {'first s':>8} {'all checks s':>13} "
        f"{'existing only s':>16} {'ratio':>6}  verdict"
    )
    for size in args.sizes:
        history = args.dir / f"txn-{args.mode}-{size:.0e}.jsonl".replace("+", "")
        t0 = time.monotonic()
        if not history.exists():
            write(history, int(size), seed=1, shape=shape)
        gen = time.monotonic() - t0
        shutil.rmtree(history.with_suffix(".parquet"), ignore_errors=True)
        first, _ = timed_check(history, config=configs["txn"])
        full, res = timed_check(history, config=configs["txn"])
        existing, _ = timed_check(history, config=configs["queue"])
        ops = res["ops"]
        bad = {k: v["count"] for k, v in res["checks"].items() if v["count"]}
        print(
            f"{ops:>10} {gen:>7.1f} {first:>8.1f} {full:>13.1f} {existing:>16.1f} "
            f"{full / existing:>6.2f}  {res['verdict']} {bad or ''}",
            flush=True,
        )


if __name__ == "__main__":
    main()
