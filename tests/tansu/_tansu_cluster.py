"""The Tansu tier's cluster fixture body, shared by its test modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _local_leftovers import down  # tests/integration, put on sys.path by the test module
from kafka_chaos.harness import tansu_build
from kafka_chaos.harness.errors import HarnessError


def fresh_cluster(name: str) -> Iterator[str]:
    """``name``, with no cluster of that name before or after: skipped without a built Tansu."""
    try:
        tansu_build.binary()
    except HarnessError as e:
        pytest.skip(str(e))
    assert down(name).returncode == 0
    yield name
    assert down(name).returncode == 0
