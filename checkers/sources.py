"""The documents the checks hold Kafka and its clients to, and the sentences quoted from them.

Why one module: several checks rest on the same sentence (the consumer's
position, read_committed), and a quote must read exactly as its source
writes it, so it is written once, here, beside the link that shows it.
Every quote was checked against the text at the linked version (the Kafka
4.0.0 sources, librdkafka v2.15.0, Jepsen v0.3.9, the KIP pages).  HTML
markup inside a quoted sentence (``<code>``) is left out, as the rendered
page shows it.  Each check's record builds its ``Basis`` from these.
"""

from __future__ import annotations

_KAFKA = "https://github.com/apache/kafka/blob/4.0.0/"
_CLIENTS = _KAFKA + "clients/src/main/java/org/apache/kafka/clients/"
_JAVADOC = "https://kafka.apache.org/40/javadoc/org/apache/kafka/clients/"

PRODUCER_CONFIG_URL = _CLIENTS + "producer/ProducerConfig.java"
CONSUMER_CONFIG_URL = _CLIENTS + "consumer/ConsumerConfig.java"
PRODUCER_JAVADOC_URL = _JAVADOC + "producer/KafkaProducer.html"
TOPIC_CONFIG_URL = _KAFKA + "clients/src/main/java/org/apache/kafka/common/config/TopicConfig.java"
CONSUMER_JAVADOC_URL = _JAVADOC + "consumer/KafkaConsumer.html"
DESIGN_URL = _KAFKA + "docs/design.html"
OPS_URL = _KAFKA + "docs/ops.html"
LIBRDKAFKA_CONFIG_URL = "https://github.com/confluentinc/librdkafka/blob/v2.15.0/CONFIGURATION.md"
LIBRDKAFKA_HEADER_URL = "https://github.com/confluentinc/librdkafka/blob/v2.15.0/src/rdkafka.h"
LIBRDKAFKA_INTRO_URL = (
    "https://github.com/confluentinc/librdkafka/blob/v2.15.0/INTRODUCTION.md#idempotent-producer"
)
JEPSEN_KAFKA_URL = (
    "https://github.com/jepsen-io/jepsen/blob/v0.3.9/jepsen/src/jepsen/tests/kafka.clj"
)
KIP_545_URL = (
    "https://cwiki.apache.org/confluence/display/KAFKA/"
    "KIP-545%3A+support+automated+consumer+offset+sync+across+clusters+in+MM+2.0"
)
KIP_618_URL = (
    "https://cwiki.apache.org/confluence/display/KAFKA/"
    "KIP-618%3A+Exactly-Once+Support+for+Source+Connectors"
)

# ProducerConfig's doc of acks: the acks=all case.
ACKS_ALL = (
    "This guarantees that the record will not be lost as long as at least one in-sync "
    "replica remains alive."
)
ACKS_SOURCE = "Kafka's producer config `acks` (ProducerConfig, Kafka 4.0.0)"
# The same doc, the acks=1 case: what a leader acknowledging alone risks.
ACKS_1 = (
    "In this case should the leader fail immediately after acknowledging the record but "
    "before the followers have replicated it then the record will be lost."
)

# TopicConfig's doc of unclean.leader.election.enable (the broker default's doc,
# ReplicationConfigs, says the same).
UNCLEAN = (
    "Indicates whether to enable replicas not in the ISR set to be elected as leader as a "
    "last resort, even though doing so may result in data loss."
)
UNCLEAN_SOURCE = "Kafka's topic config `unclean.leader.election.enable` (TopicConfig, Kafka 4.0.0)"

# librdkafka's CONFIGURATION.md, enable.idempotence; Kafka's Java producer promises the
# same in ProducerConfig's enable.idempotence and max.in.flight.requests.per.connection.
IDEMPOTENCE = (
    "When set to `true`, the producer will ensure that messages are successfully produced "
    "exactly once and in the original produce order."
)
IDEMPOTENCE_SOURCE = (
    "librdkafka's CONFIGURATION.md, `enable.idempotence` (v2.15.0); Kafka's Java producer "
    "makes the same promise in ProducerConfig's `enable.idempotence` doc"
)

