"""power-loss and target groups without a cluster: what is drawn, what is refused.

The fault itself runs on a real lazyfs cluster in tests/integration/test_power_loss_run.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from kafka_chaos.harness import lazyfs
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import ConfigError, HarnessError
from kafka_chaos.harness.node import Node, SSHTarget
from kafka_chaos.harness.spec import NemesisSpec
from kafka_chaos.nemeses import registry
from kafka_chaos.nemeses.base import NemesisError, group_size
from kafka_chaos.nemeses.power_loss import PowerLoss
from kafka_chaos.nemeses.schedule import generate
from kafka_chaos.nemeses.targeting import isr_target

from kafka_chaos.options import build_spec


@pytest.mark.parametrize(
    ("group", "sizes"), [("all", [1, 2, 3, 4, 5]), ("minority", [1, 1, 1, 1, 2])]
)
def test_group_sizes(group: str, sizes: list[int]) -> None:
    assert [group_size(group, n) for n in range(1, 6)] == sizes


def test_an_unknown_group_is_one_line() -> None:
    known = r"\(known: minority, all\)$"
    with pytest.raises(ConfigError, match=r"^unknown target group 'half' " + known):
        group_size("half", 3)


@pytest.mark.parametrize(("group", "nodes", "hit"), [("all", 3, 3), ("minority", 5, 2)])
def test_generated_power_losses_hit_the_group(group: str, nodes: int, hit: int) -> None:
    names = [f"n{i}" for i in range(1, nodes + 1)]
    spec = NemesisSpec(faults=["power-loss", "pause"], targets=group, interval_s=2, duration_s=2)
    ops = generate(spec, names, 120.0, seed=7).ops
    losses = [op for op in ops if op.f == "power-loss"]
    assert losses and all(len(op.targets) == hit and op.target == group for op in losses)
    assert len({tuple(op.targets) for op in losses}) > 1 or group == "all"  # drawn, not fixed
    # pause takes no group: one random node each, as without --targets
    pauses = [op for op in ops if op.f == "pause"]
    assert pauses and all(len(op.targets) == 1 and op.target == "random" for op in pauses)


def test_a_group_target_on_a_kind_without_groups_is_refused() -> None:
    op = {"id": 0, "f": "pause", "at_s": 1, "duration_s": 1, "targets": ["n1", "n2"],
          "target": "all"}  # fmt: skip
    with pytest.raises(ConfigError, match=r"fault 'pause' cannot target a group of nodes \(all\)"):
        registry.op_from_dict(op, "schedule[0]")


def test_power_loss_on_a_plain_disk_is_refused_before_anything_runs() -> None:
    with pytest.raises(ConfigError, match=r"^power-loss needs broker data on lazyfs: add --disk"):
        build_spec({"cluster": {"name": "no-such-cluster"}, "nemesis": {"faults": ["power-loss"]}})
    spec = build_spec(
        {"cluster": {"name": "no-such-cluster", "disk": "lazyfs"},
         "nemesis": {"faults": ["power-loss"], "targets": "all"}}
    )  # fmt: skip
    assert (spec.cluster.disk, spec.nemesis.targets) == ("lazyfs", "all")


def test_lazyfs_needs_the_local_backend() -> None:
    with pytest.raises(ConfigError, match=r"^--disk lazyfs needs the local backend, not ssh$"):
        build_spec({"cluster": {"backend": "ssh", "inventory": "x.toml", "disk": "lazyfs"}})


def test_the_fault_refuses_a_cluster_on_a_plain_disk() -> None:
    cluster = Cluster("c1", "local", [], "4.4.0", "kraft", {"disk": "plain"})
    with pytest.raises(ConfigError, match=r"^power-loss needs broker data on lazyfs: cluster 'c1'"):
        PowerLoss().check_cluster(cluster)


def test_config_names_the_fifo_and_keeps_unsynced_writes_in_cache(tmp_path: Path) -> None:
    rec = lazyfs.record(str(tmp_path / "n1"))
    text = lazyfs.config_text(rec)
    assert f'fifo_path="{tmp_path}/n1/run/lazyfs.fifo"' in text
    assert "apply_eviction=false" in text
    assert rec["mount"] == f"{tmp_path}/n1/data/kafka"


def test_a_config_path_with_dash_o_is_refused_before_lazyfs_starts(tmp_path: Path) -> None:
    """lazyfs's main() ignores a --config-path holding "-o" (any case) and aborts."""
    rec = lazyfs.record(str(tmp_path / "kc-Ops" / "n1"))
    with pytest.raises(HarnessError, match=r"lazyfs ignores a config path with '-o' in it"):
        lazyfs.mount(rec, Path("/no/such/lazyfs"))
    assert not Path(rec["mount"]).exists()  # refused before anything was made


