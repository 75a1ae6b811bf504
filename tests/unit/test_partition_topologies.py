"""Grudge topologies, grudge validation, and iptables rule rendering/healing."""

from __future__ import annotations

import random
from itertools import combinations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.nemeses import partition

from testkit.strategies import ModelCluster, _as_listed, grudges, node_names

NODES5 = ["n1", "n2", "n3", "n4", "n5"]


def views(grudge, nodes):
    return {n: partition.view(grudge, n, nodes) for n in nodes}


def test_isolate_cuts_one_node_from_all_others():
    g = partition.isolate(NODES5, "n3")
    assert views(g, NODES5)["n3"] == {"n3"}
    for n in NODES5:
        if n != "n3":
            assert views(g, NODES5)[n] == set(NODES5) - {"n3"}


def test_isolate_unknown_target_is_rejected():
    with pytest.raises(ConfigError, match="'n9' is not one of the nodes"):
        partition.isolate(NODES5, "n9")


@pytest.mark.parametrize("n", [2, 3, 4, 5, 7])
def test_halves_is_a_minority_and_a_majority(n):
    nodes = [f"n{i}" for i in range(1, n + 1)]
    g = partition.halves(nodes)
    sizes = sorted({len(v) for v in views(g, nodes).values()})
    assert sizes == sorted({n // 2, n - n // 2})
    if n % 2:  # an odd cluster splits into a minority and a majority
        assert n - n // 2 >= partition.majority(n)
    # the two sides are disjoint and cover everyone
    minority = views(g, nodes)[nodes[0]]
    majority = views(g, nodes)[nodes[-1]]
    assert not minority & majority and minority | majority == set(nodes)


@pytest.mark.parametrize("n", [3, 4, 5, 6, 7])
def test_bridge_has_one_node_seeing_both_halves(n):
    nodes = [f"n{i}" for i in range(1, n + 1)]
    g = partition.bridge(nodes)
    v = views(g, nodes)
    hubs = [x for x in nodes if v[x] == set(nodes)]
    assert len(hubs) == 1
    others = [x for x in nodes if x not in hubs]
    left = v[others[0]] - set(hubs)
    right = set(others) - left
    assert left and right
    for a in left:
        for b in right:
            assert not partition.sees(g, a, b)


@pytest.mark.parametrize("n", [3, 4, 5, 6, 7, 8, 9])
def test_majorities_ring_each_sees_a_distinct_majority(n):
    nodes = [f"n{i}" for i in range(1, n + 1)]
    g = partition.majorities_ring(nodes)
    v = views(g, nodes)
    for node, seen in v.items():
        assert len(seen) >= partition.majority(n), (node, seen)
    assert len(set(v.values())) == n, "two nodes see the same majority"
    assert any(g.values()), "the ring must cut something"


def test_small_clusters_are_refused_with_the_reason():
    with pytest.raises(ConfigError, match="bridge needs at least 3 nodes, got 2"):
        partition.bridge(["n1", "n2"])
    with pytest.raises(ConfigError, match="majorities-ring needs at least 3"):
        partition.majorities_ring(["n1", "n2"])
    with pytest.raises(ConfigError, match="unknown partition topology 'star'"):
        partition.topology("star", NODES5, random.Random(1))


@given(nodes=node_names(min_size=3), seed=st.integers(0, 2**32))
def test_named_topologies_are_valid_grudges(nodes, seed):
    for name in partition.topologies_for(len(nodes)):
        g = partition.topology(name, nodes, random.Random(seed))
        assert partition.validate_grudge(g, nodes) == g
        assert set(g) == set(nodes)


def test_topology_depends_only_on_the_seed():
    a = partition.topology("majorities-ring", NODES5, random.Random(7))
    b = partition.topology("majorities-ring", NODES5, random.Random(7))
    assert a == b


@pytest.mark.parametrize(
    "grudge, message",
    [
        ({}, "non-empty mapping"),
        ([["n1", "n2"]], "non-empty mapping"),
        ({"n9": ["n1"]}, "unknown node 'n9'"),
        ({"n1": ["n7"]}, r"grudge\['n1'\]: unknown node 'n7'"),
        ({"n1": "n2"}, "expected a list of node names"),
        ({"n1": ["n1"]}, "cannot drop itself"),
        ({"n1": [], "n2": []}, "drops nothing"),
    ],
)
def test_bad_grudge_maps_are_named(grudge, message):
    with pytest.raises(ConfigError, match=message):
        partition.validate_grudge(grudge, NODES5)


def test_drop_rules_cover_both_directions_and_carry_the_tag():
    cmds = partition.drop_commands(["10.251.3.12"], "kafka-chaos:d1:4")
    assert cmds == [
        "iptables -w 5 -A INPUT -s 10.251.3.12 -m comment --comment kafka-chaos:d1:4 -j DROP",
        "iptables -w 5 -A OUTPUT -d 10.251.3.12 -m comment --comment kafka-chaos:d1:4 -j DROP",
    ]


# as iptables-nft prints it: comments quoted, addresses with their mask
LISTING = """-P INPUT ACCEPT
-P FORWARD ACCEPT
-P OUTPUT ACCEPT
-A INPUT -s 10.251.3.12/32 -m comment --comment "kafka-chaos:d1:1" -j DROP
-A INPUT -s 10.251.3.13/32 -m comment --comment "kafka-chaos:d1:10" -j DROP
-A INPUT -s 10.251.3.13/32 -m comment --comment "someone else's rule" -j DROP
-A OUTPUT -d 10.251.3.12/32 -m comment --comment kafka-chaos:d1:1 -j DROP
-A OUTPUT -d 10.251.3.14/32 -m comment --comment kafka-chaos:other:1 -j DROP
"""


def test_heal_deletes_exactly_one_faults_rules():
    cmds = partition.delete_commands(LISTING, partition.tag_matcher("d1", 1))
    assert cmds == [
        "iptables -w 5 -D INPUT -s 10.251.3.12/32 -m comment --comment kafka-chaos:d1:1 -j DROP",
        "iptables -w 5 -D OUTPUT -d 10.251.3.12/32 -m comment --comment kafka-chaos:d1:1 -j DROP",
    ]


def test_heal_of_a_cluster_and_of_everything():
    cluster = partition.delete_commands(LISTING, partition.tag_matcher("d1"))
    assert len(cluster) == 3 and all("kafka-chaos:d1:" in c for c in cluster)
    everything = partition.delete_commands(LISTING, partition.tag_matcher(None))
    assert len(everything) == 4
    assert not any("someone else" in c for c in everything)


def test_unsafe_cluster_names_cannot_become_tags():
    with pytest.raises(ConfigError, match="cannot be used in an iptables comment"):
        partition.tag("a b", 1)


def test_listed_form_matches_iptables_s():
    cmd = partition.drop_commands(["10.0.0.1"], "kafka-chaos:x:2")[0]
    assert _as_listed(cmd) == "-A INPUT -s 10.0.0.1/32 -m comment --comment kafka-chaos:x:2 -j DROP"


@given(nodes=node_names(min_size=2, max_size=6), data=st.data())
def test_rules_cut_exactly_the_grudge_links_and_heal_removes_them(nodes, data):
    grudge = data.draw(grudges(nodes))
    model = ModelCluster(nodes, name="m")
    from kafka_chaos.nemeses.base import FaultOp

    op = FaultOp(12, "partition", 0.0, 1.0, partition.involved(grudge), params={"grudge": grudge})
    model.start(op)
    expected = {tuple(sorted(p)) for p in combinations(nodes, 2) if not partition.sees(grudge, *p)}
    assert model.cut_links() == expected
    model.end(op)
    assert model.broken() == []
