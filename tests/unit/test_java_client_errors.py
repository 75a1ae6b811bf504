"""Kafka's Java client through JPype: its exceptions judged by librdkafka's rules,
its jars found or refused in one line, and Elle beside it in a child process.

The JVM parts run in child processes: JPype allows one JVM per process, and
this test process may already hold Elle's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from hypothesis import given
from hypothesis import strategies as st
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.workloads.delivery_errors import classify, classify_commit
from kafka_chaos.workloads.java import errors, jvm

ROOT = Path(__file__).resolve().parents[2]
KAFKA = "4.4.0"


def python(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, input=stdin, capture_output=True, text=True, timeout=180
    )


@pytest.fixture(scope="module")
def rows() -> dict[str, dict]:
    """Every listed class, judged in a real JVM holding Kafka 4.4.0's client."""
    done = python("-m", "kafka_chaos.workloads.java.errors", "--json", "--kafka", KAFKA)
    assert done.returncode == 0, done.stderr[-2000:]
    return {r["class"].rsplit(".", 1)[-1]: r for r in json.loads(done.stdout)}


def test_client_side_exceptions_mean_what_librdkafkas_codes_mean(rows) -> None:
    # Never enqueued: definitely unwritten, retries or not.
    assert rows["BufferExhaustedException"]["send"] == "fail"
    assert rows["SerializationException"]["send"] == "fail"
    # BufferExhaustedException is a TimeoutException; the timeout itself proves nothing.
    assert rows["TimeoutException"]["code"] == "_MSG_TIMED_OUT"
    assert rows["TimeoutException"]["send"] == rows["TimeoutException"]["commit"] == "info"
    # An undrained batch may be a re-enqueued retry: proof only for one attempt.
    aborted = rows["TransactionAbortedException"]
    assert (aborted["send"], aborted["send_single_attempt"]) == ("info", "fail")
    assert rows["CommitFailedException"]["commit"] == "fail"
    assert rows["RetriableCommitFailedException"]["commit"] == "info"
    assert rows["DisconnectException"]["send_single_attempt"] == "info"


def test_broker_exceptions_take_the_brokers_protocol_code(rows) -> None:
    assert rows["NotEnoughReplicasException"]["code"] == "NOT_ENOUGH_REPLICAS"
    assert rows["NotLeaderOrFollowerException"]["code"] == "NOT_LEADER_FOR_PARTITION"
    for name in ("NotEnoughReplicasException", "NotLeaderOrFollowerException"):
        r = rows[name]
        assert (r["source"], r["send"], r["send_single_attempt"]) == ("broker", "info", "fail")
    assert rows["RecordTooLargeException"]["send"] == "fail"
    after_append = rows["NotEnoughReplicasAfterAppendException"]
    assert after_append["send_single_attempt"] == "info"
    assert rows["RebalanceInProgressException"]["commit"] == "fail"
    assert rows["NotCoordinatorException"]["commit"] == "info"
    # Kafka's base class names no error: unknown, never proof of anything.
    base = rows["KafkaException"]
    assert (base["source"], base["send_single_attempt"], base["commit"]) == (
        "unknown",
        "info",
        "info",
    )


def test_every_row_is_classified_by_librdkafkas_tables(rows) -> None:
    """No rule of the Java side's own: each outcome is the librdkafka code's."""
    ints = {v for v in vars(KafkaError).values() if isinstance(v, int)}
    codes = {KafkaError(c).name(): c for c in ints}
    for r in rows.values():
        code = codes[r["code"]]
        assert r["send"] == classify(code, False)
        assert r["send_single_attempt"] == classify(code, True)
        assert r["commit"] == classify_commit(code)


def test_docs_table_is_the_mapping_as_judged() -> None:
    done = python("-m", "kafka_chaos.workloads.java.errors", "docs/java-client.md", "--check")
    assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]


LOCAL_CLASSES = sorted(errors.LOCAL)
OTHER = st.text(alphabet="abcdefghij.", min_size=3, max_size=12).map(lambda s: f"x.{s}")


@given(
    chain=st.lists(st.one_of(st.sampled_from(LOCAL_CLASSES), OTHER), min_size=1, max_size=6),
    broker_at=st.one_of(st.none(), st.integers(0, 5)),
    code=st.sampled_from([3, 6, 7, 10, 19, 20, 27, 45]),
)
def test_the_class_nearest_the_thrown_one_decides(chain, broker_at, code) -> None:
    broker = None
    if broker_at is not None and broker_at < len(chain):
        broker = (chain[broker_at], code)
    got = errors.resolve(chain, broker)
    local = next((i for i, c in enumerate(chain) if c in errors.LOCAL), None)
    remote = chain.index(broker[0]) if broker else None
    if local is not None and (remote is None or local <= remote):
        assert (got.source, got.code) == ("local", errors.LOCAL[chain[local]][0])
    elif remote is not None:
        assert (got.source, got.code) == ("broker", code)
    else:
        assert (got.source, got.code) == ("unknown", KafkaError.UNKNOWN)
        assert got.send_outcome(True) == got.commit_outcome() == "info"
    assert got.java_class == chain[0]
    assert got.name.endswith(f"({chain[0].rsplit('.', 1)[-1]})")


def test_missing_client_jar_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "kafka-clients-3.9.2.jar").write_bytes(b"")
    with pytest.raises(
        ConfigError, match=r"needs kafka-clients-4\.4\.0\.jar in .*found: kafka-clients-3\.9\.2"
    ):
        jvm.client_jars("4.4.0", tmp_path)


