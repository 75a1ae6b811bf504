"""Partition rules on a real iptables, in a throwaway network namespace.

Installing is one iptables-restore transaction guarded by the fault's tag
(``install_once``), so repeating it after a lost transport adds nothing; a
heal removes exactly one fault's rules, even beside a fault whose id shares
its prefix (1 and 10).
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator

import pytest
from kafka_chaos.nemeses import partition

CLUSTER = "kc.t1"


@pytest.fixture
def netns() -> Iterator[str]:
    name = f"kc-rules-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=True)


def _sh(netns: str, command: str) -> str:
    return subprocess.run(
        ["ip", "netns", "exec", netns, "sh", "-c", command],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip


def _install(netns: str, fault_id: int, peers: list[str]) -> None:
    tag = partition.tag(CLUSTER, fault_id)
    _sh(netns, partition.install_once(partition.drop_commands(peers, tag), tag))


def _rules(netns: str) -> list[str]:
    return [r for r in _sh(netns, "iptables -S").splitlines() if r.startswith("-A ")]


def test_install_once_adds_every_rule_once_and_heal_removes_one_faults(netns: str) -> None:
    _install(netns, 1, ["10.9.9.9", "10.9.9.8"])
    _install(netns, 1, ["10.9.9.9", "10.9.9.8"])  # a repeat after a lost transport
    assert len(_rules(netns)) == 4
    _install(netns, 10, ["10.9.9.7"])  # tag ...:10 is not ...:1
    assert len(_rules(netns)) == 6
    listing = _sh(netns, "iptables -S")
    deletions = partition.delete_commands(listing, partition.tag_matcher(CLUSTER, 1))
    assert len(deletions) == 4
    _sh(netns, partition.restore_command(deletions))
    left = _rules(netns)
    assert len(left) == 2 and all(f'"{partition.tag(CLUSTER, 10)}"' in r for r in left), left
