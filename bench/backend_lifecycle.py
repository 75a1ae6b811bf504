"""Time to provision and to tear down local-backend nodes (no Kafka).

Creates and destroys its own cluster (``a1``) for 3 and 5 nodes and prints
the median seconds of each phase.

    python bench/backend_lifecycle.py [--repeat N]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time

from kafka_chaos.harness.backends import create_cluster, destroy_cluster
from kafka_chaos.harness.spec import ClusterSpec

NAME = "a1"


def measure(nodes: int) -> tuple[float, float]:
    """(seconds to create ``nodes`` SSH-ready nodes, seconds to remove them all)."""
    destroy_cluster(NAME)
    t0 = time.monotonic()
    cluster = create_cluster(ClusterSpec(name=NAME, nodes=nodes))
    t1 = time.monotonic()
    cluster.close()
    destroy_cluster(NAME)
    return t1 - t0, time.monotonic() - t1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    for nodes in (3, 5):
        runs = [measure(nodes) for _ in range(args.repeat)]
        up = statistics.median(a for a, _ in runs)
        down = statistics.median(b for _, b in runs)
        print(
            f"local backend, {nodes} nodes: create {up:.2f}s, destroy {down:.2f}s "
            f"(median of {len(runs)}; includes SSH and node-to-node TCP checks)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
