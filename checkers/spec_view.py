"""The run settings the checks depend on, typed, with the defaults of harness/spec.py.

Why: a check's verdict depends on the run (a duplicate breaks a promise only
when the producer made it), and the checkers used to read the config as
nested dicts, restating defaults such as ``read_committed`` in several
files.  Here the config is read once, as a run reads it (``TestSpec``), and
every check asks this view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.workloads import registry, txn_spec

# The workloads' own sections of a config (``txn``, ``mirror``) load once their
# declarations are read: ``registry`` declares them when imported.
_DECLARED = registry


@dataclass(frozen=True)
class CheckedSpec:
    """A run's ``TestSpec`` plus the facts the checks derive from it."""

    spec: TestSpec
    # Whether the config names faults.  Not a default: a config without a
    # nemesis section (a bare history's) planned none, as far as it says.
    faults_planned: bool

    @classmethod
    def of(cls, config: dict[str, Any]) -> CheckedSpec:
        """The view of a config.json dict; missing sections take the run defaults."""
        sections = {k: v for k, v in config.items() if v is not None}
        faults = bool((config.get("nemesis") or {}).get("faults"))
        return cls(TestSpec.from_dict(sections), faults)

    @property
    def workload(self) -> str:
        return self.spec.workload

    @property
    def share(self) -> bool:
        """Share-group consumers (KIP-932)."""
        return self.spec.consumer.mode == "share"

    @property
    def ctp(self) -> bool:
        """The transactional workload's consume-transform-produce mode."""
        return txn_spec.of(self.spec).mode == "ctp"

    @property
    def read_committed(self) -> bool:
        """Whether the workload's consumers promised committed data only."""
        return txn_spec.of(self.spec).isolation_level == "read_committed"

    @property
    def idempotent(self) -> bool:
        """Whether the producer promised each send is written once and in order."""
        producer = self.spec.producer
        return bool(producer.enable_idempotence) and str(producer.acks) in ("all", "-1")

    @property
    def acks(self) -> str:
        return str(self.spec.producer.acks)

    @property
    def producer_client(self) -> str:
        """Whose producer sent: ``librdkafka`` or ``java``; their idempotence promises differ."""
        return str(self.spec.producer.client)

    @property
    def unclean(self) -> bool:
        """Whether the topic let an out-of-sync replica become leader.

        The harness always sets the topic-level ``unclean.leader.election.enable``
        (``harness.admin.topic_config``: ``topic.unclean_leader_election``, unless
        ``topic.config`` names it), and a topic's setting overrides the broker's
        default, so a broker-level value in ``cluster.broker_config`` never decides.
        """
        topic = self.spec.topic
        value = topic.config.get("unclean.leader.election.enable", topic.unclean_leader_election)
        return str(value).strip().lower() == "true"

    @property
    def durable(self) -> bool:
        """Whether Kafka promised that an acknowledged record survives a leader's failure:
        only with acks=all, and only while no out-of-sync replica may be elected (the
        acks doc allows loss with acks=1 and 0; unclean election "may result in data loss")."""
        return self.acks in ("all", "-1") and not self.unclean

    @property
    def ww_deps(self) -> bool:
        """Whether the cycle search infers ww edges (off: Jepsen's --no-ww-deps)."""
        return bool(self.spec.checker.ww_deps)
