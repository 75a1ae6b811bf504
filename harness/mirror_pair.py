"""The disaster-recovery pair: the run's cluster (dc1), a second cluster (dc2), a MirrorMaker node.

A run's cluster ``C`` is dc1.  dc2 is an ordinary kafka-chaos cluster named
``C-dc2``; MirrorMaker runs on ``C-mm``, a one-node cluster without Kafka.
On the local backend the MirrorMaker node gets a leg on each data centre's
bridge (``local.add_leg``): it is the one link between them, as a WAN link
is, and dc1's brokers never talk to dc2's.  ``cluster down --name C``
removes all three (``destroy``), even after a SIGKILL.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from dataclasses import dataclass

from kafka_chaos.harness import kafka_db
from kafka_chaos.harness.backends import (
    create_cluster,
    destroy_cluster,
    load_cluster,
    why_not_reusable,
)
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.mirror_maker import Endpoints
from kafka_chaos.harness.node import Node
from kafka_chaos.harness.spec import ClusterSpec

log = logging.getLogger(__name__)


def dc2_name(dc1: str) -> str:
    return f"{dc1}-dc2"


def mm_name(dc1: str) -> str:
    return f"{dc1}-mm"


@dataclass
class MirrorPair:
    dc1: Cluster
    dc2: Cluster
    mm: Cluster
    endpoints: Endpoints  # the brokers as the MirrorMaker node reaches them

    @property
    def mm_node(self) -> Node:
        return self.mm.nodes[0]

    def close(self) -> None:
        self.dc2.close()
        self.mm.close()


def dc2_spec(dc1: ClusterSpec, dc2_nodes: int) -> ClusterSpec:
    return dataclasses.replace(dc1, name=dc2_name(dc1.name), nodes=dc2_nodes)


def _mm_spec(dc1: ClusterSpec) -> ClusterSpec:
    return dataclasses.replace(dc1, name=mm_name(dc1.name), nodes=1)


def _ensure(want: ClusterSpec, with_kafka: bool) -> Cluster:
    """Reuse a cluster of this shape whose nodes answer, else (re)create it."""
    try:
        cluster = load_cluster(want.name)
    except HarnessError:
        cluster = None
    if cluster is not None and why_not_reusable(cluster, want):
        log.info("recreating %s: %s", want.name, why_not_reusable(cluster, want))
        with contextlib.suppress(Exception):
            kafka_db.stop_cluster(cluster)
        destroy_cluster(want.name)
        cluster = None
    if cluster is None:
        log.info("creating %s cluster %r (%d nodes)", want.backend, want.name, want.nodes)
        cluster = create_cluster(want)
    if with_kafka:
        kafka_db.start_cluster(cluster, want)
    return cluster


def ensure(dc1: Cluster, spec: ClusterSpec, dc2_nodes: int) -> MirrorPair:
    """dc2 (``dc2_nodes`` brokers, otherwise as ``spec``, dc1's) with Kafka up, the
    MirrorMaker node, and the links between them."""
    dc2 = _ensure(dc2_spec(spec, dc2_nodes), with_kafka=True)
    mm = _ensure(_mm_spec(spec), with_kafka=False)
    if mm.backend == "local":
        from kafka_chaos.harness.backends import local

        a1 = local.add_leg(mm, dc1)
        a2 = local.add_leg(mm, dc2)
        log.info("MirrorMaker node %s reaches dc1 as %s, dc2 as %s", mm.name, a1, a2)
    ends = Endpoints(dc1=[n.address for n in dc1.nodes], dc2=[n.address for n in dc2.nodes])
    return MirrorPair(dc1, dc2, mm, ends)


def destroy(dc1: str) -> list[str]:
    """Remove dc2 and the MirrorMaker node of ``dc1``'s pair, whatever exists of them."""
    removed = []
    for name in (mm_name(dc1), dc2_name(dc1)):
        with contextlib.suppress(HarnessError):
            cluster = load_cluster(name)
            with contextlib.suppress(Exception):
                kafka_db.stop_cluster(cluster)
            cluster.close()
        removed += destroy_cluster(name)
    return removed
