"""The disaster-recovery parts that need no cluster: MirrorMaker's records as this
harness decodes them, its configuration, dc2's names in the history, the legs'
names and addresses, and dc2's values keyed apart at ingest."""

from __future__ import annotations

import json
import socket
import time

import pyarrow as pa
import pytest
from kafka_chaos.checkers.ingest.topic_ids import OTHER_CLUSTER_VALUE, TopicIds
from kafka_chaos.harness.backends.local_plan import MAX_NODES, leg_address, leg_names
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.history import HistoryWriter
from kafka_chaos.harness.mirror_maker import Endpoints, properties, remote_topic, validate
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.workloads.cluster_history import ClusterHistory, split
from kafka_chaos.workloads.mirror_spec import MirrorSpec
from kafka_chaos.workloads.mirror_sync import (
    CALL_TIMEOUT_S,
    Checkpoint,
    IncompleteRead,
    Undecodable,
    checkpoints,
    decode_checkpoint,
    decode_source_offset,
    encode_checkpoint,
    lagging,
)

from kafka_chaos.options import build_spec
from kafka_chaos.options import validate as validate_run

# A record of dc1.checkpoints.internal as MirrorMaker 4.3.1 wrote it (seen on dc2):
# group mtopic-g0 had committed 27 on partition 1, translated to 1 on dc2.
KEY = b"\x00\tmtopic-g0\x00\x06mtopic\x00\x00\x00\x01"
VALUE = b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x1b\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00"


def test_a_real_checkpoint_record_decodes_and_round_trips() -> None:
    c = decode_checkpoint(KEY, VALUE)
    assert c == Checkpoint("mtopic-g0", "mtopic", 1, upstream=27, downstream=1)
    assert encode_checkpoint(c) == (KEY, VALUE)


@pytest.mark.parametrize(
    "key,value",
    [(KEY[:5], VALUE), (KEY, VALUE[:6]), (KEY, b"\x00\x01" + VALUE[2:]), (b"\x00\x50ab", VALUE)],
)
def test_a_record_in_another_format_is_named_not_guessed(key: bytes, value: bytes) -> None:
    with pytest.raises(Undecodable):
        decode_checkpoint(key, value)


def test_connect_offsets_of_the_source_connector_only() -> None:
    key = b'["MirrorSourceConnector",{"cluster":"dc1","partition":2,"topic":"t"}]'
    assert decode_source_offset(key, b'{"offset":1798}') == ("t", 2, 1798)
    other = b'["MirrorHeartbeatConnector",{"sourceClusterAlias":"dc1"}]'
    assert decode_source_offset(other, b'{"offset":0}') is None
    assert decode_source_offset(key, None) is None  # a tombstone
    with pytest.raises(Undecodable):
        decode_source_offset(b"not json", b"{}")


def test_lag_counts_what_mirror_maker_has_yet_to_copy() -> None:
    # copied through offset 9 of partition 0 (10 records), nothing of partition 1
    assert lagging({0: 9}, {0: 10, 1: 3, 2: 0}) == {1: 3}
    assert lagging({0: 7}, {0: 10}) == {0: 2}


def test_dc2_names_carry_their_cluster_and_nothing_else_changes(tmp_path) -> None:
    with HistoryWriter(tmp_path / "h.jsonl") as inner:
        h = ClusterHistory(inner, "dc2", ["chaos", "chaos-g0"])
        h.append(3, "ok", "send", {"topic": "chaos", "key": "chaos", "value": 1})
        h.append(4, "invoke", "subscribe", {"group": "chaos-g0", "topics": ["chaos"]})
        h.append(4, "invoke", "assign", {"group": "chaos-g0-drain", "partitions": [["chaos", 0]]})
    lines = [json.loads(x) for x in (tmp_path / "h.jsonl").read_text().splitlines()]
    assert lines[0]["value"]["topic"] == "dc2/chaos"
    assert lines[0]["value"]["key"] == "dc2/chaos"  # a key equal to a name: byte-for-byte rule
    assert lines[1]["value"] == {"group": "dc2/chaos-g0", "topics": ["dc2/chaos"]}
    assert lines[2]["value"]["group"] == "chaos-g0-drain"  # a longer name is another name
    assert [x["index"] for x in lines] == [0, 1, 2]
    assert split("dc2/chaos") == ("dc2", "chaos") and split("chaos") == (None, "chaos")


