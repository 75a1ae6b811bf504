"""The classic acknowledged-loss sequence as one scripted fault.

Kafka loses acknowledged writes when the ISR shrinks to the leader, the
leader acknowledges writes alone, and then an out-of-sync follower is
elected.  This fault drives exactly that, on any version and mode:

1. Resolve the leader L of the target partition.
2. Drop, on L, traffic from the other brokers to L's broker port.  The
   followers can no longer fetch, but L can still reach the controller (the
   KRaft quorum port, ZooKeeper, or the ZK-mode controller's broker port via
   L's own outbound connections) and clients still reach L.  After
   ``replica.lag.time.max.ms`` L shrinks the ISR to itself.
3. Keep L alone for ``alone_s``: with min.insync.replicas=1 it acknowledges
   writes that exist nowhere else.
4. SIGKILL L.  With unclean election enabled the controller now elects a
   stale follower; with it disabled the partition stays offline.
5. At the fault's end: remove the rules and restart L, which truncates its
   log to the new leader's.  A copy of L's log, taken while it was down,
   keeps the truncated tail for replica verification (harness.log_copies).

What happened (when the ISR shrank, who was elected) is recorded in the
fault's ``resolved`` details, so the report can explain the mechanism.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any

from kafka_chaos.harness.cluster import BROKER_PORT, Cluster
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.fan_out import on_nodes
from kafka_chaos.harness.log_copies import copy_before_rejoin
from kafka_chaos.harness.node import Node
from kafka_chaos.nemeses import partition, process
from kafka_chaos.nemeses.base import FAULT_STEP_TIMEOUT_S, NEMESIS_COMMAND_TIMEOUT_S, FaultOp
from kafka_chaos.nemeses.kinds import Ctx, FaultKind, Model, Params

log = logging.getLogger(__name__)

ADMIN_TIMEOUT_S = 10.0
DEFAULTS = {"alone_s": 8.0, "isr_timeout_s": 40.0, "election_timeout_s": 30.0}


def fetch_block_commands(peer_addresses: list[str], rule_tag: str) -> list[str]:
    """``iptables -A`` commands on the leader that stop peers' fetches, and nothing else."""
    return [
        f"{partition.IPTABLES} -A INPUT -s {addr} -p tcp --dport {BROKER_PORT} "
        f"-m comment --comment {rule_tag} -j DROP"
        for addr in peer_addresses
    ]


def apply(cluster: Cluster, op: FaultOp, topic: str) -> None:
    """Steps 1-4; details go into ``op.resolved`` as they happen."""
    params = {**DEFAULTS, **op.params}
    # Bounds on waits for brokers that run slower on slow guests (the election
    # follows the broker session timeout, which scales: kafka_config).
    for wait in ("isr_timeout_s", "election_timeout_s"):
        params[wait] = float(params[wait]) * cluster.time_scale
    part = int(params.get("partition", 0))
    leader = cluster.node(op.targets[0])
    details = op.resolved if op.resolved is not None else {}
    op.resolved = details
    peers = [n.address for n in cluster.nodes if n is not leader]
    rule_tag = partition.tag(cluster.name, op.id)
    install = partition.install_once(fetch_block_commands(peers, rule_tag), rule_tag)
    leader.run(install, timeout=NEMESIS_COMMAND_TIMEOUT_S)  # retried by Node.run if SSH fails
    start = time.monotonic()
    isr = _wait_for(
        lambda s: s is not None and list(s.isr) == [leader.node_id],
        cluster,
        topic,
        part,
        params["isr_timeout_s"],
    )
    details["isr_shrunk_to_leader"] = isr is not None
    details["isr_shrink_s"] = round(time.monotonic() - start, 2)
    if isr is None:
        log.warning("unclean-election: ISR of %s-%d never shrank to %s", topic, part, leader.name)
    time.sleep(float(params["alone_s"]))
    process.kill(cluster, leader)
    details["killed"] = leader.name
    killed_at = time.monotonic()
    _keep_log_copy(leader, topic, op.id, details)
    after = _wait_for(
        lambda s: s is not None and s.leader not in (None, -1, leader.node_id),
        cluster,
        topic,
        part,
        params["election_timeout_s"],
    )
    details["elected"] = None if after is None else cluster.node(after.leader).name
    details["elected_isr"] = None if after is None else list(after.isr)
    details["election_s"] = round(time.monotonic() - killed_at, 2)
    log.info("unclean-election on %s-%d: %s", topic, part, details)


