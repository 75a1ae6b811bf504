"""The txn workload's section of the spec and config.json (``txn``).

Why here and not in ``harness/spec.py``: only the txn workload and what
judges its histories read these settings, so the workload declares them
(``workloads/registry.py``), as any workload would.  Every config.json holds
the section (``always``), as it did when the ground floor kept it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka_chaos.harness.option import Option, parse_bool
from kafka_chaos.harness.spec_sections import Section

NAME = "txn"


@dataclass
class TxnSpec:
    """The transactional workload (``--workload txn``); Jepsen's defaults where it has them."""

    processes: int = 4  # each owns one transactional producer and one consumer
    max_ops: int = 4  # micro-ops per transaction: 1..max_ops sends and polls
    mode: str = "mixed"  # mixed: sends and polls on one topic | ctp: consume-transform-produce
    abort_probability: float = 0.1  # a transaction the client aborts on purpose
    isolation_level: str = "read_committed"  # read_committed | read_uncommitted
    rewind: bool = True  # seek back after an aborted/unknown txn (KAFKA-17582); off to measure
    transaction_timeout_ms: int = 10000
    rate: float = 20.0  # txns/s, all processes (~100 ms commits on 2 cores: ~30/s at most)
    client_timeout_s: float = 10.0  # bound on each init/begin/commit/abort call
    # A client pause (a GC pause, a descheduled container): before commit the
    # process stalls this long, with this probability.  Longer than
    # transaction_timeout_ms, the coordinator aborts the transaction under it.
    stall_probability: float = 0.0
    stall_s: float = 0.0


def of(spec: Any) -> TxnSpec:
    """The run's txn settings (``spec``: a ``harness.spec.TestSpec``)."""
    return spec.section(NAME)


SECTION = Section(NAME, TxnSpec, always=True)

# The txn workload's run options (kafka_chaos/options.py adds a declaration's own).
OPTIONS: tuple[Option, ...] = (
    Option("--txn-processes", "txn.processes", int, "txn: transactional processes"),
    Option("--txn-max-ops", "txn.max_ops", int, "txn: micro-ops per transaction, 1..N"),
    Option("--txn-mode", "txn.mode", str, "txn: what a transaction does", ("mixed", "ctp")),
    Option("--txn-rate", "txn.rate", float, "txn: transactions per second, all processes"),
    Option("--abort-probability", "txn.abort_probability", float, "txn: aborts on purpose"),
    Option(
        "--isolation-level",
        "txn.isolation_level",
        str,
        "txn: consumer isolation.level",
        ("read_committed", "read_uncommitted"),
    ),
    Option("--rewind", "txn.rewind", parse_bool, "txn: seek back after an abort (true/false)"),
)
