"""Shared fixtures for unit tests.

``spark``: ONE local SparkSession for the whole test session.  Starting Spark
costs seconds (far more on a busy machine), so every checker test shares it.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from kafka_chaos.checkers.session import get_spark

    session = get_spark("local[2]")
    yield session
    session.stop()