def test_a_patched_client_jar_takes_the_released_clients_place(tmp_path: Path) -> None:
    for name in ("kafka-clients-4.4.0.jar", "slf4j-api-1.7.36.jar"):
        (tmp_path / name).write_bytes(b"")
    patched = tmp_path / "patched" / "kafka-clients-4.4.0-callback-order.jar"
    patched.parent.mkdir()
    patched.write_bytes(b"")
    jars = jvm.client_jars("4.4.0", tmp_path, client_jar=str(patched))
    assert jars == [patched, tmp_path / "slf4j-api-1.7.36.jar"]


def test_an_uncached_version_is_one_line_naming_the_fix() -> None:
    done = python("-m", "kafka_chaos.workloads.java.errors", "--json", "--kafka", "0.0.1")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "kafka-chaos dist fetch 0.0.1" in lines[0], done.stderr


def test_the_client_needs_only_its_own_jars() -> None:
    names = [p.name for p in jvm.client_jars(KAFKA)]
    assert f"kafka-clients-{KAFKA}.jar" in names
    assert any(n.startswith("log4j-") for n in names)  # a logging binding, or no producer
    assert not any(n.startswith(("kafka_2.13", "kafka-server", "scala-")) for n in names)


ELLE_BESIDE_THE_CLIENT = """
import json, sys, tempfile
from pathlib import Path
from kafka_chaos.workloads.java import jvm
jvm.start(sys.argv[1], Path(tempfile.gettempdir()))
from kafka_chaos.checkers.txn import elle
print(json.dumps(elle.find_cycles(*json.loads(sys.stdin.read()))))
"""


def test_elle_runs_in_a_child_when_the_java_client_holds_the_jvm() -> None:
    from kafka_chaos.checkers.txn import elle

    ops = [
        {
            "index": i,
            "invoke_index": i - 2,
            "time": i * 1000,
            "invoke_time": (i - 2) * 1000,
            "process": p,
            "type": "ok",
        }
        for i, p in ((2, 0), (3, 1))
    ]
    ww = {
        "value": 42,
        "topic": "t",
        "partition": 3,
        "offset": 17,
        "next_value": 43,
        "next_offset": 18,
    }
    wr = {"value": 7, "topic": "u", "partition": 0, "offset": 9}
    edges = [[2, 3, "ww", ww], [3, 2, "wr", wr]]
    done = python("-c", ELLE_BESIDE_THE_CLIENT, KAFKA, stdin=json.dumps([ops, edges]))
    assert done.returncode == 0, done.stderr[-2000:]
    beside = json.loads(done.stdout)
    assert set(beside) == {"G1c"}
    assert beside == json.loads(json.dumps(elle.find_cycles(ops, edges)))


def test_the_helper_is_compiled_once_into_the_cache(tmp_path: Path, monkeypatch) -> None:
    jars = jvm.client_jars(KAFKA)
    monkeypatch.setenv("KAFKA_CHAOS_CACHE", str(tmp_path))
    out = jvm.helper_classes(jars)
    assert out.is_relative_to(tmp_path) and (out / "kafkachaos" / "BurstSender.class").is_file()
    stamp = (out / "kafkachaos" / "BurstSender.class").stat().st_mtime_ns
    assert jvm.helper_classes(jars) == out
    assert (out / "kafkachaos" / "BurstSender.class").stat().st_mtime_ns == stamp


def test_no_javac_is_one_line_naming_the_fix(tmp_path: Path, monkeypatch) -> None:
    jars = jvm.client_jars(KAFKA)
    monkeypatch.setenv("KAFKA_CHAOS_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # no javac here
    with pytest.raises(ConfigError, match="needs javac .* ./setup.sh installs one"):
        jvm.helper_classes(jars)


ORDER = """
import json, tempfile
from pathlib import Path
from kafka_chaos.workloads.java import jvm
jvm.start("4.4.0", Path(tempfile.mkdtemp()))
import jpype
Mock = jpype.JClass("org.apache.kafka.clients.producer.MockProducer")
ser = jpype.JClass("org.apache.kafka.common.serialization.ByteArraySerializer")
sender = jpype.JClass("kafkachaos.BurstSender")(
    Mock(True, None, ser(), ser()), "t",
    jpype.JArray(jpype.JArray(jpype.JByte))([b"k0", b"k1"]), jpype.JArray(jpype.JInt)([0, 1]),
)
n = 200
sent = sender.send(
    jpype.JArray(jpype.JLong)(list(range(n))), jpype.JArray(jpype.JInt)([v % 2 for v in range(n)]),
    jpype.JArray(jpype.JByte)(b"x" * n), jpype.JArray(jpype.JInt)(list(range(1, n + 1))),
)
in_order = int(sender.outOfOrder())
sender.checkOrder(5, 10, 1)
sender.checkOrder(5, 7, 2)   # a lower offset of the same partition, called back later
sender.checkOrder(6, 1, 3)   # another partition: its own order
print(json.dumps([int(sent), in_order, int(sender.outOfOrder())]))
"""


def test_the_java_side_order_check_flags_only_a_lower_offset_called_back_later() -> None:
    """BurstSender checks, as the client calls back, that a partition's offsets rise:
    200 in-order completions (MockProducer) flag nothing, one regression flags one."""
    done = python("-c", ORDER)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == [200, 0, 1]
