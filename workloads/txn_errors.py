"""What a transactional client does with each error, and what it proves.

A transaction's outcome goes into the history as ``ok`` (committed),
``fail`` (definitely not committed) or ``info`` (unknown).  A checker treats
``fail`` as proof that none of its sends is visible to ``read_committed``
readers, so ``fail`` needs a reason why Kafka cannot have committed it, and
every doubt is ``info``.  Jepsen's Kafka client settled the rules:

* **commit timed out, or its response was lost**: the EndTxn may have been
  written, so the outcome is unknown (``info``), and no abort is sent, since
  an abort after a commit that did land would be a second, conflicting
  EndTxn;
* **abortable** (librdkafka sets ``txn_requires_abort``: a send failed, the
  transaction timed out on the broker, ...): abort; if the abort succeeds the
  transaction is definitely aborted (``fail``), if the abort fails too it is
  ``info``;
* **fatal** (fenced, out of order sequence, authorization, ...): the producer
  cannot be used again, so the client is torn down and a new one starts
  under a new process number.  A fatal error *before* commit was called is
  ``fail``: this client never sent EndTxn(commit).  At commit it is ``info``.

librdkafka marks each error it raises from the transactional API as fatal,
retriable or abortable; those flags come first (``decide``), and the code
tables below say what an error of each code means when librdkafka leaves
the flags unset (and are what the unit tests pin down, code by code).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from confluent_kafka import KafkaError, KafkaException
from kafka_chaos.workloads.delivery_errors import error_name


class Action(Enum):
    """What the client does next."""

    ABORT = "abort"  # abort the transaction, then carry on with this client
    GIVE_UP = "give up"  # record the outcome, no abort; rebuild the client (state unknown)
    TEAR_DOWN = "tear down"  # fatal: record, crash this client, start a new one


@dataclass(frozen=True)
class Decision:
    action: Action
    outcome: str  # the txn's type if we stop here: "fail" or "info" (after ABORT: see abort)
    why: str


# Before commit: the transaction cannot have committed (no EndTxn(commit) was
# sent), whatever the error.  These codes are fatal to the producer.
FATAL: dict[int, str] = {
    KafkaError._FENCED: "another producer with our transactional.id fenced us",
    KafkaError.PRODUCER_FENCED: "another producer with our transactional.id fenced us",
    KafkaError.INVALID_PRODUCER_EPOCH: "our epoch is stale: a newer producer took over",
    KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER: "the broker lost track of our sequence numbers",
    KafkaError.UNKNOWN_PRODUCER_ID: "the broker no longer knows our producer id",
    KafkaError.INVALID_PRODUCER_ID_MAPPING: "the coordinator has no mapping for our id",
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "not authorised for this transactional.id",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "not authorised for idempotent writes",
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "not authorised for a topic",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "not authorised to commit the group's offsets",
    KafkaError.INVALID_TRANSACTION_TIMEOUT: "transaction.timeout.ms refused by the broker",
    KafkaError.UNSUPPORTED_VERSION: "the broker does not support transactions",
    KafkaError.TRANSACTION_COORDINATOR_FENCED: "the coordinator itself was fenced",
    KafkaError._FATAL: "librdkafka raised a fatal error",
    KafkaError._INCONSISTENT: "client state inconsistent",
}

# A request whose response never came, or a coordinator that moved while it
# was being handled: the broker may have acted on it.
UNKNOWN_OUTCOME: dict[int, str] = {
    KafkaError._TIMED_OUT: "no response in time; the coordinator may have written EndTxn",
    KafkaError._TIMED_OUT_QUEUE: "timed out in the queue; an earlier attempt may have landed",
    KafkaError.REQUEST_TIMED_OUT: "the broker timed out; it may still apply the request",
    KafkaError._TRANSPORT: "the connection broke with the request possibly delivered",
    KafkaError.NETWORK_EXCEPTION: "the connection broke with the request possibly delivered",
    KafkaError._ALL_BROKERS_DOWN: "no broker reachable; earlier attempts unknown",
    KafkaError.NOT_COORDINATOR: "the coordinator moved; it may have written EndTxn first",
    KafkaError.COORDINATOR_NOT_AVAILABLE: "the coordinator is gone; EndTxn may be written",
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS: "a new coordinator is loading the txn log",
    KafkaError.CONCURRENT_TRANSACTIONS: "the previous EndTxn is still being completed",
    KafkaError._WAIT_COORD: "waiting for a coordinator; the request may have been sent",
    KafkaError._DESTROY: "client destroyed with the request outstanding",
    KafkaError._PREV_IN_PROGRESS: "a previous commit or abort call is still running",
    KafkaError._STATE: "the producer is in an unexpected transactional state",
    KafkaError.INVALID_TXN_STATE: "the coordinator refused the transition; state unknown",
    KafkaError.UNKNOWN: "unexpected server error; outcome unknown",
}

# Abortable: the transaction failed before commit and must be aborted;
# librdkafka refuses to commit it.
ABORTABLE: dict[int, str] = {
    KafkaError.TRANSACTION_ABORTABLE: "the broker asks the producer to abort",
    KafkaError._MSG_TIMED_OUT: "a send timed out; the transaction cannot commit",
    KafkaError.NOT_ENOUGH_REPLICAS: "a send was refused; the transaction cannot commit",
    KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND: "a send was not replicated in time",
    KafkaError.MSG_SIZE_TOO_LARGE: "a send was refused; the transaction cannot commit",
    KafkaError._PURGE_QUEUE: "sends were purged; the transaction cannot commit",
    KafkaError._PURGE_INFLIGHT: "sends were purged; the transaction cannot commit",
    KafkaError.ILLEGAL_GENERATION: "offsets refused: stale group generation",
    KafkaError.UNKNOWN_MEMBER_ID: "offsets refused: not a group member",
    KafkaError.FENCED_INSTANCE_ID: "offsets refused: static member fenced",
    KafkaError.REBALANCE_IN_PROGRESS: "offsets refused: the group is rebalancing",
}

STAGES = ("init", "begin", "send", "poll", "offsets", "commit", "abort")


def code_of(error: KafkaError | KafkaException | int) -> tuple[int, KafkaError | None]:
    if isinstance(error, KafkaException):
        error = error.args[0] if error.args and isinstance(error.args[0], KafkaError) else -1
    if isinstance(error, KafkaError):
        return error.code(), error
    return int(error), None


def decide(error: KafkaError | KafkaException | int, stage: str) -> Decision:
    """What to do about ``error`` raised at ``stage``, and the outcome it implies.

    After ``Action.ABORT`` the outcome depends on the abort: ``fail`` if it
    succeeds, ``info`` if it does not (``decide(err, "abort")``).
    """
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}")
    code, err = code_of(error)
    name = error_name(err if err is not None else code)
    fatal = code in FATAL or (err is not None and err.fatal())
    abortable = code in ABORTABLE or (err is not None and err.txn_requires_abort())
    committing = stage == "commit"
    if stage == "abort":
        # The abort failed: the EndTxn(abort) may not have landed, and the
        # broker-side state of an earlier commit attempt (if any) is unknown.
        why = FATAL.get(code) or UNKNOWN_OUTCOME.get(code) or "the abort failed"
        return Decision(Action.TEAR_DOWN if fatal else Action.GIVE_UP, "info", f"{name}: {why}")
    if fatal and not (abortable and err is not None and err.txn_requires_abort()):
        outcome = "info" if committing else "fail"
        return Decision(Action.TEAR_DOWN, outcome, f"{name}: {FATAL.get(code, 'fatal error')}")
    if abortable:
        return Decision(Action.ABORT, "fail", f"{name}: {ABORTABLE.get(code, 'abortable error')}")
    if committing or code in UNKNOWN_OUTCOME:
        why = UNKNOWN_OUTCOME.get(code, "unrecognised error; outcome unknown")
        # No abort: the commit may have landed.  Before commit nothing can
        # have committed, so the outcome is definite even when unclear why.
        outcome = "info" if committing else "fail"
        return Decision(Action.GIVE_UP, outcome, f"{name}: {why}")
    return Decision(Action.GIVE_UP, "fail", f"{name}: error before commit")