# librdkafka's INTRODUCTION.md, Idempotent Producer, Guarantees: of every message, not
# only acknowledged ones.  A message that timed out in flight is "possibly persisted"
# and dropped from the queue, never sent again (Message timeout considerations).
LIBRDKAFKA_WRITTEN_ONCE = "Exactly-once - a message is only written to the log once."
LIBRDKAFKA_INTRO_SOURCE = "librdkafka's INTRODUCTION.md, Idempotent Producer, Guarantees (v2.15.0)"
# KafkaProducer's javadoc on idempotence: what the Java client does not promise.
JAVA_ONE_SESSION = (
    "Finally, the producer can only guarantee idempotence for messages sent within a single "
    "session."
)
JAVA_CHECK_DUPLICATE = (
    "it is recommended to shut down the producer and check the contents of the last "
    "produced message to ensure that it is not duplicated."
)

# rdkafka.h, rd_kafka_msg_status_t: the status kafka-chaos's `fail` stands for.
NOT_PERSISTED = (
    "Message was never transmitted to the broker, or failed with an error indicating it "
    "was not written to the log."
)

# design.html, 4.7 Replication.
COMMITTED_ONLY = (
    "Only committed messages are ever given out to the consumer. This means that the "
    "consumer need not worry about potentially seeing a message that could be lost if the "
    "leader fails."
)
AVAILABLE = (
    "Kafka will remain available in the presence of node failures after a short fail-over "
    "period, but may not remain available in the presence of network partitions."
)
# design.html, 4.6 Message Delivery Semantics.
EXACTLY_ONCE = (
    "the transactional producer/consumer can be used generally to provide exactly-once "
    "delivery when transferring and processing data between Kafka topics."
)

# KafkaConsumer's javadoc, "Offsets and Consumer Position" and "Consumer Groups".
NEXT_RECORD = (
    "The position of the consumer gives the offset of the next record that will be given out."
)
ONE_LARGER = (
    "It will be one larger than the highest offset the consumer has seen in that partition."
)
COMMITTED_POSITION = "The committed position is the last offset that has been stored securely."
ONE_OWNER = (
    "This is achieved by balancing the partitions between all members in the consumer group "
    "so that each partition is assigned to exactly one consumer in the group."
)
CONSUMER_SOURCE = "KafkaConsumer javadoc, Offsets and Consumer Position (Kafka 4.0)"
GROUPS_SOURCE = "KafkaConsumer javadoc, Consumer Groups and Topic Subscriptions (Kafka 4.0)"

# ConsumerConfig's doc of isolation.level.
READ_COMMITTED = (
    "If set to read_committed, consumer.poll() will only return transactional messages "
    "which have been committed."
)
ISOLATION_SOURCE = "Kafka's consumer config `isolation.level` (ConsumerConfig, Kafka 4.0.0)"

# KafkaProducer's javadoc.
ATOMIC = (
    "The transactional producer allows an application to send messages to multiple "
    "partitions (and topics!) atomically."
)

# Jepsen's Kafka checker, allowed-error-types.
JEPSEN_G0 = "g0 cycles are normal in the Kafka transactional model"
JEPSEN_SEND_SKIP = (
    "int-send-skip is normal behavior: transaction writes interleave constantly in the Kafka "
    "transaction model."
)
JEPSEN_SOURCE = "Jepsen's Kafka checker, `allowed-error-types` (v0.3.9)"

# MirrorMaker 2: KIP-618's motivation, KIP-545's motivation, Kafka's Geo-Replication docs.
SOURCE_OFFSETS = (
    "The Connect framework periodically writes source task offsets to an internal Kafka "
    "topic at a configurable interval, once the source record that they correspond to has "
    "been successfully sent to Kafka."
)
TRANSLATED = (
    "the consumers will use the translated offsets to resume the consumption from where they "
    "left off at the primary cluster, without losing messages or consuming many duplicate "
    "messages."
)
MIRROR_EOS = (
    "Exactly-once semantics are supported for dedicated MirrorMaker clusters as of version 3.5.0."
)
PRESERVES_PARTITIONING = "Preserves partitioning"
# No MirrorMaker 2 source (the ops docs' Geo-Replication, KIP-382, KIP-618, Connect's
# docs, connect/mirror/README.md) promises order within a partition.
