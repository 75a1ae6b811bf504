"""Cluster-state samples: leader, replicas and ISR per partition, and the controller.

These are not client observations, so they go to ``cluster-state.jsonl`` beside
the history (docs/history.md).  A failed query is itself a sample (with
``error`` set): a gap in the timeline would hide exactly the moments a fault
made the cluster hard to ask.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger(__name__)

QUERY_TIMEOUT_S = 3.0
CLUSTER_STATE = "cluster-state.jsonl"

T = TypeVar("T")
Probe = Callable[[], tuple[int | None, list[dict[str, Any]]]]


def admin_probe(bootstrap: str, topic: str, timeout_s: float = QUERY_TIMEOUT_S) -> Probe:
    """Ask the cluster through harness.admin (each call bounded by ``timeout_s``)."""
    from kafka_chaos.harness import admin

    def probe() -> tuple[int | None, list[dict[str, Any]]]:
        states = admin.describe_topics(bootstrap, [topic], timeout_s=timeout_s)
        controller = admin.controller_id(bootstrap, timeout_s=timeout_s)
        return controller, [partition_row(s) for s in states]

    return probe


def cluster_probe(cluster: Any, topic: str, timeout_s: float = QUERY_TIMEOUT_S) -> Probe:
    """Like ``admin_probe``, but with the real active controller.

    KRaft brokers report a random live broker as "controller" to clients, so
    the controller comes from ``kafka_db.controller_id`` (the quorum leader
    read from the voters' quorum-state files over SSH).  On slow guests that
    read costs each guest's one CPU and holds an SSH connection a fault needs,
    so it is repeated only every ``time_scale`` seconds; elections there take
    that much longer too.
    """
    from kafka_chaos.harness import admin, kafka_db

    bootstrap = cluster.bootstrap_servers()
    slow = any(n.is_slow_guest for n in cluster.nodes)
    controller = at_most_every(
        cluster.time_scale if slow else 0.0,
        lambda: kafka_db.controller_id(cluster, timeout_s=timeout_s),
    )

    def probe() -> tuple[int | None, list[dict[str, Any]]]:
        states = admin.describe_topics(bootstrap, [topic], timeout_s=timeout_s)
        return controller(), [partition_row(s) for s in states]

    return probe


def at_most_every(
    period_s: float, fn: Callable[[], T], clock: Callable[[], float] = time.monotonic
) -> Callable[[], T]:
    """``fn``, called again only once ``period_s`` has passed; its last answer in between."""
    last: list[Any] = []  # [answer, when]

    def call() -> T:
        now = clock()
        if not last or now - last[1] >= period_s:
            last[:] = [fn(), now]
        return last[0]

    return call


def partition_row(state: Any) -> dict[str, Any]:
    """One partition in the sample format, from a dataclass or mapping."""
    d = asdict(state) if is_dataclass(state) else dict(state)
    return {k: d.get(k) for k in ("topic", "partition", "leader", "replicas", "isr")}


class ClusterSampler:
    """A daemon thread appending one sample every ``interval_s``; stop() is bounded."""

    def __init__(
        self,
        probe: Probe,
        path: Path,
        clock_ns: Callable[[], int],
        interval_s: float = 1.0,
    ) -> None:
        self.probe = probe
        self.path = Path(path)
        self.clock_ns = clock_ns
        self.interval_s = interval_s
        self.samples = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cluster-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 2 * QUERY_TIMEOUT_S + 1) -> None:
        self._stop.set()
        self._thread.join(timeout_s)

    def sample_once(self, out: Any) -> None:
        t = self.clock_ns()
        try:
            controller, partitions = self.probe()
            sample = {"time": t, "controller": controller, "partitions": partitions, "error": None}
        except Exception as e:  # recorded, never fatal
            self.errors += 1
            sample = {
                "time": t,
                "controller": None,
                "partitions": [],
                "error": f"{type(e).__name__}: {e}"[:500],
            }
        out.write(json.dumps(sample, separators=(",", ":")) + "\n")
        out.flush()
        self.samples += 1

    def _run(self) -> None:
        with open(self.path, "a", encoding="utf-8") as out:
            while not self._stop.is_set():
                started = self.clock_ns()
                self.sample_once(out)
                spent = (self.clock_ns() - started) / 1e9
                self._stop.wait(max(0.0, self.interval_s - spent))
