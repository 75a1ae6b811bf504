"""The hunts, measured: each hunt scenario N times per Kafka version and client.

    python bench/hunt.py --runs 5
    python bench/hunt.py --runs 2 --scenarios hunt-txn-stale-endtxn --versions 4.4.0

Prints one table: scenario x Kafka version x client -> runs, the runs that
found each error-severity anomaly (what makes a verdict invalid), the rate
of runs with any with a 95 % Wilson interval, the runs with each anomaly of
lower severity (info/warning: shapes Kafka allows, e.g. G0 over ww edges,
which Kafka's transactions do not order), and the operations recorded
(history lines, all runs together).  Seeds are 5000..5000+N-1, the same for
every cell, so two cells differ only in version or client.  Zeros are
reported as zeros.  Under the table, for each scenario and version, every
pair of clients (and for each scenario and client, every pair of versions)
is compared with a two-sided Fisher exact test on the runs with any error:
a cell may be called different from another only when p < 0.05.

    python bench/hunt.py --table store-bench/hunt-20261127 store-bench/hunt-20261127b

prints the same table from the runs already in one or more stores (a bench
cut short, or one whose table scrolled away).

Each version gets one local cluster (``hunt-<version>``), destroyed at the
end; Java runs go in a child process (one JVM per process).  Runs go to
``--store`` (default ``store-bench/``); a finding worth keeping is copied to
``evidence/`` by hand, with its README, and shrunk (docs/shrinking.md).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from kafka_chaos.harness.backends import destroy_cluster
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.rates import comparison_text, rate_text

from kafka_chaos.child_run import needs_own_process, run_in_child
from kafka_chaos.options import build_spec
from kafka_chaos.run import run_test
from kafka_chaos.scenarios import SCENARIOS, scenario_layer

HUNTS = tuple(name for name in SCENARIOS if name.startswith("hunt-"))
CLIENTS = ("librdkafka", "java")
SEED = 5000


def found(run_dir: Path) -> tuple[set[str], set[str], int]:
    """One run's error-severity anomalies, its others, and its history's operations."""
    results = json.loads((run_dir / "results.json").read_text())
    hit = {n: c.get("severity") for n, c in results["checks"].items() if c.get("count", 0) > 0}
    with open(run_dir / "history.jsonl", "rb") as f:
        ops = sum(1 for _ in f)
    errors = {n for n, severity in hit.items() if severity == "error"}
    return errors, set(hit) - errors, ops


def new_cell() -> dict:
    return {"runs": 0, "hits": 0, "seen": Counter(), "minor": Counter(), "operations": 0}


def add_run(cell: dict, run_dir: Path) -> tuple[set[str], set[str]]:
    errors, minor, ops = found(run_dir)
    cell["runs"] += 1
    cell["hits"] += bool(errors)
    cell["seen"].update(errors)
    cell["minor"].update(minor)
    cell["operations"] += ops
    return errors, minor


def run_cell(scenario: str, version: str, client: str, runs: int, store: Path) -> dict:
    cell = new_cell()
    for i in range(runs):
        spec = build_spec(
            scenario_layer(scenario),
            {"cluster": {"name": f"hunt-{version.replace('.', '')}", "kafka_version": version},
             "producer": {"client": client}, "consumer": {"client": client},
             "seed": SEED + i},
        )  # fmt: skip
        try:
            outcome = (
                run_in_child(spec, store) if needs_own_process(spec) else run_test(spec, store)
            )
            errors, minor = add_run(cell, outcome.run_dir.path)
        except (HarnessError, OSError) as e:
            print(f"  {scenario} {version} {client} run {i + 1}: no verdict ({e})", flush=True)
            continue
        print(f"  {scenario} {version} {client} run {i + 1}: {sorted(errors) or 'nothing'}"
              f"{f' (lower severity: {sorted(minor)})' if minor else ''}", flush=True)  # fmt: skip
    return cell


def from_store(store: Path) -> list[tuple[str, str, str, dict]]:
    """The cells of the runs already in ``store`` (one directory per scenario)."""
    cells: dict[tuple[str, str, str], dict] = {}
    for results in sorted(store.glob("hunt-*/*/results.json")):
        config = json.loads((results.parent / "config.json").read_text())
        key = (
            results.parent.parent.name,
            config.get("cluster", {}).get("kafka_version", "?"),
            config.get("producer", {}).get("client", "librdkafka"),  # the bench sets both
        )
        add_run(cells.setdefault(key, new_cell()), results.parent)
    return [(*key, cell) for key, cell in cells.items()]


def print_table(rows: list[tuple[str, str, str, dict]]) -> None:
    print("| scenario | Kafka | client | runs | runs finding each error | runs with any error, "
          "95 % interval | runs with each lower-severity anomaly | operations |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for scenario, version, client, c in rows:
        each = ", ".join(f"{n} {k}" for n, k in sorted(c["seen"].items())) or "none"
        minor = ", ".join(f"{n} {k}" for n, k in sorted(c["minor"].items())) or "none"
        rate = rate_text(c["hits"], c["runs"]) if c["runs"] else "no verdict"
        print(f"| {scenario} | {version} | {client} | {c['runs']} | {each} | {rate} | {minor} | "
              f"{c['operations']} |")  # fmt: skip
    print()
    for line in comparisons(rows):
        print(line)


def comparisons(rows: list[tuple[str, str, str, dict]]) -> list[str]:
    """Fisher exact p for each pair of cells that differ only in client, or only in version."""
    lines = []
    cells = [(s, v, c, cell) for s, v, c, cell in rows if cell["runs"]]
    for i, (s1, v1, c1, a) in enumerate(cells):
        for s2, v2, c2, b in cells[i + 1 :]:
            if s1 != s2 or (v1 != v2) == (c1 != c2):
                continue  # other scenario, or both version and client differ
            label_a, label_b = (c1, c2) if c1 != c2 else (v1, v2)
            shared = v1 if c1 != c2 else c1
            text = comparison_text(label_a, a["hits"], a["runs"], label_b, b["hits"], b["runs"])
            lines.append(f"{s1} ({shared}): {text}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scenarios", default=",".join(HUNTS))
    parser.add_argument("--versions", default="4.4.0")
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--store", type=Path, default=Path("store-bench"))
    parser.add_argument(
        "--table", type=Path, nargs="+", help="only print the table of the runs in these stores"
    )
    args = parser.parse_args()
    if args.table:
        print_table([row for store in args.table for row in from_store(store)])
        return
    rows = []
    for version in args.versions.split(","):
        try:
            for scenario in args.scenarios.split(","):
                for client in args.clients.split(","):
                    cell = run_cell(scenario, version, client, args.runs, args.store)
                    rows.append((scenario, version, client, cell))
        finally:
            destroy_cluster(f"hunt-{version.replace('.', '')}")
    print()
    print_table(rows)


if __name__ == "__main__":
    main()
