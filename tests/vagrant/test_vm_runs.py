"""Chaos on real VMs: the checks and the report are those of the local backend.

The VMs have their own kernels, clocks and iptables: kill, pause and
partition act inside the guests over SSH, and the unclean-election script
loses acknowledged writes there as it does on namespaces.
"""

from __future__ import annotations

import json
from pathlib import Path

from _cli import kafka_chaos, ops, report_path, run_args

from harness.cluster import Cluster

RUN_TIMEOUT_S = 2400.0


def _run(cluster: Cluster, store: Path, *extra: str) -> tuple[int, Path, str]:
    proc = kafka_chaos(*run_args(cluster, store, *extra), timeout=RUN_TIMEOUT_S)
    assert proc.returncode in (0, 1, 2), proc.stdout + proc.stderr[-3000:]
    run = report_path(proc.stdout).parent
    # On the VMs themselves, not on a cluster the run made instead.
    config = json.loads((run / "config.json").read_text())
    assert config["cluster"]["backend"] == "vagrant", config["cluster"]
    assert "recreating cluster" not in (run / "harness.log").read_text()
    return proc.returncode, run, proc.stdout


def test_a_chaos_run_with_kills_and_partitions_is_valid(vm_cluster: Cluster, tmp_path) -> None:
    code, run, out = _run(
        vm_cluster, tmp_path, "--time-limit", "60", "--faults", "kill,partition", "--seed", "7"
    )
    results = json.loads((run / "results.json").read_text())
    bad = {k: v for k, v in results["checks"].items() if v["valid"] is not True}
    assert code == 0 and results["verdict"] == "valid", (results["unknown_reasons"], bad, out)
    faults = [o for o in ops(run / "history.jsonl") if o["process"] == "nemesis"]
    kinds = {o["f"] for o in faults if o["type"] == "info"}
    assert {"kill", "partition"} & kinds, kinds  # faults really happened in the guests
    assert (run / "report.html").stat().st_size > 0
    assert results["summary"]["acked"] > 0


def test_unclean_leader_election_loses_acknowledged_writes_on_vms(
    vm_cluster: Cluster, tmp_path: Path
) -> None:
    # The stale follower is elected once the controller fences the killed leader,
    # after the broker session timeout, which scales with the guests' slowness
    # (harness/kafka_config.py): the fault lasts that much longer than on namespaces.
    duration = 40 + 8 * vm_cluster.time_scale
    code, run, out = _run(
        vm_cluster, tmp_path, "--scenario", "unclean-leader-election",
        "--fault-duration", f"{duration:.0f}", "--time-limit", f"{duration + 35:.0f}",
    )  # fmt: skip
    assert code == 1 and "expectation held" in out, out
    results = json.loads((run / "results.json").read_text())
    acked_lost = results["checks"]["acked-lost"]
    assert acked_lost["count"] > 0 and acked_lost["valid"] is False
    assert 0 < results["summary"]["acked_lost"] < results["summary"]["acked"]
