"""When the share drain may say ``complete`` (workloads/share_consumer.py).

Why: ``share-lost`` and ``share-missing-redelivery`` are errors against Kafka only
if the drain gave every record a member could still hold its chance to come
back.  A crashed member whose leave was lost keeps its partitions, to itself
alone, until the coordinator fences it one session timeout after it last heard
from it; a drain that ended on quiet alone before that judged those partitions'
records lost (evidence/share-partitions-stuck-after-leader-blackhole-4.4.0).
These pin the rule on its timing, and run the real drain loop, its history line
included, with members that deliver nothing (no Kafka needed for the timing).
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kafka_chaos.harness import kafka_config as kc
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.distribution import Distribution
from kafka_chaos.harness.history import HistoryWriter
from kafka_chaos.harness.kafka_clients import CLOSE_TIMEOUT_S
from kafka_chaos.harness.kafka_db import node_files
from kafka_chaos.harness.node import Node, SSHTarget
from kafka_chaos.harness.spec import ClusterSpec, TestSpec
from kafka_chaos.workloads import share_consumer
from kafka_chaos.workloads.share_consumer import (
    CRASH_HOLD_MARGIN_S,
    FENCE_MARGIN_S,
    KAFKA_DEFAULT_SESSION_MS,
    DrainRule,
    crashed_members_fenced_at,
    share_drain,
    share_session_timeout_s,
)
from kafka_chaos.workloads.values import Counter


def _cluster(version: str) -> Cluster:
    nodes = [
        Node(f"n{i}", i, f"10.251.9.{10 + i}", SSHTarget(host=f"10.251.9.{10 + i}"),
             f"/var/lib/kc/nodes/n{i}")
        for i in (1, 2, 3)
    ]  # fmt: skip
    return Cluster("c", "local", nodes, version, "kraft")


def parse(text: str) -> dict[str, str]:
    return dict(line.partition("=")[::2] for line in text.splitlines())


def test_no_crash_no_wait_for_sessions() -> None:
    assert crashed_members_fenced_at(None, 15000, 10.0) is None
    rule = DrainRule(start=100.0, deadline=160.0, quiet_s=18.0)
    assert rule.done(118.0, 18.0) and rule.sessions_expire_s() == 0.0
    assert not rule.done(118.0, 17.9)


def test_a_crash_is_waited_out_for_its_hold_its_close_a_session_and_a_margin() -> None:
    fenced = crashed_members_fenced_at(50.0, 15000, 10.0)
    assert fenced == 50.0 + 15 + CRASH_HOLD_MARGIN_S + CLOSE_TIMEOUT_S + 10 + FENCE_MARGIN_S
    # the blackhole run of seed 5000: the drain went quiet 18 s after its start,
    # 20 s before the crashed member could have been fenced
    rule = DrainRule(start=60.0, deadline=120.0, quiet_s=18.0, fenced_at=fenced)
    assert rule.sessions_expire_s() == round(fenced - 60.0, 1)
    assert not rule.done(78.0, 18.0)
    why = rule.why_incomplete(78.0, 18.0)
    assert why is not None and "session" in why
    assert not rule.done(fenced, 17.0)  # its partitions' records came back: quiet again first
    assert rule.done(fenced, 18.0) and rule.why_incomplete(fenced, 18.0) is None


def test_a_session_expired_before_the_drain_costs_nothing() -> None:
    rule = DrainRule(start=200.0, deadline=260.0, quiet_s=18.0, fenced_at=150.0)
    assert rule.sessions_expire_s() == 0.0 and rule.done(218.0, 18.0)


def test_the_bound_says_which_wait_it_cut() -> None:
    rule = DrainRule(start=0.0, deadline=60.0, quiet_s=18.0, fenced_at=75.0)
    assert "session could expire (+75.0 s)" in (rule.why_incomplete(60.0, 40.0) or "")
    busy = DrainRule(start=0.0, deadline=60.0, quiet_s=18.0, fenced_at=30.0)
    assert "a delivery came within 18.0 s" in (busy.why_incomplete(60.0, 2.0) or "")


class SilentMember(threading.Thread):
    """A drain member that is given nothing: the drain's timing alone decides."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.stop_event: threading.Event = args[5]
        super().__init__(daemon=True)

    def run(self) -> None:
        self.stop_event.wait()