def test_mirror_maker_settings() -> None:
    ends = Endpoints(dc1=["10.0.1.11", "10.0.1.12"], dc2=["10.0.2.11"])
    props = properties(MirrorSpec(enabled=True), ends, "t", "t-g[0-9]+")
    assert props["dc1.bootstrap.servers"] == "10.0.1.11:9092,10.0.1.12:9092"
    assert props["replication.factor"] == 1 and props["dc1->dc2.topics"] == "t"
    assert props["replication.policy.class"].endswith("IdentityReplicationPolicy")
    assert props["dc2.offset.flush.interval.ms"] == 5000  # a worker setting: per target
    assert "dc2.exactly.once.source.support" not in props
    eos = properties(MirrorSpec(enabled=True, exactly_once=True, replication_policy="default"),
                     ends, "t", "g")  # fmt: skip
    assert eos["dc2.exactly.once.source.support"] == "enabled"
    assert eos["replication.policy.class"].endswith("DefaultReplicationPolicy")
    assert remote_topic("t", "default") == "dc1.t" and remote_topic("t", "identity") == "t"
    with pytest.raises(ConfigError, match="replication_policy"):
        validate(MirrorSpec(replication_policy="prefix"))


def test_legs_take_node_slots_the_orphan_sweep_covers() -> None:
    assert leg_names(7, 0) == (f"kc7v{MAX_NODES}", f"kc7p{MAX_NODES}", "eth1")
    assert leg_names(7, 1) == (f"kc7v{MAX_NODES - 1}", f"kc7p{MAX_NODES - 1}", "eth2")
    assert leg_address(3, 7) == "10.251.3.207"


def test_dc2_values_are_keyed_apart_at_ingest() -> None:
    rows = pa.table(
        {
            "topic": ["t", "dc2/t", None],
            "val": pa.array([5, 5, None], pa.int64()),
        }
    )
    ids = TopicIds()
    ids._learn(["t", "dc2/t"])
    keyed = ids._cluster_keyed(rows["val"], pa.array([ids.ids["t"], ids.ids["dc2/t"], None],
                                                     pa.int32()))  # fmt: skip
    assert keyed.to_pylist() == [5, OTHER_CLUSTER_VALUE + 5, None]


def test_refused_mirror_settings_name_the_setting() -> None:
    with pytest.raises(ConfigError, match="^mirror.faults: kill cannot hit the MirrorMaker"):
        validate_run(build_spec({"mirror": {"enabled": True, "faults": ["kill"]}}))
    with pytest.raises(ConfigError, match="need mirror.enabled"):
        validate_run(build_spec({"mirror": {"failover_at_s": 3}}))
    with pytest.raises(ConfigError, match="java runs the queue and txn workloads, not mirror"):
        validate_run(build_spec({"workload": "mirror", "mirror": {"enabled": True},
                                 "producer": {"client": "java"}}))  # fmt: skip
    assert TestSpec.from_dict({"mirror": {"enabled": True}}).section("mirror").dc2_nodes == 1
    with pytest.raises(ConfigError, match="^mirror.dc2_faults: unknown fault 'kil'"):
        validate_run(build_spec({"mirror": {"enabled": True, "dc2_faults": ["kil"]}}))
    with pytest.raises(ConfigError, match="^mirror.dc2_faults: mirror-kill hits the MirrorMaker"):
        validate_run(build_spec({"mirror": {"enabled": True, "dc2_faults": ["mirror-kill"]}}))
    with pytest.raises(ConfigError, match="need mirror.enabled"):
        validate_run(build_spec({"mirror": {"dc2_faults": ["kill"]}}))


def test_an_internal_topic_dc2_never_gives_is_an_error_not_nothing() -> None:
    """Nothing listens on the port: the read retries until its bound, then says so
    (an empty answer would pass for "no checkpoints" and hide a failed translation)."""
    started = time.monotonic()
    with pytest.raises(IncompleteRead, match="dc2 did not answer within 2 s"):
        checkpoints(f"127.0.0.1:{_closed_port()}", "dc1.checkpoints.internal", ["g"], 2.0)
    assert time.monotonic() - started < 2 + CALL_TIMEOUT_S


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
