"""kafka-chaos harness: cluster backends, Kafka lifecycle, run orchestration and CLI."""