def _drain(tmp_path: Path, timeout_s: float, fence_in_s: float) -> tuple[dict, float]:
    """Run the drain loop (lock 1 s: 4 s quiet) after a crash whose session (1 s)
    expires ``fence_in_s`` after the drain starts; its line and how long it took."""
    base = TestSpec()
    consumer = dataclasses.replace(base.consumer, share_lock_ms=1000)
    spec = dataclasses.replace(base, consumer=consumer)
    before = 1 + CRASH_HOLD_MARGIN_S + CLOSE_TIMEOUT_S + 1.0 + FENCE_MARGIN_S
    crash = time.monotonic() - before + fence_in_s
    history = HistoryWriter(tmp_path / "history.jsonl")
    t0 = time.monotonic()
    [result] = share_drain(
        spec, "127.0.0.1:9", history, Counter(), ["g"], timeout_s, SilentMember,
        last_crash_at=crash, session=(1.0, "brokers"),
    )  # fmt: skip
    took = time.monotonic() - t0
    history.close()
    [line] = [json.loads(x) for x in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert line["f"] == "share-drain" and line["value"]["complete"] == result.complete
    return line["value"], took


def test_a_quiet_drain_still_waits_for_the_crashed_members_session(tmp_path: Path) -> None:
    value, took = _drain(tmp_path, timeout_s=20.0, fence_in_s=6.0)
    assert value["complete"] is True and value["reason"] is None
    assert 6.0 <= took < 9.0, took  # quiet after 4 s, yet it waited for the fence
    assert 5.9 <= value["sessions_expire_s"] <= 6.1 and value["session_timeout_s"] == 1.0
    assert value["session_timeout_source"] == "brokers" and value["duration_s"] >= 6.0


def test_a_drain_bound_before_the_fence_is_not_complete_and_says_why(tmp_path: Path) -> None:
    value, took = _drain(tmp_path, timeout_s=5.0, fence_in_s=30.0)
    assert value["complete"] is False and took < 7.0
    assert "session could expire" in value["reason"]


def test_unknown_brokers_make_the_drain_wait_longer_not_shorter(monkeypatch) -> None:
    # Nothing listens on port 9, so the ask can only time out: 1 s of it says so as well
    # as the 10 s a run allows a loaded cluster (9 s of the fast tier's wall time).
    monkeypatch.setattr(share_consumer, "SESSION_ASK_TIMEOUT_S", 1.0)
    seconds, source = share_session_timeout_s("127.0.0.1:9")
    assert (seconds, source) == (KAFKA_DEFAULT_SESSION_MS / 1000, "assumed")


@pytest.mark.parametrize("version", ["4.2.0", "4.4.0"])
def test_share_releases_get_the_classic_10_s_session_within_kafkas_bounds(version: str) -> None:
    cluster = _cluster(version)
    dist = Distribution(version, Path("/cache") / version, "ab" * 32, version)
    files = node_files(cluster, cluster.nodes[0], ClusterSpec(), dist)
    props = parse(files[f"{cluster.nodes[0].root_dir}/config/server.properties"])
    session = int(props["group.share.session.timeout.ms"])
    assert session == int(props["group.consumer.session.timeout.ms"]) == 10000
    # GroupCoordinatorConfig's requires: min <= session <= max (60000 by default),
    # min <= heartbeat <= max (15000), heartbeat < session
    assert int(props["group.share.min.session.timeout.ms"]) <= session <= 60000
    heartbeat = int(props["group.share.heartbeat.interval.ms"])
    assert int(props["group.share.min.heartbeat.interval.ms"]) <= heartbeat <= 15000
    assert heartbeat < session


def test_releases_without_share_groups_get_no_share_settings() -> None:
    nodes = _cluster("3.9.2").nodes
    for version in ("3.9.2", "4.1.1", None):
        props = parse(kc.kraft_server_properties(nodes[0], nodes, None, 1.0, version))
        assert not [k for k in props if k.startswith("group.share.")], version
