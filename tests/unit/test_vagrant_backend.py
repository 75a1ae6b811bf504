"""The vagrant backend's host-side pieces: libvirt names, guest speed, pid records."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from kafka_chaos.harness.backends import guest_speed, libvirt_host, procs
from kafka_chaos.harness.backends.libvirt_host import cluster_names
from kafka_chaos.harness.backends.vagrant import vagrant_env
from kafka_chaos.harness.node import Node, SSHTarget
from kafka_chaos.harness.spec import ClusterSpec


@pytest.mark.parametrize(
    ("name", "owned"),
    [
        ("kc-a-n1", True),
        ("kc-a-n12", True),
        ("kc-a-n1.img", True),
        ("kc-a-mgmt", True),
        ("kc-a-net", True),
        ("kc-a-n1-n1", False),  # cluster a-n1's domain
        ("kc-a-b-n1", False),  # cluster a-b's
        ("kc-ab-n1", False),
        ("kc-a-", False),
        ("kafka-chaos-VAGRANTSLASH-bookworm_vagrant_box_image_0.0.1_box.img", False),
    ],
)
def test_libvirt_names_are_matched_whole(name: str, owned: bool) -> None:
    assert bool(cluster_names("a").match(name)) is owned


def test_a_cluster_name_is_not_a_pattern() -> None:
    assert not cluster_names("a.b").match("kc-aXb-n1")


@pytest.mark.parametrize(
    ("host", "guests", "expected"),
    [
        (0.5, {"n1": 5.0, "n2": 6.0}, 12.0),  # the slowest guest decides
        (0.5, {"n1": 0.4}, 1.0),  # never below 1: a fast guest does not shorten bounds
        (0.01, {"n1": 100.0}, guest_speed.MAX_SCALE),
        (0.0, {"n1": 1.0}, 1.0),
        (0.5, {}, 1.0),
    ],
)
def test_guest_speed_scale(host: float, guests: dict[str, float], expected: float) -> None:
    assert guest_speed.scale(host, guests) == expected


def test_the_host_loop_is_timed() -> None:
    assert 0 < guest_speed.host_loop_s() < 30


def test_time_scale_survives_cluster_json() -> None:
    node = Node("n1", 1, "10.0.0.1", SSHTarget(host="10.0.0.1"), "/var/lib/kafka-chaos/x")
    assert "time_scale" not in node.to_dict()  # unchanged cluster.json for local nodes
    node.time_scale = 11.5
    assert Node.from_dict(node.to_dict()).time_scale == 11.5


def _session_sleep() -> subprocess.Popen:
    return subprocess.Popen(["sleep", "60"], start_new_session=True)


def test_a_pid_record_stops_the_process_it_names(tmp_path: Path) -> None:
    proc = _session_sleep()
    record = tmp_path / "vagrant.pid"
    procs.write_pid_record(record, proc.pid)
    assert procs.stop_recorded(record, grace_s=5) == proc.pid
    assert proc.wait(5) is not None
    assert not record.exists()


def test_a_pid_record_of_another_process_is_left_alone(tmp_path: Path) -> None:
    """A reused pid has another start time: the process is not ours."""
    proc = _session_sleep()
    try:
        record = tmp_path / "vagrant.pid"
        record.write_text(f"{proc.pid} 1\n")
        assert procs.stop_recorded(record) is None
        time.sleep(0.2)
        assert proc.poll() is None
        assert not record.exists()
    finally:
        proc.kill()
        proc.wait()


def test_a_missing_or_garbled_record_is_nothing_to_stop(tmp_path: Path) -> None:
    assert procs.stop_recorded(tmp_path / "none.pid") is None
    (tmp_path / "bad.pid").write_text("not a pid\n")
    assert procs.stop_recorded(tmp_path / "bad.pid") is None


def test_vagrant_runs_with_the_clusters_names_and_its_own_machine_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAFKA_CHAOS_HOME", str(tmp_path))
    monkeypatch.delenv("KC_BOX", raising=False)
    spec = ClusterSpec(name="vm1", backend="vagrant", nodes=3)
    env = vagrant_env(spec, tmp_path / "vagrant", driver="qemu")
    assert env["KC_CLUSTER"] == "vm1" and env["KC_NODES"] == "3"
    assert env["KC_LIBVIRT_DRIVER"] == "qemu" and env["KC_BOX"] == "kafka-chaos/bookworm"
    assert env["VAGRANT_DOTFILE_PATH"] == str(tmp_path / "clusters" / "vm1" / "vagrant")


@pytest.mark.parametrize(
    ("subnet", "guard"),
    [("192.168.56", "192.168.56.0/23"), ("192.168.121", "192.168.120.0/23")],
)
def test_a_guard_covers_its_network_one_bit_wider(subnet: str, guard: str) -> None:
    assert libvirt_host.guard_prefix(subnet) == guard


def _reachable(address: str) -> bool:
    return subprocess.run(["ip", "route", "get", address], capture_output=True).returncode == 0


def test_guard_routes_blackhole_a_guest_network_until_removed() -> None:
    guards = libvirt_host.add_guard_routes(["192.168.250", "192.168.251"])
    try:
        assert guards == ["192.168.250.0/23"]  # both /24s share one guard, added once
        assert libvirt_host.add_guard_routes(["192.168.250"]) == guards  # idempotent
        assert not _reachable("192.168.251.7")  # never off this machine
        assert libvirt_host.remove_guard_routes(guards, keep=set(guards)) == []
        assert not _reachable("192.168.250.7")  # another cluster still relies on it
    finally:
        removed = libvirt_host.remove_guard_routes(guards)
    assert removed == ["guard route 192.168.250.0/23"]
    assert libvirt_host.remove_guard_routes(guards) == []
