"""kafka-chaos reports."""
