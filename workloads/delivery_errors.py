"""Is a failed send definitely unwritten (``fail``) or of unknown outcome (``info``)?

A checker treats a ``fail`` as proof that the value is not in the log: if a
consumer later reads it, that is an anomaly (Jepsen's G1a).  So ``fail`` is
only for errors where Kafka guarantees the record was never appended, and
everything else - including every code we do not know - is ``info``.

Two facts shape the tables:

* librdkafka reports only the error of the *last* attempt.  With retries an
  earlier attempt may have timed out after the leader appended the batch, so a
  retriable "rejected before append" error (``NOT_ENOUGH_REPLICAS``,
  ``NOT_LEADER_FOR_PARTITION``, ...) proves nothing about that earlier
  attempt.  Such codes are definite only when the producer makes a single
  attempt (``retries=0`` and no idempotence).
* Deterministic rejections (size, corruption, authorization, ...) would have
  rejected every attempt identically, so they are definite even with retries.
  This assumes topic configs and ACLs do not change during a test.

confluent-kafka does not expose librdkafka's per-message persistence status,
so the code is all we have.
"""

from __future__ import annotations

from confluent_kafka import KafkaError

DEFINITE = "fail"
INDETERMINATE = "info"

# Rejected identically on every attempt, or never handed to the network.
ALWAYS_DEFINITE: dict[int, str] = {
    # produce() raised BufferError: the local queue was full, never enqueued.
    KafkaError._QUEUE_FULL: "local queue full; never enqueued",
    # librdkafka checks message.max.bytes locally with this same code, and the
    # broker before append; the size never changes between attempts.
    KafkaError.MSG_SIZE_TOO_LARGE: "broker rejects oversize batches before append",
    KafkaError.RECORD_LIST_TOO_LARGE: "broker rejects oversize batches before append",
    KafkaError.INVALID_MSG_SIZE: "broker rejects the request before append",
    # CRC / record validation happens before the batch reaches the log.
    KafkaError.INVALID_MSG: "corrupt batch (CRC) rejected during validation, before append",
    KafkaError.INVALID_RECORD: "record failed broker validation, before append",
    KafkaError.INVALID_TIMESTAMP: "timestamp validation precedes append",
    KafkaError.UNSUPPORTED_FOR_MESSAGE_FORMAT: "format check precedes append",
    KafkaError.UNSUPPORTED_COMPRESSION_TYPE: "compression check precedes append",
    KafkaError.INVALID_REQUIRED_ACKS: "the acks value is rejected before any append",
    KafkaError.POLICY_VIOLATION: "policy is checked before append",
    # Authorization is checked before the request touches the log.
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "ACL check precedes append",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "ACL check (idempotent write) precedes append",
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "ACL check precedes append",
    # Errors raised inside the client before a request is built.
    KafkaError._INVALID_ARG: "rejected by produce(); never enqueued",
    KafkaError._KEY_SERIALIZATION: "serialization failed; never enqueued",
    KafkaError._VALUE_SERIALIZATION: "serialization failed; never enqueued",
    KafkaError._UNKNOWN_PARTITION: "partition absent from metadata; never sent",
}

# The broker refused this attempt before appending, but with retries an
# earlier attempt of the same message may have been appended.
DEFINITE_IF_SINGLE_ATTEMPT: dict[int, str] = {
    KafkaError.NOT_ENOUGH_REPLICAS: "ISR below min.insync.replicas, checked before append",
    KafkaError.NOT_LEADER_FOR_PARTITION: "not the leader; the request is refused",
    KafkaError.LEADER_NOT_AVAILABLE: "no leader to append",
    KafkaError.UNKNOWN_TOPIC_OR_PART: "broker does not host the partition",
    KafkaError._UNKNOWN_TOPIC: "topic absent from metadata",
    KafkaError.FENCED_LEADER_EPOCH: "stale leader epoch; refused",
    KafkaError.UNKNOWN_LEADER_EPOCH: "leader epoch unknown; refused",
    KafkaError.REPLICA_NOT_AVAILABLE: "replica not available; refused",
    KafkaError.BROKER_NOT_AVAILABLE: "broker not available; refused",
    KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER: "sequence check refuses the batch",
    KafkaError.UNKNOWN_PRODUCER_ID: "producer state unknown; refused",
    KafkaError.INVALID_PRODUCER_EPOCH: "stale producer epoch; refused",
    KafkaError.THROTTLING_QUOTA_EXCEEDED: "quota refusal precedes append",
    # Purged while waiting in the local queue.  A message that timed out in
    # flight and was queued for retry is purged with the same code, so only a
    # single-attempt producer can rely on it.
    KafkaError._PURGE_QUEUE: "purged from the local queue",
}

