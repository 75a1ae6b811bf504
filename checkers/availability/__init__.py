"""Availability and lag statistics around the faults."""