def _keep_log_copy(leader: Node, topic: str, fault_id: int, details: dict[str, Any]) -> None:
    """Copy the dead leader's log: its rejoin truncates the tail that replica verification shows."""
    try:
        details["log_copy"] = copy_before_rejoin(leader, topic, fault_id)
    except HarnessError as e:  # evidence only: the fault itself goes on
        log.warning("unclean-election: copying %s's log failed: %s", leader.name, e)
        details["log_copy_error"] = str(e)


def heal(cluster: Cluster, op: FaultOp) -> dict[str, Any]:
    """Remove the fetch block and restart the killed leader."""
    removed = partition.heal(cluster, partition.tag_matcher(cluster.name, op.id))
    on_nodes(
        [cluster.node(t) for t in op.targets],
        lambda n: process.ensure_running(cluster, n),
        timeout_s=FAULT_STEP_TIMEOUT_S,
        what="restarting the killed leader",
    ).values()
    return {"rules_removed": removed}


def _wait_for(predicate: Any, cluster: Cluster, topic: str, part: int, timeout_s: float) -> Any:
    """Poll the partition's state until ``predicate`` holds; None on timeout."""
    from kafka_chaos.harness import admin

    deadline = time.monotonic() + float(timeout_s)
    while time.monotonic() < deadline:
        state = _partition_state(admin, cluster, topic, part)
        if predicate(state):
            return state
        time.sleep(1.0)
    return None


def _partition_state(admin: Any, cluster: Cluster, topic: str, part: int) -> Any:
    try:
        states = admin.describe_topics(
            cluster.bootstrap_servers(), [topic], timeout_s=ADMIN_TIMEOUT_S
        )
    except Exception as e:  # a killed broker makes some metadata calls fail; keep asking
        log.debug("describe %s failed: %s", topic, e)
        return None
    return next((s for s in states if s.partition == part), None)


class UncleanElection(FaultKind):
    """The sequence above; what it leaves (tagged rules, a dead leader) the
    partition and process sweeps undo."""

    summary = (
        "The classic acknowledged-loss sequence, scripted: the ISR shrinks to the leader,"
        " it acknowledges alone, it is killed and a stale follower is elected (with "
        "unclean election on)."
    )

    name = "unclean-election"
    targetable = True
    sweeps = (partition.RULES_SWEEP, process.STOPPED_SWEEP)

    def targeted_params(self, rng: random.Random, ctx: Ctx) -> Params:
        # the scripted fault watches this partition's ISR
        return {"partition": 0} if ctx.targets == "leader" else {}

    def apply(self, cluster: Cluster, op: FaultOp, nodes: list[Node], topic: str | None) -> None:
        apply(cluster, op, op.params.get("topic") or topic)

    def heal(self, cluster: Cluster, op: FaultOp, nodes: list[Node]) -> dict[str, Any] | None:
        return heal(cluster, op)

    def model_start(self, model: Model, op: FaultOp) -> None:
        leader = op.targets[0]
        peers = [model.address(n) for n in model.names if n != leader]
        model.add_rules(leader, fetch_block_commands(peers, partition.tag(model.name, op.id)))
        model.mark([leader], "down")

    def model_end(self, model: Model, op: FaultOp) -> None:
        model.delete_rules(partition.tag_matcher(model.name, op.id))
        model.unmark(op.targets[:1], "down")