def _clear(rec: dict[str, str], timeout_s: float) -> int:
    script = lazyfs.clear_cache_script(rec, timeout_s)
    return subprocess.run(["bash", "-c", script], timeout=30).returncode


def test_clear_cache_waits_for_lazyfs_to_confirm(tmp_path: Path) -> None:
    rec = lazyfs.record(str(tmp_path))
    Path(rec["fifo"]).parent.mkdir(parents=True)
    Path(rec["log"]).parent.mkdir(parents=True)
    os.mkfifo(rec["fifo"])
    Path(rec["log"]).write_text("[lazyfs.cmds]: cache is cleared.\n")  # an earlier clear

    def lazyfs_reads(confirm: bool) -> None:  # what lazyfs's fault worker does
        with open(rec["fifo"]) as fifo:
            assert fifo.read().strip() == "lazyfs::clear-cache"
        if confirm:
            with open(rec["log"], "a") as log:
                log.write("[lazyfs.cmds]: cache is cleared.\n")

    reader = threading.Thread(target=lazyfs_reads, args=(True,))
    reader.start()
    assert _clear(rec, 2.0) == 0
    reader.join()
    reader = threading.Thread(target=lazyfs_reads, args=(False,))
    reader.start()
    assert _clear(rec, 1.0) == 4  # read, never confirmed: the earlier line does not count
    reader.join()
    assert _clear(rec, 1.0) == 5  # nobody reads the FIFO (lazyfs dead)


def _three_nodes() -> Cluster:
    addresses = {i: f"10.0.0.{i}" for i in (1, 2, 3)}
    nodes = [Node(f"n{i}", i, a, SSHTarget(a), f"/r/n{i}") for i, a in addresses.items()]
    return Cluster("c1", "local", nodes, "4.4.0", "kraft", {"disk": "lazyfs"})


def test_isr_targets_are_left_to_the_fault_start_for_groupable_kinds_only() -> None:
    spec = NemesisSpec(faults=["power-loss", "pause"], targets="isr", interval_s=2, duration_s=2)
    ops = generate(spec, ["n1", "n2", "n3"], 120.0, seed=7).ops
    losses = [op for op in ops if op.f == "power-loss"]
    assert losses and all(op.targets == [] and op.target == "isr" for op in losses)
    pauses = [op for op in ops if op.f == "pause"]  # no group: one random node, as with minority
    assert pauses and all(len(op.targets) == 1 and op.target == "random" for op in pauses)


def test_the_isr_found_at_the_fault_start_becomes_the_targets() -> None:
    found = {"topic": "t", "partition": 4, "partition_choice": "busiest (high watermark 9)",
             "leader_id": 3, "isr": [3, 1]}  # fmt: skip
    got = isr_target(_three_nodes(), found)
    assert got["nodes"] == ["n1", "n3"] and got["partition"] == 4 and got["isr"] == [3, 1]
    with pytest.raises(NemesisError, match=r"^isr targeting: t-4 has an empty ISR now$"):
        isr_target(_three_nodes(), {**found, "isr": []})
    with pytest.raises(NemesisError, match=r"^isr targeting: t-4: cluster 'c1' has no node 7"):
        isr_target(_three_nodes(), {**found, "isr": [1, 7]})


def test_a_replayed_isr_op_keeps_its_nodes_and_a_kind_without_groups_refuses_it() -> None:
    op = {"id": 0, "f": "power-loss", "at_s": 1, "duration_s": 1, "targets": ["n1", "n3"],
          "target": "isr"}  # fmt: skip
    assert registry.op_from_dict(op, "schedule[0]").targets == ["n1", "n3"]
    with pytest.raises(ConfigError, match=r"fault 'pause' cannot target a group of nodes \(isr\)"):
        registry.op_from_dict({**op, "f": "pause"}, "schedule[0]")


def test_an_unknown_target_mode_is_one_line_naming_the_known_ones() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "kafka_chaos.cli", "run", "--targets", "half"],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    last = run.stderr.strip().splitlines()[-1]
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "argument --targets: invalid choice: 'half'" in last
    assert "'minority', 'all', 'isr'" in last
