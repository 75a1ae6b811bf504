"""Shrinking a failing run to a minimal reproduction (``kafka-chaos shrink``)."""
