"""Vagrant VMs against local namespaces, side by side in one run.

Prints, for each backend: the time to bring up 3 nodes, the time from nodes
to 3 healthy brokers, a whole default chaos run on them (``kafka-chaos run``
with its default workload and faults), and ``cluster down``; for Vagrant also
the box build from scratch (debootstrap into a fresh cache) and the measured
guest slowdown.  Ratios are VM time over local time.

    python bench/vagrant_up.py [--time-limit 60] [--keep-box-cache]

Needs ``./setup.sh --vagrant`` first.  Creates and destroys its own clusters
(``bench-vm``, ``bench-local``); runs go to ``store-bench/``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# This checkout's code, not whatever copy is installed (an editable install
# may point at another clone).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka_chaos.harness import distribution, kafka_db  # noqa: E402
from kafka_chaos.harness.backends import create_cluster, destroy_cluster  # noqa: E402
from kafka_chaos.harness.errors import HarnessError  # noqa: E402
from kafka_chaos.harness.spec import NEWEST_KAFKA, ClusterSpec  # noqa: E402

from kafka_chaos.options import build_spec  # noqa: E402
from kafka_chaos.run import run_test  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def box_build_s(keep_cache: bool) -> float:
    """Build the box from scratch (a fresh cache) and register it; seconds."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="kc-box-") as cache:
        if not keep_cache:
            env["KC_BOX_CACHE"] = cache
        t0 = time.monotonic()
        subprocess.run(
            ["bash", str(ROOT / "vagrant" / "build-box.sh"), "--force"], env=env, check=True
        )
        return time.monotonic() - t0


def fault_costs(run: Path) -> str:
    """How long the run's faults took to apply and to heal (schedule.json), in words."""
    ops = json.loads((run / "schedule.json").read_text())["ops"]
    started = [op for op in ops if "applied_s" in op and "ended_s" in op]
    if not started:
        return f"faults: none of {len(ops)} planned started"
    apply = [op["applied_s"] - op["started_s"] for op in started]
    heal = [op["ended_s"] - op["healing_s"] for op in started]
    return (
        f"faults: {len(started)} of {len(ops)} planned started; applying took "
        f"{min(apply):.1f}-{max(apply):.1f} s, healing {min(heal):.1f}-{max(heal):.1f} s"
    )


def measure(backend: str, name: str, time_limit: float, store: Path) -> dict[str, float]:
    """Seconds for nodes up, Kafka healthy, a default run and cluster down."""
    spec = ClusterSpec(name=name, backend=backend, nodes=3, kafka_version=NEWEST_KAFKA)
    destroy_cluster(name)
    figures: dict[str, float] = {}
    t0 = time.monotonic()
    cluster = create_cluster(spec)
    try:
        figures["nodes"] = time.monotonic() - t0
        figures["scale"] = cluster.time_scale
        t1 = time.monotonic()
        kafka_db.start_cluster(cluster, spec)
        figures["kafka"] = time.monotonic() - t1
        run_spec = build_spec(
            {"cluster": {"name": name, "backend": backend}, "time_limit_s": time_limit}
        )
        t2 = time.monotonic()
        outcome = run_test(run_spec, store=store)
        figures["run"] = time.monotonic() - t2
        print(f"{backend}: run verdict {outcome.verdict}, report {outcome.report}", flush=True)
        print(f"{backend}: {fault_costs(Path(outcome.report).parent)}", flush=True)
    finally:
        cluster.close()
        t3 = time.monotonic()
        destroy_cluster(name)
        figures["down"] = time.monotonic() - t3
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--store", type=Path, default=Path("store-bench"))
    parser.add_argument(
        "--keep-box-cache", action="store_true", help="time a rebuild from the cached tree"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    for noisy in (
        "kafka_chaos.harness.backends.vagrant",
        "kafka_chaos.harness.backends.libvirt_host",
    ):
        logging.getLogger(noisy).setLevel(logging.INFO)
    distribution.fetch(NEWEST_KAFKA)  # warm cache: not part of the measurement
    build = box_build_s(args.keep_box_cache)
    print(f"box build ({'cached tree' if args.keep_box_cache else 'from scratch'}): {build:.0f}s")
    try:
        vm = measure("vagrant", "bench-vm", args.time_limit, args.store)
        local = measure("local", "bench-local", args.time_limit, args.store)
    except HarnessError as e:
        print(f"vagrant_up: {e}", file=sys.stderr)
        return 1
    print(f"guest slowdown measured by the harness: {vm['scale']:.1f}x")
    print(f"{'step':<28}{'vagrant':>10}{'local':>10}{'ratio':>8}")
    for key, label in (
        ("nodes", "3 nodes up"),
        ("kafka", "3 brokers healthy"),
        ("run", f"default run ({args.time_limit:.0f} s)"),
        ("down", "cluster down"),
    ):
        ratio = vm[key] / local[key] if local[key] > 0 else float("nan")
        print(f"{label:<28}{vm[key]:>9.0f}s{local[key]:>9.1f}s{ratio:>7.1f}x")
    total_vm = sum(vm[k] for k in ("nodes", "kafka", "run", "down"))
    total_local = sum(local[k] for k in ("nodes", "kafka", "run", "down"))
    print(f"{'total':<28}{total_vm:>9.0f}s{total_local:>9.1f}s{total_vm / total_local:>7.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
