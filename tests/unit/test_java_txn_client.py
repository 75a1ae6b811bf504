"""The txn workload on Kafka's Java client: its settings, and its exceptions decided by
Jepsen's rules through librdkafka's codes (the JVM parts in a child: one JVM per process)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.workloads.java.txn_client import java_txn_producer_properties
from kafka_chaos.workloads.txn_client import producer_config

from kafka_chaos.options import build_spec

ROOT = Path(__file__).resolve().parents[2]


def test_the_transactional_producer_takes_librdkafkas_settings() -> None:
    spec = build_spec({"workload": "txn", "producer": {"client": "java"},
                       "consumer": {"client": "java"}})  # fmt: skip
    java = java_txn_producer_properties(spec, "n1:9092", 7, 2)
    rd = producer_config(spec, "n1:9092", 7, 2)
    for key in ("transactional.id", "transaction.timeout.ms", "linger.ms",
                "request.timeout.ms", "delivery.timeout.ms"):  # fmt: skip
        assert java[key] == str(rd[key]), key
    assert java["enable.idempotence"] == "true" and java["acks"] == "all"
    # Every blocking transactional call returns within the client timeout.
    assert java["max.block.ms"] == str(int(spec.section("txn").client_timeout_s * 1000))


def test_a_delivery_bound_java_refuses_is_one_line() -> None:
    spec = build_spec({"workload": "txn", "producer": {"client": "java", "linger_ms": 2000},
                       "consumer": {"client": "java"}})  # fmt: skip
    spec.section("txn").transaction_timeout_ms = 3000
    with pytest.raises(ConfigError, match="needs delivery.timeout.ms"):
        java_txn_producer_properties(spec, "n1:9092", 0, 0)


DECIDE = textwrap.dedent(
    """
    import json, tempfile
    from pathlib import Path
    from kafka_chaos.workloads.java import jvm
    jvm.start("4.4.0", Path(tempfile.mkdtemp()))
    import jpype
    from kafka_chaos.workloads.java.txn_client import txn_error_code
    from kafka_chaos.workloads.txn_errors import decide
    E = "org.apache.kafka.common.errors."
    KafkaException = jpype.JClass("org.apache.kafka.common.KafkaException")
    timeout = jpype.JClass(E + "TimeoutException")("send timed out")
    cases = {
        "commit timed out": (jpype.JClass(E + "TimeoutException")("EndTxn"), "commit"),
        "error state, send timed out": (KafkaException("error state", timeout), "commit"),
        "fenced": (jpype.JClass(E + "ProducerFencedException")("x"), "commit"),
        "fenced before commit": (jpype.JClass(E + "ProducerFencedException")("x"), "send"),
        "abortable": (jpype.JClass(E + "TransactionAbortableException")("x"), "commit"),
        "abort timed out": (jpype.JClass(E + "TimeoutException")("x"), "abort"),
    }
    out = {}
    for name, (exc, stage) in cases.items():
        code, text = txn_error_code(exc)
        d = decide(code, stage)
        out[name] = [d.action.value, d.outcome, text]
    print(json.dumps(out))
    """
)


def test_java_exceptions_are_decided_by_jepsens_rules() -> None:
    done = subprocess.run(
        [sys.executable, "-c", DECIDE], cwd=ROOT, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout)
    # The commit call's own wait expired: EndTxn may have landed; no abort.
    assert got["commit timed out"][:2] == ["give up", "info"]
    assert got["commit timed out"][2] == "_TIMED_OUT (TimeoutException)"
    # Refused in an error state: no EndTxn(commit) was sent; the cause decides.
    assert got["error state, send timed out"][:2] == ["abort", "fail"]
    assert got["error state, send timed out"][2].startswith("_MSG_TIMED_OUT (TimeoutException)")
    assert got["fenced"][:2] == ["tear down", "info"]
    assert got["fenced before commit"][:2] == ["tear down", "fail"]
    assert got["abortable"][:2] == ["abort", "fail"]
    assert got["abort timed out"][1] == "info"
