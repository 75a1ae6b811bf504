"""How much slower than the host a cluster's guests run.

A VM under software emulation (TCG) runs 8-15x slower than the host; a
broker that takes 20 s to start here takes minutes there.  Rather than guess,
the vagrant backend times the same busy shell loop on the host and on every
guest and scales every timeout of the cluster's nodes by the worst ratio
(``Node.time_scale``), so a slow guest is never mistaken for a dead one.
"""

from __future__ import annotations

import logging
import subprocess
import time

from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.node import quote

log = logging.getLogger(__name__)

LOOP_ITERATIONS = 100_000
# A shell loop: the same interpreter work on both sides, no disk, no network.
LOOP = f"i=0; while [ $i -lt {LOOP_ITERATIONS} ]; do i=$((i+1)); done"
TIMED = f"s=$(date +%s%N); {LOOP}; e=$(date +%s%N); echo $(( (e - s) / 1000 ))"
MAX_SCALE = 50.0
GUEST_TIMEOUT_S = 300.0


def host_loop_s() -> float:
    out = subprocess.run(["bash", "-c", TIMED], capture_output=True, text=True, timeout=60)
    return int(out.stdout.strip()) / 1e6


def guest_loop_s(cluster: Cluster) -> dict[str, float]:
    times = {}
    for node in cluster.nodes:
        res = node.run(f"bash -c {quote(TIMED)}", timeout=GUEST_TIMEOUT_S)
        try:
            times[node.name] = int(res.stdout.strip()) / 1e6
        except ValueError as e:
            raise HarnessError(f"{node.name}: guest speed loop printed {res.stdout!r}") from e
    return times


def scale(host_s: float, guest_s: dict[str, float]) -> float:
    """Worst guest time over host time, at least 1 and at most ``MAX_SCALE``."""
    if host_s <= 0 or not guest_s:
        return 1.0
    return round(min(MAX_SCALE, max(1.0, max(guest_s.values()) / host_s)), 1)


def measure(cluster: Cluster) -> float:
    """Time the loop on the host and each guest (host again after, the lower wins)."""
    started = time.monotonic()
    host = host_loop_s()
    guests = guest_loop_s(cluster)
    host = min(host, host_loop_s())
    factor = scale(host, guests)
    log.info(
        "guest speed: host loop %.2fs, guests %s; scale %.1f (measured in %.0fs)",
        host,
        ", ".join(f"{n} {t:.2f}s" for n, t in guests.items()),
        factor,
        time.monotonic() - started,
    )
    return factor
