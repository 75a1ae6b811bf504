"""kafka-chaos checkers."""
