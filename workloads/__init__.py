"""kafka-chaos workloads."""
