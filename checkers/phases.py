"""Name the Spark jobs of each step of a check, so a profile can say what each costs.

Why: a check runs dozens of Spark jobs (one collection of every family's
frames, then each family's findings, the statistics), and an event log
alone cannot say which step a job belongs to.  ``phase`` sets Spark's job
description while a step runs; ``bench/check_stages.py`` groups the event
log's jobs by it.  On a session without a SparkContext (Spark Connect) it
names nothing: the labels only serve profiles.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from pyspark.sql import SparkSession


@contextlib.contextmanager
def phase(spark: SparkSession, name: str) -> Iterator[None]:
    """Spark jobs started inside are described as ``name`` (``kc:`` first)."""
    try:
        sc = spark.sparkContext
    except Exception:  # Spark Connect: no SparkContext in this process
        yield
        return
    old = sc.getLocalProperty("spark.job.description")
    sc.setJobDescription(f"kc:{name}")
    try:
        yield
    finally:
        sc.setJobDescription(old)  # type: ignore[arg-type]  # None clears it
