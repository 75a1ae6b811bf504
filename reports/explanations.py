"""Plain-language explanations of each anomaly, for readers who are not Kafka experts.

Each entry says what the anomaly means and what usually causes it; ``hints``
then points at settings of *this* run that make the anomaly expected (e.g.
acks=1), since the same anomaly is a bug under one config and a documented
trade-off under another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Explanation:
    title: str
    meaning: str
    causes: str


EXPLANATIONS: dict[str, Explanation] = {
    "lost-write": Explanation(
        "Lost write",
        "The broker acknowledged this message (the producer got a partition and an offset), "
        "but no consumer ever read it, while later offsets of the same partition were read. "
        "Kafka promised the data was stored and then lost it.",
        "An unclean leader election (an out-of-sync replica became leader and truncated the "
        "log), acks=0/1 (the leader acknowledged before followers copied the message and then "
        "failed), min.insync.replicas=1 letting a lone leader acknowledge, or brokers losing "
        "unflushed page-cache data when several crash together.",
    ),
    "unseen": Explanation(
        "Unseen acknowledged write",
        "The message was acknowledged but never read, and nothing after its offset was read "
        "either, so it may be lost or the consumers may simply not have got that far.",
        "A final drain that timed out or stopped early, consumers stuck on an unavailable "
        "partition, or a real loss at the end of the log.",
    ),
    "acked-lost": Explanation(
        "Acknowledged message lost",
        "The broker acknowledged this message, and it is not in the final log: a final drain "
        "read every partition from its start to its high watermark after all faults healed "
        "and did not find it. It may have been read by a consumer before it vanished, which "
        "is why lost-write and unseen do not count it.",
        "An unclean leader election: an out-of-sync replica became leader without the "
        "message, and the old leader truncated its log to match when it rejoined. Also "
        "min.insync.replicas=1 with a lone leader acknowledging, or acks=1.",
    ),
    "duplicate": Explanation(
        "Duplicate",
        "One message value appears at more than one offset: the producer's write was stored twice.",
        "Producer retries without idempotence (enable.idempotence=false), or an idempotent "
        "producer whose session was reset (producer id expired, fatal error).",
    ),
    "inconsistent-offsets": Explanation(
        "Inconsistent offsets",
        "Different reads (or the ack and a read) disagree on which message sits at one offset. "
        "Replicas diverged: the log was rewritten after being observed.",
        "Unclean leader election or truncation after a leader change that served data it "
        "later dropped.",
    ),
    "failed-write-read": Explanation(
        "Read of a failed write",
        "The producer was told the write definitely failed, yet a consumer read it. Clients "
        "that retry on failure would then create duplicates or act on a phantom value.",
        "A client library classifying an ambiguous error as definite, or a broker returning "
        "an error after appending.",
    ),
    "nonmonotonic-send": Explanation(
        "Non-monotonic send",
        "One producer's successive acknowledged sends to a partition got offsets that went "
        "backwards.",
        "Reordering of in-flight batches on retry without idempotence (max.in.flight > 1), or "
        "log truncation between the sends.",
    ),
    "nonmonotonic-poll": Explanation(
        "Non-monotonic poll",
        "A consumer read offsets of a partition that went backwards or repeated.",
        "Expected across rebalances in subscribe mode (the new owner restarts from the "
        "committed offset); a bug with manual assignment, or log truncation.",
    ),
    "poll-skip": Explanation(
        "Poll skip",
        "A consumer jumped over offsets of a partition that held messages it never read.",
        "Offsets committed past unread data, a seek after a rebalance, or truncation; "
        "expected in subscribe mode when another member read the skipped range.",
    ),
    "group-double-ownership": Explanation(
        "Double ownership",
        "Two members of one consumer group owned the same partition at the same time for "
        "longer than the configured grace period.",
        "A zombie consumer that missed its revocation (session timeout during a network "
        "partition), or a group-coordinator bug.",
    ),
    "group-unowned": Explanation(
        "Unowned partition",
        "No member of the group owned this partition for longer than the threshold, so its "
        "messages were not consumed.",
        "Slow rebalances, a coordinator that is unreachable, or every member crashed.",
    ),
    "group-commit-past-unread": Explanation(
        "Commit past unread messages",
        "The group committed an offset beyond messages no member had read; a restart from that "
        "commit skips them for good (at-most-once delivery).",
        "Auto-commit committing offsets of records fetched but not yet processed, or a commit "
        "issued after a revocation.",
    ),
    "aborted-read": Explanation(
        "Aborted read",
        "A consumer that promised to return committed data only (read_committed, or the final "
        "drain) returned a message written by a transaction that was aborted. Kafka exposed "
        "data that never committed (G1a).",
        "An abort marker lost or placed wrongly after a coordinator failover, a delayed "
        "abort applied to a later transaction (KAFKA-17754), or a broker serving reads above "
        "the last stable offset.",
    ),
    "torn-transaction": Explanation(
        "Torn transaction",
        "A transaction committed, and some of its messages were read, but another of its "
        "messages was never read although later offsets of its partition were. Kafka "
        "promises all or nothing. (A committed transaction none of whose messages was read "
        "is a lost write instead.)",
        "A commit marker written to some partitions and not others, truncation of part of a "
        "transaction after a leader change, or a delayed commit landing on a later "
        "transaction (KAFKA-17754).",
    ),
    "precommitted-read": Explanation(
        "Read of its own uncommitted write",
        "A transaction's consumer returned a message the same transaction had just written, "
        "before the transaction committed.",
        "Expected with isolation.level=read_uncommitted; with read_committed, a broker "
        "serving data above the last stable offset.",
    ),
    "int-nonmonotonic-poll": Explanation(
        "Non-monotonic poll inside a transaction",
        "Within one transaction, a consumer read a partition backwards or twice, with no "
        "rebalance of that partition while the transaction ran.",
        "A consumer seek or position reset the client did not report, or log truncation.",
    ),
    "int-poll-skip": Explanation(
        "Poll skip inside a transaction",
        "Within one transaction, a consumer jumped over messages of a partition it had to "
        "return, with no rebalance of that partition while the transaction ran.",
        "A position reset past unread data, or truncation of the skipped messages.",
    ),
    "int-nonmonotonic-send": Explanation(
        "Reordered writes inside a transaction",
        "Two writes of one committed transaction to one partition landed in the opposite "
        "order to the one the producer sent them in.",
        "Batches reordered on retry (an idempotence or sequence-number bug), or truncation "
        "between the writes.",
    ),
    "int-send-skip": Explanation(
        "Interleaved writes inside a transaction",
        "Other messages landed between two consecutive writes of one committed transaction "
        "to a partition. Kafka never promised adjacent offsets: this is information only.",
        "Concurrent producers writing to the same partition, or other transactions' markers.",
    ),
    "exactly-once": Explanation(
        "Exactly-once effect broken",
        "In a consume-transform-produce pipeline, an input whose consumption was committed "
        "never reached the output topic (lost), or reached it more than once (duplicated).",
        "Offsets committed outside the transaction, a consumer not rewound after an abort "
        "(KAFKA-17582), or a zombie producer that was not fenced after a rebalance.",
    ),
    "G0": Explanation(
        "Write cycle (G0)",
        "Two or more transactions wrote to partitions in orders that contradict each other: "
        "T1's write precedes T2's in one partition and follows it in another. Kafka orders "
        "writes per partition only, so this is allowed (Jepsen's Kafka test allows it too).",
        "Concurrent transactional producers writing the same partitions.",
    ),
    "G1c": Explanation(
        "Circular information flow (G1c)",
        "Transactions depend on each other in a cycle of writes and reads: one wrote before "
        "the other in a partition, and read what the other wrote. With ww order inferred from "
        "offsets this is allowed; with --no-ww-deps (reads only) it is an error.",
        "Concurrent transactions interleaving in partitions while reading each other's data.",
    ),
    "G0-process": Explanation(
        "Write cycle with process order (G0-process)",
        "A write cycle that also uses one client process's own order of transactions.",
        "Concurrent producers; a process's later transaction ordered before its earlier one.",
    ),
    "G1c-process": Explanation(
        "Circular information flow with process order (G1c-process)",
        "A G1c cycle that also needs one process's own order of transactions.",
        "A consumer returning data that depends on its own process's later writes.",
    ),
    "G0-realtime": Explanation(
        "Write cycle with real-time order (G0-realtime)",
        "A write cycle that also needs real time: a transaction that began after another "
        "committed is ordered before it by the log.",
        "Writes of a committed transaction landing after those of a later one (delayed "
        "produce requests, KAFKA-17754).",
    ),
    "G1c-realtime": Explanation(
        "Circular information flow with real-time order (G1c-realtime)",
        "A G1c cycle that also needs real time: a transaction read data that depends on a "
        "transaction that began only after it committed.",
        "Stale or future reads across a leader change; delayed writes (KAFKA-17754).",
    ),
    "G1c-wr": Explanation(
        "Circular information flow through reads alone (G1c-wr)",
        "Transactions depend on each other in a cycle that needs no inferred write order: "
        "only reads (one polled what the other sent), perhaps with a process's order or real "
        "time. E.g. two transactions each read the other's writes before either committed. "
        "G1c is allowed while ww order is inferred from offsets; this cycle is not, so it is "
        "an error (what --no-ww-deps reports as G1c, G1c-process or G1c-realtime).",
        "Uncommitted data shown to read_committed consumers (a last stable offset served "
        "too high, e.g. across a leader or coordinator change); under read_uncommitted, "
        "consumers that read each other's open transactions.",
    ),
    "availability": Explanation(
        "Availability below threshold",
        "The acknowledged send rate during a fault fell below the configured minimum.",
        "Leader elections, min.insync.replicas blocking writes while replicas are down, or "
        "clients timing out on unreachable brokers.",
    ),
    "share-lost": Explanation(
        "Acknowledged message never accepted by the share group",
        "The broker acknowledged this message, but no member of the share group ever had an "
        "accept or reject of it committed, although it was delivered fewer times than the "
        "group's delivery limit and the share drain went quiet: the queue dropped it.",
        "Share-partition state lost or rolled back when its leader moved (a broker kill), "
        "acquisition locks that never expire, or a share-group start offset past the data.",
    ),
    "share-double-acquire": Explanation(
        "Record held by two share-group members at once",
        "Two members held the same record at the same time: either two deliveries carried "
        "the same delivery count (one acquisition handed out twice), or one member's "
        "acknowledgement was applied after another member had already received the record.",
        "Share-partition state lost across a leader change, lock expiry racing an "
        "acknowledgement, or a broker-side bookkeeping bug.",
    ),
    "share-redelivered-after-accept": Explanation(
        "Record delivered again after it was accepted",
        "A member's accept of this record was committed, and the record was later delivered "
        "again: the broker forgot the acknowledgement.",
        "Acknowledgement state not persisted before a share-partition leader failed over.",
    ),
    "share-redelivered-after-reject": Explanation(
        "Record delivered again after it was rejected",
        "A member's reject (archive) of this record was committed, and the record was later "
        "delivered again.",
        "Acknowledgement state not persisted before a share-partition leader failed over.",
    ),
    "share-delivery-count": Explanation(
        "Delivery count went backwards or past the limit",
        "Between two deliveries of this record its delivery count decreased, or a delivery "
        "carried a count above the group's delivery limit.",
        "Share-partition state reloaded from an older snapshot after a leader change.",
    ),
    "share-delivery-count-stalled": Explanation(
        "Redelivered without its delivery count advancing",
        "The same member received this record twice with the same delivery count: the first "
        "acquisition was not counted, so the record could be delivered more often than the "
        "group's delivery limit allows.",
        "A share-partition leader failover (a broker kill): the old leader's in-flight "
        "acquisitions are not persisted, so the new leader hands the record out again with "
        "the last persisted count.",
    ),
    "share-missing-redelivery": Explanation(
        "Released or abandoned record never delivered again",
        "A member released this record, or held it and crashed or never acknowledged it, and "
        "no member ever got it again, although its delivery limit was not reached and the "
        "share drain waited longer than a lock for it.",
        "Acquisition locks that never expire, or released records lost from the "
        "share-partition's state.",
    ),
}


def explain(check: str, fallback: str | None = None) -> Explanation:
    """The entry for ``check``; unknown checks fall back to the checker's own text."""
    if check in EXPLANATIONS:
        return EXPLANATIONS[check]
    return Explanation(check, fallback or "No explanation is known for this check.", "")


