"""kafka-chaos harness, the ground floor: nodes, backends, clusters, Kafka on them, the spec."""