# Listed so the reasoning is written down; anything not in the two tables
# above is indeterminate anyway.
INDETERMINATE_CODES: dict[int, str] = {
    # librdkafka uses this both for messages still queued (never sent) and for
    # messages in flight whose response never came; we cannot tell which.
    KafkaError._MSG_TIMED_OUT: "delivery.timeout expired; may be in flight or appended",
    KafkaError.REQUEST_TIMED_OUT: "broker timed out waiting for acks; already appended",
    KafkaError._TIMED_OUT: "no response in time; may be appended",
    KafkaError._TIMED_OUT_QUEUE: "timed out; may have been sent earlier",
    # Appended to the leader, then the ISR shrank below min.insync.replicas.
    KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND: "appended to the leader's log",
    KafkaError._TRANSPORT: "connection broke with the request possibly delivered",
    KafkaError.NETWORK_EXCEPTION: "connection broke with the request possibly delivered",
    KafkaError._ALL_BROKERS_DOWN: "no broker reachable; earlier attempts unknown",
    KafkaError._PURGE_INFLIGHT: "purged while in flight; the broker may have appended it",
    KafkaError._DESTROY: "client destroyed with the message outstanding",
    # A retry found the batch already in the log: written, but not an ack.
    KafkaError.DUPLICATE_SEQUENCE_NUMBER: "an earlier attempt was appended",
    KafkaError.KAFKA_STORAGE_ERROR: "log directory failed during the append",
    KafkaError._FATAL: "idempotent producer failed fatally; outstanding outcomes unknown",
    KafkaError._FENCED: "producer fenced; outstanding outcomes unknown",
    KafkaError.PRODUCER_FENCED: "producer fenced; outstanding outcomes unknown",
    KafkaError._INCONSISTENT: "client state inconsistent",
    KafkaError._GAPLESS_GUARANTEE: "gap-less guarantee could not be kept",
    KafkaError.UNKNOWN: "unexpected server error; outcome unknown",
}


def classify(error: KafkaError | int, single_attempt: bool = False) -> str:
    """``"fail"`` if the message was definitely not appended, else ``"info"``.

    ``single_attempt`` is true only when the producer never retries
    (``retries=0`` without idempotence), which makes the broker's refusal of
    that one attempt conclusive.
    """
    code = error.code() if isinstance(error, KafkaError) else int(error)
    if code in ALWAYS_DEFINITE:
        return DEFINITE
    if single_attempt and code in DEFINITE_IF_SINGLE_ATTEMPT:
        return DEFINITE
    return INDETERMINATE


def error_name(error: KafkaError | int) -> str:
    """A stable name for the history (``"_MSG_TIMED_OUT"``, ``"NOT_ENOUGH_REPLICAS"``)."""
    if isinstance(error, KafkaError):
        return error.name()
    try:
        return KafkaError(int(error)).name()
    except Exception:
        return f"ERR_{int(error)}"


# Offset commits: the coordinator checks membership and generation before it
# writes the offsets, so these refusals mean the commit did not happen.
# Everything else (timeouts, transport, coordinator moves) may have committed.
COMMIT_DEFINITE: dict[int, str] = {
    KafkaError.ILLEGAL_GENERATION: "stale generation; refused before writing offsets",
    KafkaError.UNKNOWN_MEMBER_ID: "not a member; refused before writing offsets",
    KafkaError.REBALANCE_IN_PROGRESS: "group rebalancing; refused before writing offsets",
    KafkaError.FENCED_INSTANCE_ID: "static member fenced; refused",
    KafkaError.STALE_MEMBER_EPOCH: "stale member epoch; refused",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "ACL check precedes the write",
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "ACL check precedes the write",
    KafkaError.OFFSET_METADATA_TOO_LARGE: "validation precedes the write",
    KafkaError.INVALID_COMMIT_OFFSET_SIZE: "validation precedes the write",
    KafkaError._NO_OFFSET: "nothing to commit; no request sent",
    KafkaError._INVALID_ARG: "rejected locally; no request sent",
    KafkaError._ASSIGNMENT_LOST: "assignment lost; librdkafka refuses locally",
}


def classify_commit(error: KafkaError | int) -> str:
    """``"fail"`` if the offset commit definitely did not happen, else ``"info"``."""
    code = error.code() if isinstance(error, KafkaError) else int(error)
    return DEFINITE if code in COMMIT_DEFINITE else INDETERMINATE