def hints(check: str, config: dict[str, Any]) -> list[str]:
    """Settings of this run that explain or excuse ``check``."""
    producer = config.get("producer") or {}
    topic = config.get("topic") or {}
    consumer = config.get("consumer") or {}
    out: list[str] = []
    acks = str(producer.get("acks", "all"))
    if check in ("lost-write", "inconsistent-offsets", "unseen"):
        if acks in ("0", "1"):
            out.append(
                f"This run used acks={acks}: the leader acknowledges before followers "
                "have the message, so loss on leader failure is expected."
            )
        if topic.get("unclean_leader_election"):
            out.append(
                "Unclean leader election was enabled for the topic: an out-of-sync "
                "replica may become leader and truncate acknowledged data."
            )
        if topic.get("min_insync_replicas") == 1:
            out.append("min.insync.replicas=1 lets a leader acknowledge alone with acks=all.")
    if check in ("duplicate", "nonmonotonic-send") and not producer.get("enable_idempotence", True):
        out.append("Idempotence was disabled: retried sends can be stored twice or reordered.")
    if check in ("nonmonotonic-poll", "poll-skip") and consumer.get("mode") == "subscribe":
        out.append(
            "Consumers ran in subscribe mode, where rebalances legitimately rewind or "
            "skip per-consumer offsets; this is usually a warning, not an error."
        )
    txn = config.get("txn") or {}
    uncommitted = txn.get("isolation_level") == "read_uncommitted"
    if check in ("aborted-read", "precommitted-read", "G1c-wr") and uncommitted:
        out.append(
            "The run's consumers used read_uncommitted: they may return aborted and "
            "open transactions' messages (only the final drain reads committed data)."
        )
    if check == "exactly-once" and txn.get("rewind") is False:
        out.append(
            "Rewinds after aborts were off (txn.rewind: false): a consumer keeps its "
            "position past an aborted transaction's inputs (KAFKA-17582)."
        )
    if check == "group-commit-past-unread" and consumer.get("commit") == "auto":
        out.append("Auto-commit was on: it commits what was fetched, not what was processed.")
    return out
