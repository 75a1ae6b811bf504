"""A suite cell on the Java client runs in a spawned child: its outcome or its
one-line error comes back, and only such cells pay for a child."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.spec import TestSpec

from kafka_chaos.child_run import needs_own_process, run_in_child


def test_only_runs_on_the_java_client_need_a_process_of_their_own() -> None:
    spec = TestSpec()
    assert not needs_own_process(spec)
    spec.producer.client = "java"
    assert needs_own_process(spec)
    spec.producer.client, spec.consumer.client = "librdkafka", "java"
    assert needs_own_process(spec)


def test_the_childs_harness_error_is_raised_here(tmp_path: Path) -> None:
    """A real spawned child runs run_test, which refuses an unknown workload before it
    touches any node (a whole run's success is the integration suite test's)."""
    spec = TestSpec(name="no-such-workload", workload="no-such-workload")
    spec.producer.client = "java"
    with pytest.raises(HarnessError, match="no-such-workload"):
        run_in_child(spec, tmp_path / "store")
    assert not (tmp_path / "store").exists()
