"""Tansu 0.6.0 on PostgreSQL, the real binary and server: the opt-in tier (``./test.sh --tansu``).

One broker on this host's loopback, its storage the harness's own
PostgreSQL (``harness/postgres_db.py``) on a shell node, as docs/brokers.md
describes.  Kept out of ``./test.sh``: Tansu's cold build takes most of an
hour, and CI must stay under 30 minutes.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

from _shell_node import ShellNode  # noqa: E402
from kafka_chaos.harness import api_versions, distribution, postgres_db, services, tansu_build  # noqa: E402
from kafka_chaos.harness.errors import HarnessError  # noqa: E402
from kafka_chaos.harness.node import SSHTarget  # noqa: E402

DATABASE = "tansu"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class TansuOnPostgres:
    storage: ShellNode
    pg_port: int
    bootstrap: str
    log: Path


@pytest.fixture
def tansu() -> Iterator[TansuOnPostgres]:
    try:
        binary, schema = tansu_build.binary(), tansu_build.schema()
    except HarnessError as e:
        pytest.skip(f"{e}")
    root = Path(tempfile.mkdtemp(prefix="kc-tansu-"))
    root.chmod(0o755)  # the postgres user reaches its data below
    node = ShellNode("s1", 1, "127.0.0.1", SSHTarget("127.0.0.1"), str(root / "s1"))
    pg_port, port = _free_port(), _free_port()
    broker = None
    try:
        postgres_db.configure(node, clients=["127.0.0.1"], port=pg_port)
        postgres_db.start(node)
        _wait(lambda: postgres_db.ready(node, pg_port), "PostgreSQL ready")
        postgres_db.create_database(node, DATABASE, port=pg_port)
        postgres_db.apply_file(node, schema.read_text(), DATABASE, port=pg_port)
        env = dict(
            os.environ,
            CLUSTER_ID="kafka-chaos",
            LISTENER_URL=f"tcp://127.0.0.1:{port}",
            ADVERTISED_LISTENER_URL=f"tcp://127.0.0.1:{port}",
            STORAGE_ENGINE=f"postgres://postgres@127.0.0.1:{pg_port}/{DATABASE}",
            RUST_LOG="warn,tansu_storage=debug",
            NO_COLOR="1",
        )
        log = root / "tansu.log"
        with open(log, "w") as out:
            broker = subprocess.Popen(
                [str(binary), "broker", "--silent"], env=env, cwd=root, stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        bootstrap = f"127.0.0.1:{port}"
        _wait(lambda: _answers(bootstrap), "Tansu answering")
        yield TansuOnPostgres(node, pg_port, bootstrap, log)
    finally:
        if broker is not None:
            broker.kill()
            broker.wait(10)
        services.kill(postgres_db.POSTGRES, node)
        shutil.rmtree(root)


def test_its_apiversions_say_what_0_6_0_lacks(tansu: TansuOnPostgres) -> None:
    """docs/brokers.md, read from the source: no EndTxn, no KIP-848, no share groups."""
    brokers = api_versions.ask(distribution.load_cached("4.4.0"), tansu.bootstrap)
    assert [(b.address, b.node_id) for b in brokers] == [(tansu.bootstrap, 111)]
    (broker,) = brokers
    assert broker.lacks("produce and fetch") == []
    assert broker.lacks("idempotent producers") == []
    assert broker.lacks("consumer groups") == []
    assert broker.lacks("transactions") == ["EndTxn"]
    assert broker.lacks("KIP-848 consumer groups") == ["ConsumerGroupHeartbeat"]
    assert broker.lacks("share groups") == ["ShareGroupHeartbeat", "ShareFetch", "ShareAcknowledge"]
    line = api_versions.refusal(brokers, ["transactions"], "the txn workload")
    assert line == (
        f"the txn workload needs transactions, and the broker at {tansu.bootstrap} "
        "does not support EndTxn (its ApiVersions answer)"
    )


def test_every_acknowledged_write_is_read_and_stored(tansu: TansuOnPostgres) -> None:
    admin = AdminClient({"bootstrap.servers": tansu.bootstrap})
    for f in admin.create_topics([NewTopic("chaos", 3, 1)]).values():
        f.result(30)
    producer = Producer(
        {"bootstrap.servers": tansu.bootstrap, "enable.idempotence": True, "acks": "all"}
    )
    acked: list[tuple[int, int, bytes]] = []

    def delivered(err, msg) -> None:  # noqa: ANN001 - confluent-kafka's callback
        assert err is None, err
        acked.append((msg.partition(), msg.offset(), msg.value()))

    for i in range(2000):
        producer.produce(
            "chaos", key=str(i % 7).encode(), value=str(i).encode(), callback=delivered
        )
        producer.poll(0)
    assert producer.flush(60) == 0
    assert sorted(v for _, _, v in acked) == sorted(str(i).encode() for i in range(2000))
    for p in range(3):  # offsets from 0, no gap, no repeat, per partition
        offsets = sorted(o for q, o, _ in acked if q == p)
        assert offsets == list(range(len(offsets)))

    consumer = Consumer(
        {"bootstrap.servers": tansu.bootstrap, "group.id": "g1",
         "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )  # fmt: skip
    consumer.subscribe(["chaos"])
    seen: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + 90
    while len(seen) < len(acked) and time.monotonic() < deadline:
        m = consumer.poll(1)
        if m is not None and m.error() is None:
            seen.append((m.partition(), m.offset(), m.value()))
    consumer.close()
    assert sorted(seen) == sorted(acked)

    rows = postgres_db.sql(
        tansu.storage,
        "SELECT count(*) FROM record r JOIN topition tp ON r.topition = tp.id "
        "JOIN topic t ON tp.topic = t.id WHERE t.name = 'chaos'",
        DATABASE,
        tansu.pg_port,
    )
    assert int(rows) == 2000  # what was acknowledged is what PostgreSQL holds


def _answers(bootstrap: str) -> bool:
    try:
        AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=1)
    except Exception:  # noqa: BLE001 - not up yet, whatever the client says
        return False
    return True


def _wait(ready, what: str, timeout_s: float = 60.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.2)
    pytest.fail(f"{what}: not within {timeout_s:.0f} s")
