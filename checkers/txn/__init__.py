"""Transactions: their checks, the dependency graph, the cycle search and Elle."""
