"""Pure planning of the local backend, and the pid ownership rules teardown relies on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka_chaos.harness.backends import validate_name
from kafka_chaos.harness.backends.health import local_processes, owned_test
from kafka_chaos.harness.backends.local_plan import (
    LocalPlan,
    choose_slot,
    plan_cluster,
    slots_from_links,
    slots_from_namespaces,
    slots_from_routes,
    slots_from_states,
)
from kafka_chaos.harness.backends.local_sshd import render_sshd_config
from kafka_chaos.harness.backends.procs import mentions_root, owned_pids_from_files, terminate
from kafka_chaos.harness.backends.remote import teardown_script
from kafka_chaos.harness.errors import ConfigError, HarnessError


def test_plan_names_and_addresses() -> None:
    plan = plan_cluster("a1", 7, 5, Path("/h/clusters/a1"))
    assert (plan.subnet, plan.gateway, plan.bridge) == ("10.251.7.0/24", "10.251.7.1", "kcbr7")
    assert plan.route == "unreachable 10.251.7.0/24 metric 4000"
    assert plan.cluster_root == "/h/clusters/a1"
    assert plan.bridge_alias == "kafka-chaos:a1:/h/clusters/a1"
    n5 = plan.nodes[4]
    assert (n5.name, n5.node_id, n5.address) == ("n5", 5, "10.251.7.15")
    assert (n5.namespace, n5.veth_host, n5.veth_peer) == ("kc7-n5", "kc7v5", "kc7p5")
    assert n5.root_dir == "/h/clusters/a1/nodes/n5"
    # Linux interface names are at most 15 bytes, even in the last slot with the most nodes.
    last = plan_cluster("x", 250, 9, Path("/h"))
    assert max(len(n) for node in last.nodes for n in (node.veth_host, node.veth_peer)) <= 15


def test_plan_round_trips_through_cluster_json_state() -> None:
    plan = plan_cluster("a1", 3, 3, Path("/h/clusters/a1"))
    assert LocalPlan.from_state(plan.to_state()) == plan


@pytest.mark.parametrize(("slot", "nodes"), [(0, 3), (251, 3), (1, 0), (1, 10)])
def test_plan_rejects_out_of_range(slot: int, nodes: int) -> None:
    with pytest.raises(ConfigError):
        plan_cluster("a1", slot, nodes, Path("/h"))


def test_choose_lowest_free_slot() -> None:
    assert choose_slot([]) == 1
    assert choose_slot({1, 2, 4}) == 3
    with pytest.raises(HarnessError, match="all local cluster slots 1..250 are in use"):
        choose_slot(range(1, 251))


def test_used_slots_from_every_source() -> None:
    states = [
        {"backend": "local", "backend_state": {"slot": 4}},
        {"backend": "ssh", "backend_state": {"slot": 9}},
        {"backend": "local", "backend_state": {}},
    ]
    assert slots_from_states(states) == {4}
    assert slots_from_links(["lo", "eth0", "kcbr12", "kcbrx", "kc12v1"]) == {12}
    assert slots_from_namespaces(["kc5-n1", "kc5-n2", "kc17-n3", "other", "kcx-n1"]) == {5, 17}
    routes = [
        "10.251.3.0/24 dev kcbr3 proto kernel scope link src 10.251.3.1",
        "unreachable 10.251.8.0/24 metric 4000",
        "10.2.51.0/24 dev x",
        "10.251.9.128/25 dev y",
    ]
    assert slots_from_routes(routes) == {3, 8}


def test_sshd_config_confines_the_daemon_to_the_node() -> None:
    node = plan_cluster("a1", 2, 3, Path("/h/clusters/a1")).nodes[1]
    text = render_sshd_config(node, "/h/clusters/a1/authorized_keys")
    lines = set(text.splitlines())
    for line in (
        "ListenAddress 10.251.2.12",
        "PidFile /h/clusters/a1/nodes/n2/run/sshd.pid",
        "HostKey /h/clusters/a1/nodes/n2/config/ssh_host_ed25519_key",
        "AuthorizedKeysFile /h/clusters/a1/authorized_keys",
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "UsePAM no",
        "StrictModes no",
    ):
        assert line in lines


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("a1", True),
        ("my-cluster_2", True),
        ("", False),
        ("a b", False),
        ("../x", False),
        ("-x", False),
        ("x" * 33, False),
        ("clusters", False),
    ],
)
def test_cluster_names(name: str, ok: bool) -> None:
    if ok:
        validate_name(name)
    else:
        with pytest.raises(ConfigError):
            validate_name(name)


def test_root_matching_uses_whole_path_components() -> None:
    root = "/h/clusters/a1/nodes/n1"
    assert mentions_root(["java", f"-Dkafka.chaos.root={root}"], root)
    assert mentions_root(["sshd", "-f", f"{root}/config/sshd_config"], root)
    assert mentions_root(["x", root], root)
    assert not mentions_root(["java", f"-Dkafka.chaos.root={root}0"], root)
    assert not mentions_root(["sshd", "-f", "/h/clusters/a10/nodes/n1/config"], "/h/clusters/a1")


def _sleeper(arg: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", arg])


def test_pid_files_only_yield_processes_naming_the_root(tmp_path: Path) -> None:
    root = tmp_path / "n1"
    (root / "run").mkdir(parents=True)
    ours, other = _sleeper(f"-Dkafka.chaos.root={root}"), _sleeper(f"-Dkafka.chaos.root={root}0")
    try:
        (root / "run" / "kafka.pid").write_text(f"{ours.pid}\n")
        (root / "run" / "reused.pid").write_text(f"{other.pid}\n")
        (root / "run" / "garbage.pid").write_text("not a pid\n")
        time.sleep(0.3)
        assert set(owned_pids_from_files(root / "run", str(root))) == {ours.pid}
        states = {s.name: s.alive for s in local_processes(str(root))}
        assert states == {"kafka": True, "reused": False, "garbage": False}
        # the shell twin used on remote hosts agrees
        for proc, expect in ((ours, 0), (other, 1)):
            cond = owned_test(str(root), str(proc.pid))
            assert subprocess.run(["bash", "-c", cond]).returncode == expect
    finally:
        for p in (ours, other):
            p.kill()
            p.wait()


def test_terminate_resumes_a_paused_process_then_ends_it() -> None:
    proc = _sleeper("paused")
    try:
        os.kill(proc.pid, signal.SIGSTOP)
        started = time.monotonic()
        killed = terminate([proc.pid], grace_s=5)
        assert killed == []  # SIGCONT let SIGTERM work: no SIGKILL needed
        assert proc.wait(timeout=5) == -signal.SIGTERM
        assert time.monotonic() - started < 5
    finally:
        proc.kill()


def test_terminate_kills_what_ignores_sigterm() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print(1, flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    proc.stdout.readline()
    assert terminate([proc.pid], grace_s=0.5) == [proc.pid]
    assert proc.wait(timeout=5) == -signal.SIGKILL


def test_remote_teardown_script_stops_ours_and_removes_root_only(tmp_path: Path) -> None:
    root = tmp_path / "kafka-chaos" / "c1"
    (root / "run").mkdir(parents=True)
    ours, other = _sleeper(f"-Dkafka.chaos.root={root}"), _sleeper("unrelated")
    try:
        (root / "run" / "kafka.pid").write_text(f"{ours.pid}\n")
        (root / "run" / "stale.pid").write_text(f"{other.pid}\n")  # pid reused by someone else
        time.sleep(0.3)
        os.kill(ours.pid, signal.SIGSTOP)
        out = subprocess.run(
            ["bash", "-c", teardown_script(str(root))], capture_output=True, text=True, timeout=30
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == f"stopped: {ours.pid}"
        assert ours.wait(timeout=5) == -signal.SIGTERM
        assert other.poll() is None
        assert not root.exists() and root.parent.exists()
    finally:
        for p in (ours, other):
            p.kill()
            p.wait()


def test_facade_rejects_bad_specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_chaos.harness import backends
    from kafka_chaos.harness.spec import ClusterSpec

    monkeypatch.setenv("KAFKA_CHAOS_HOME", str(tmp_path))
    with pytest.raises(ConfigError, match="unknown backend 'docker'"):
        backends.create_cluster(ClusterSpec(name="u1", backend="docker"))
    (tmp_path / "clusters" / "u1").mkdir(parents=True)
    (tmp_path / "clusters" / "u1" / "cluster.json").write_text("{}")
    with pytest.raises(HarnessError, match="cluster 'u1' already exists"):
        backends.create_cluster(ClusterSpec(name="u1"))
    with pytest.raises(ConfigError, match="needs an inventory"):
        backends.create_cluster(ClusterSpec(name="u2", backend="ssh"))
    with pytest.raises(ConfigError, match="no Vagrantfile there"):
        backends.create_cluster(
            ClusterSpec(name="u3", backend="vagrant", vagrant_dir=str(tmp_path))
        )
    assert backends.list_clusters() == ["u1"]


def test_local_backend_names_missing_root() -> None:
    """Run as an unprivileged user: the error says root is needed, before touching anything."""
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to an unprivileged user")
    code = (
        "from kafka_chaos.harness.backends.local import check_prerequisites\n"
        "try:\n    check_prerequisites()\n"
        "except Exception as e:\n    print(type(e).__name__, e)\n"
    )
    out = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert out.stdout.startswith("PrivilegeError the local backend needs root"), out.stderr
