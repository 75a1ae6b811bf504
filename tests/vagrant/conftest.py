"""Real VMs: one 3-node vagrant cluster (libvirt) per session, ``kc-vm``.

Run with ``./test.sh --vagrant``: it installs Vagrant, libvirt and QEMU and
builds the box first.  These tests are kept out of ``./test.sh`` (and CI)
because a software-emulated cluster takes long to boot; the README gives the
measured times.  The cluster is brought up and torn down through the CLI,
exactly as a user would.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from _cli import kafka_chaos  # noqa: E402
from kafka_chaos.harness.cluster import Cluster  # noqa: E402

VM_CLUSTER = "kc-vm"
UP_TIMEOUT_S = 3600.0
DOWN_TIMEOUT_S = 900.0


def cluster_down(name: str) -> None:
    proc = kafka_chaos("cluster", "down", "--name", name, timeout=DOWN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]


@pytest.fixture(scope="session")
def vm_cluster() -> Iterator[Cluster]:
    """Three Debian VMs running Kafka (KRaft, newest version), through `cluster up`."""
    proc = kafka_chaos(
        "cluster", "up", "--backend", "vagrant", "--name", VM_CLUSTER, "--nodes", "3",
        timeout=UP_TIMEOUT_S,
    )  # fmt: skip
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr[-5000:]
        cluster = Cluster.load(VM_CLUSTER)
        yield cluster
        cluster.close()
    finally:
        cluster_down(VM_CLUSTER)
