"""kafka-chaos nemeses."""
