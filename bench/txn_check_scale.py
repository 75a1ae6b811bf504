"""How the checker scales on transactional histories: time `kafka-chaos check` on
1e5- to 1e7-op histories of the txn workload, with and without the
transactional and cycle checks, side by side.

    python bench/txn_check_scale.py [--sizes 1e5 1e6 1e7] [--mode mixed|ctp] [--inject 5]
                                    [--dir /tmp/kc-txn-bench]

Histories come from ``testkit.synthetic_txn.write`` (a model of Kafka's
transactional log; valid), generated once and reused.  Each check runs in a
fresh process (JVM start included) from the Parquet cache, so the figures
are the checks' own cost; the first, conversion included, is printed too.
"No cycles" turns the cycle search off (``checker.cycles: false``) and
"existing only" also the transactional checks (``workload: queue``), so
the differences are what each adds.  Targets: at most 60 s at 1e7 for the
transactional checks (the queue checks' target), and the cycle checks
adding at most 30 s at 1e6.

``--inject N`` writes, into each history, N cycles that Elle must report
(a committed transaction made to read a value of one that began only after
it committed: wr against realtime order, a G1c-realtime); the last column
says how many of them a reported cycle contains, in a run without ww
edges (G1c is then an error, and no G0 hides it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkers, run from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parent))
from timed_check import timed_check  # noqa: E402

from testkit.reference_txn import completions  # noqa: E402
from testkit.synthetic_txn import Shape, config, write  # noqa: E402


def inject_cycles(history: Path, n: int, seed: int = 1) -> list[tuple[int, int]]:
    """Rewrite ``history`` with ``n`` backward reads; returns (reader, writer)
    completion indices.  Two passes over the file, the second rewriting only
    the chosen readers' lines."""
    import bisect
    import random

    heads = []  # the small transaction lines only: invokes and committed completions
    with open(history, "rb") as fh:
        for line in fh:
            if b'"f":"txn"' in line and (b'"type":"invoke"' in line or b'"type":"ok"' in line):
                heads.append(json.loads(line))
    done = [(txn, line) for txn, line in completions(heads) if line["type"] == "ok"]
    invoked = {op["index"]: op["time"] for op in heads if op["type"] == "invoke"}
    done.sort(key=lambda d: invoked[d[0]])
    starts = [invoked[t] for t, _ in done]
    rnd = random.Random(seed)
    readers = [d for d in done if any(m["f"] == "poll" for m in d[1]["value"]["ops"])]
    chosen: dict[int, dict] = {}
    pairs = []
    for _, line in rnd.sample(readers, min(len(readers), 20 * n)):
        # The first committed writer invoked after the reader committed: the
        # cycle then spans only the transactions in between (realtime order).
        start = bisect.bisect_right(starts, line["time"])
        later = (
            l2 for _, l2 in done[start:]
            if any(m["f"] == "send" and m.get("offset") is not None for m in l2["value"]["ops"])
        )  # fmt: skip
        l2 = next(later, None)
        if l2 is None or line["index"] in chosen:
            continue
        m = next(m for m in l2["value"]["ops"] if m["f"] == "send" and m.get("offset") is not None)
        record = {"topic": m["topic"], "partition": m["partition"], "offset": m["offset"],
                  "key": str(m["value"]), "value": m["value"]}  # fmt: skip
        mops = line["value"]["ops"]
        k = next(k for k, x in enumerate(mops) if x["f"] == "poll")
        mops[k] = {**mops[k], "records": [*mops[k].get("records", []), record]}
        chosen[line["index"]] = line
        pairs.append((line["index"], l2["index"]))
        if len(pairs) == n:
            break
    tmp = history.with_suffix(".tmp")
    with open(history, "rb") as src, open(tmp, "wb") as dst:
        for line in src:
            if b'"f":"txn"' in line and b'"type":"ok"' in line:
                op = json.loads(line)
                if op["index"] in chosen:
                    line = (json.dumps(chosen[op["index"]], separators=(",", ":")) + "\n").encode()
            dst.write(line)
    tmp.replace(history)
    return pairs


def found_injected(res: dict, pairs: list[tuple[int, int]]) -> int:
    cycles = [
        set(ex["cycle"])
        for name in ("G1c", "G1c-process", "G1c-realtime")
        for ex in res["checks"].get(name, {}).get("examples", [])
    ]
    return sum(1 for a, b in pairs if any(a in c and b in c for c in cycles))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e5, 1e6, 1e7])
    parser.add_argument("--mode", choices=["mixed", "ctp"], default="mixed")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/kc-txn-bench"))
    parser.add_argument("--inject", type=int, default=5, help="cycles injected per history")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    shape = Shape(mode=args.mode, crash_p=0.001, rebalance_p=0.001)
    txn_config = {**config(shape), "checker": {"examples": 5}}
    no_ww = {**txn_config, "checker": {"examples": 100_000, "ww_deps": False}}
    no_cycles = {**txn_config, "checker": {"examples": 5, "cycles": False}}
    queue_config = {**no_cycles, "workload": "queue"}
    configs = {}
    variants = (("txn", txn_config), ("no-ww", no_ww), ("no-cycles", no_cycles),
                ("queue", queue_config))  # fmt: skip
    for name, cfg in variants:
        configs[name] = args.dir / f"config-{args.mode}-{name}.json"
        configs[name].write_text(json.dumps(cfg))
    print(
        f"{'ops':>10} {'gen s':>7} {'first s':>8} {'all checks s':>13} {'no cycles s':>12} "
        f"{'existing only s':>16} {'cycles +s':>10} {'injected found (no-ww)':>22}  verdict, cycles"
    )
    for size in args.sizes:
        history = args.dir / f"txn-{args.mode}-{size:.0e}.jsonl".replace("+", "")
        t0 = time.monotonic()
        pairs_file = history.with_suffix(".pairs.json")
        if not history.exists():
            write(history, int(size), seed=1, shape=shape)
            pairs_file.write_text(json.dumps(inject_cycles(history, args.inject)))
        pairs = [tuple(p) for p in json.loads(pairs_file.read_text())]
        gen = time.monotonic() - t0
        shutil.rmtree(history.with_suffix(".parquet"), ignore_errors=True)
        first, _ = timed_check(history, config=configs["txn"])
        full, res = timed_check(history, config=configs["txn"])
        # Found is judged without ww edges: with them, Elle reports one cycle per
        # strongly connected part and the worst type first, so an injected G1c
        # sharing a part with a (legal, common) G0 is reported as that G0.
        wr_only, res_wr = timed_check(history, config=configs["no-ww"])
        plain, _ = timed_check(history, config=configs["no-cycles"])
        existing, _ = timed_check(history, config=configs["queue"])
        ops = res["ops"]
        bad = {k: v["count"] for k, v in res["checks"].items() if v["count"]}
        found = f"{found_injected(res_wr, pairs)}/{len(pairs)} ({wr_only:.0f} s)"
        print(
            f"{ops:>10} {gen:>7.1f} {first:>8.1f} {full:>13.1f} {plain:>12.1f} "
            f"{existing:>16.1f} {full - plain:>10.1f} {found:>22}  {res['verdict']} {bad} "
            f"{res.get('cycles')}",
            flush=True,
        )


if __name__ == "__main__":
    main()
