"""`cluster down` after the harness was SIGKILLed during `vagrant up` leaves nothing.

The harness dies, its `vagrant up` child lives on (as it would in real life:
SIGKILL reaches only the harness), libvirt already holds a domain, volumes
and networks of the cluster.  `cluster down` must stop that vagrant process
and remove every libvirt object of the cluster.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from conftest import cluster_down
from kafka_chaos.harness.backends import libvirt_host
from kafka_chaos.harness.cluster import cluster_dir

NAME = "kc-vm-kill"
DOMAIN_WAIT_S = 1800.0


def test_cluster_down_after_sigkill_during_vagrant_up_leaves_nothing() -> None:
    names = libvirt_host.cluster_names(NAME)
    env = {**os.environ, "KC_SUBNET": "192.168.58", "KC_MGMT_SUBNET": "192.168.123"}
    harness = subprocess.Popen(
        [sys.executable, "-m", "kafka_chaos.cli", "cluster", "up", "--backend", "vagrant",
         "--name", NAME, "--nodes", "1", "--no-kafka"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + DOMAIN_WAIT_S
        while not libvirt_host.leftovers(names)["domains"]:
            assert harness.poll() is None, "cluster up ended before a domain existed"
            assert time.monotonic() < deadline, "no libvirt domain within the wait"
            time.sleep(1.0)
        record = (cluster_dir(NAME) / "vagrant.pid").read_text().split()
        vagrant_pid = int(record[0])
    finally:
        harness.send_signal(signal.SIGKILL)
        harness.wait(30)
    assert os.path.exists(f"/proc/{vagrant_pid}"), "vagrant up should outlive the harness"
    cluster_down(NAME)
    assert not os.path.exists(f"/proc/{vagrant_pid}") or _zombie(vagrant_pid)
    assert libvirt_host.leftovers(names) == {"domains": [], "volumes": [], "networks": []}
    assert not cluster_dir(NAME).exists()
    routes = subprocess.run(["ip", "route"], capture_output=True, text=True).stdout
    assert "192.168.58.0/23" not in routes and "192.168.122.0/23" not in routes, routes


def _zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "Z"
