"""Time to bring up a 3-node local cluster with Kafka already cached.

Target: <= 30 s for the newest Kafka (KRaft).  Creates and destroys its own
cluster (``b2``); ``--zk`` also measures Kafka 3.9 in ZooKeeper mode.

    python bench/cluster_up.py [--zk] [--repeat N]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time

from kafka_chaos.harness import distribution, kafka_db
from kafka_chaos.harness.backends import create_cluster, destroy_cluster
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.spec import KAFKA_39, NEWEST_KAFKA, ClusterSpec

NAME = "b2"


def destroy(name: str) -> None:
    """Remove the cluster; a teardown that raced the kernel is retried once."""
    try:
        destroy_cluster(name)
    except HarnessError:
        destroy_cluster(name)


def measure(version: str, mode: str) -> tuple[float, float]:
    """(seconds to provision nodes, seconds from nodes to a healthy Kafka)."""
    spec = ClusterSpec(name=NAME, nodes=3, kafka_version=version, mode=mode)
    destroy(NAME)
    t0 = time.monotonic()
    cluster = create_cluster(spec)
    try:
        t1 = time.monotonic()
        kafka_db.start_cluster(cluster, spec, timeout_s=180)
        t2 = time.monotonic()
        kafka_db.stop_cluster(cluster)
    finally:
        cluster.close()
        destroy(NAME)
    return t1 - t0, t2 - t1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zk", action="store_true", help="also Kafka 3.9 in ZooKeeper mode")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("kafka_chaos.harness.kafka_db").setLevel(logging.INFO)
    cases = [(NEWEST_KAFKA, "kraft")] + ([(KAFKA_39, "zk")] if args.zk else [])
    for version, mode in cases:
        distribution.fetch(version)  # warm cache: not part of the measurement
        runs = [measure(version, mode) for _ in range(args.repeat)]
        totals = [a + b for a, b in runs]
        print(
            f"cluster up, 3 nodes, Kafka {version} {mode}: "
            f"total {statistics.median(totals):.1f}s median of {len(runs)} "
            f"(nodes {statistics.median(a for a, _ in runs):.1f}s, "
            f"kafka {statistics.median(b for _, b in runs):.1f}s); target <= 30s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
