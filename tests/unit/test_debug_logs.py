"""``--client-debug`` / ``--broker-debug``: option parsing and validation, the
bounded client log writer (real files, real gzip), and the log configs they
write for the Java client and the brokers."""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import threading
import time
import zlib
from pathlib import Path

import confluent_kafka
import pytest
from kafka_chaos.harness import kafka_config as kc
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.spec import DEFAULT_CLIENT_DEBUG, LIBRDKAFKA_DEBUG_CONTEXTS, DebugSpec
from kafka_chaos.workloads import client_logs
from kafka_chaos.workloads.client_logs import MARKER, ClientLogs
from kafka_chaos.workloads.java import jvm

from kafka_chaos.options import (
    add_debug_options,
    add_run_options,
    build_spec,
    cli_overrides,
    debug_overrides,
)

LOCAL = {"cluster": {"backend": "local", "name": "unit-debug-logs"}}


def spec_of(argv: list[str]):
    parser = argparse.ArgumentParser()
    add_run_options(parser)
    return build_spec(LOCAL, cli_overrides(parser.parse_args(argv)))


# -- options ------------------------------------------------------------------


def test_bare_client_debug_means_the_per_client_defaults() -> None:
    spec = spec_of(["--client-debug"])
    assert spec.debug.client == "default"
    assert client_logs.contexts(spec.debug, "producer") == "eos,msg,protocol,broker"
    assert "cgrp" in client_logs.contexts(spec.debug, "consumer").split(",")
    assert client_logs.contexts(spec.debug, "share") == DEFAULT_CLIENT_DEBUG["share"]


def test_given_contexts_go_to_every_librdkafka_client() -> None:
    spec = spec_of(["--client-debug", "eos,protocol", "--client-debug-max-mb", "5"])
    assert spec.debug.client_max_mb == 5
    for kind in DEFAULT_CLIENT_DEBUG:
        assert client_logs.contexts(spec.debug, kind) == "eos,protocol"


def test_off_by_default_and_no_settings_without_an_open_run() -> None:
    spec = spec_of([])
    assert spec.debug.client is None and spec.debug.broker == []
    assert client_logs.librdkafka(spec, "producer", "p0") == {}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--client-debug", "eos,bogus"], r"debug\.client: 'bogus' is not a librdkafka"),
        (["--client-debug", ""], r"debug\.client: '' is not a librdkafka debug context"),
        (["--broker-debug", "kafka.server.share,"], r"debug\.broker: an empty logger name"),
        (["--broker-debug", ""], r"debug\.broker: an empty logger name"),
        (["--broker-debug", "kafka..share"], r"'kafka\.\.share' is not a logger name"),
        (["--client-debug-max-mb", "0"], r"debug\.client_max_mb must be positive"),
        (
            ["--broker-debug", "kafka.server", "--kafka-version", "3.9.2"],
            r"debug\.broker needs Kafka 4",
        ),
    ],
)
def test_bad_values_are_one_line(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as e:
        spec_of(argv)
    assert "\n" not in str(e.value)


def test_a_config_file_is_checked_like_the_flags() -> None:
    with pytest.raises(ConfigError, match=r"debug\.java_loggers: an empty logger name"):
        build_spec(LOCAL, {"debug": {"java_loggers": ["org.apache.kafka", " "]}})
    with pytest.raises(ConfigError, match=r"debug\.java_loggers: 'a\.B=LOUD': the level must"):
        build_spec(LOCAL, {"debug": {"java_loggers": ["a.B=LOUD"]}})
    with pytest.raises(ConfigError, match=r"config\.debug\.clinet: unknown option"):
        build_spec(LOCAL, {"debug": {"clinet": "all"}})


def test_every_context_we_accept_is_one_librdkafka_accepts() -> None:
    """The list in harness/spec.py against the librdkafka this project runs."""
    confluent_kafka.Producer({"debug": ",".join(LIBRDKAFKA_DEBUG_CONTEXTS)})
    with pytest.raises(confluent_kafka.KafkaException, match="debug"):
        confluent_kafka.Producer({"debug": "bogus"})


def test_replays_take_the_debug_flags_alone() -> None:
    parser = argparse.ArgumentParser()
    add_debug_options(parser)
    args = parser.parse_args(["--client-debug", "--broker-debug", "kafka.server.share"])
    assert debug_overrides(args) == {
        "debug": {"client": "default", "broker": ["kafka.server.share"]}
    }
    assert debug_overrides(parser.parse_args([])) == {}


# -- the bounded writer ---------------------------------------------------------


def read(path: Path) -> list[str]:
    with gzip.open(path, "rt") as f:
        return f.read().splitlines()


def test_lines_land_per_client_in_order_and_the_summary_counts_them(tmp_path: Path) -> None:
    logs = ClientLogs(tmp_path, max_bytes=10_000_000)
    a, b = logs.logger("queue-p0"), logs.logger("queue-c1")
    for i in range(1000):
        a.log(logging.DEBUG, "%s [%s] %s", "PRODUCE", "rdkafka#producer-1", f"msg {i}")
        b.log(logging.INFO, "%s [%s] %s", "CGRPOP", "rdkafka#consumer-2", f"op {i}")
    summary = logs.close()
    first = read(tmp_path / "queue-p0.log.gz")
    assert len(first) == 1000
    assert first[0].endswith("DEBUG PRODUCE [rdkafka#producer-1] msg 0")
    assert first[-1].endswith("msg 999")
    assert read(tmp_path / "queue-c1.log.gz")[5].endswith("INFO CGRPOP [rdkafka#consumer-2] op 5")
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk == summary
    assert summary["clients"]["queue-p0"]["lines"] == 1000
    assert summary["clients"]["queue-p0"]["dropped_over_cap"] == 0


def test_the_cap_keeps_the_first_lines_and_says_how_many_were_dropped(tmp_path: Path) -> None:
    cap = 20_000
    logs = ClientLogs(tmp_path, max_bytes=cap, check_bytes=4096)
    log = logs.logger("queue-p0")
    for i in range(50_000):
        log.log(logging.DEBUG, "%s", f"line {i} {i * 7919 % 104729:08d} of a noisy client")
    summary = logs.close()
    lines = read(tmp_path / "queue-p0.log.gz")
    assert lines[0].endswith("line 0 00000000 of a noisy client")
    kept = summary["clients"]["queue-p0"]["lines"]
    dropped = summary["clients"]["queue-p0"]["dropped_over_cap"]
    assert kept + dropped == 50_000 and dropped > 0
    assert lines[-1].startswith(f"{MARKER} dropped {dropped} lines")
    assert len(lines) == kept + 1
    # Over the cap by at most one check's text (compressed) and zlib's buffer.
    assert (tmp_path / "queue-p0.log.gz").stat().st_size < cap + 4096 + 64 * 1024


def test_a_full_queue_drops_and_never_blocks_the_caller(tmp_path: Path) -> None:
    logs = ClientLogs(tmp_path, max_bytes=10_000_000, queue_lines=10)
    log = logs.logger("queue-p0")
    started = time.monotonic()
    for i in range(100_000):
        log.log(logging.DEBUG, "%s", f"line {i}")
    assert time.monotonic() - started < 5.0
    summary = logs.close()
    c = summary["clients"]["queue-p0"]
    assert c["dropped_queue_full"] > 0
    assert c["lines"] + c["dropped_queue_full"] == 100_000
    assert read(tmp_path / "queue-p0.log.gz")[-1].startswith(
        f"{MARKER} dropped {c['dropped_queue_full']} lines of this client: the log writer"
    )


def test_many_clients_reopen_their_files_as_gzip_members(tmp_path: Path) -> None:
    """More clients than open files (crash restarts): every line still lands."""
    logs = ClientLogs(tmp_path, max_bytes=10_000_000)
    loggers = [logs.logger(f"queue-p{i}") for i in range(client_logs.OPEN_FILES * 2)]
    for round_ in range(3):
        for lg in loggers:
            lg.log(logging.DEBUG, "%s", f"round {round_}")
    logs.close()
    for i in range(client_logs.OPEN_FILES * 2):
        assert [x.split()[-1] for x in read(tmp_path / f"queue-p{i}.log.gz")] == ["0", "1", "2"]


def test_lines_are_on_disk_before_close(tmp_path: Path) -> None:
    """A killed run keeps what the writer flushed (every FLUSH_INTERVAL_S)."""
    logs = ClientLogs(tmp_path, max_bytes=10_000_000)
    logs.logger("queue-p0").log(logging.DEBUG, "%s", "before the kill")
    deadline = time.monotonic() + client_logs.FLUSH_INTERVAL_S * 3 + 2
    found: list[str] = []
    while time.monotonic() < deadline and not found:
        time.sleep(0.5)
        raw = (tmp_path / "queue-p0.log.gz").read_bytes()
        d = zlib.decompressobj(31)
        found = [x for x in d.decompress(raw).decode().splitlines() if "before the kill" in x]
    logs.close()
    assert found


def test_a_real_librdkafka_client_logs_through_it_from_its_poll(tmp_path: Path) -> None:
    """confluent-kafka accepts the logger and hands it the debug lines in poll()."""
    from kafka_chaos.harness.spec import TestSpec

    spec = TestSpec(debug=DebugSpec(client="default"))
    with client_logs.kept(tmp_path, spec.debug) as logs:
        assert logs is not None
        conf = {"bootstrap.servers": "127.0.0.1:1", "client.id": "unit-p0"}
        p = confluent_kafka.Producer(conf | client_logs.librdkafka(spec, "producer", "unit-p0"))
        p.produce("t", b"x")
        for _ in range(10):
            p.poll(0.1)
        p.purge()
        p.flush(1)
    lines = read(tmp_path / client_logs.DIR / "unit-p0.log.gz")
    assert any("[thrd:" in x for x in lines)
    assert not any(t.name == "client-logs" for t in threading.enumerate())  # closed by kept()


# -- the configs the flags write --------------------------------------------------


def test_broker_log_config_reloads_and_names_the_debug_loggers() -> None:
    text = kc.logging_config("4.4.0", "/n/logs/server.log", ["kafka.server.share"])
    assert f"monitorInterval={kc.LOG_RELOAD_S}" in text.splitlines()
    assert "logger.debug0.name=kafka.server.share" in text
    assert "logger.debug0.level=debug" in text
    plain = kc.logging_config("4.4.0", "/n/logs/server.log")
    assert "debug" not in plain and f"monitorInterval={kc.LOG_RELOAD_S}" in plain


@pytest.mark.parametrize("version", ["4.4.0", "3.9.2"])
def test_java_debug_config_routes_the_loggers_to_a_bounded_file(version: str) -> None:
    debug = DebugSpec(client="default", client_max_mb=100)
    text = jvm.debug_log_config(version, Path("/r/client-logs/java-client.log"), debug)
    assert "/r/client-logs/java-client.log" in text
    assert "20MB" in text  # a fifth of the cap per file, DEBUG_SEGMENTS files
    for entry in debug.java_loggers:
        assert entry.partition("=")[0] in text
    if version.startswith("4"):
        assert "logger.debug0.level = trace" in text  # Sender: each produce request
        assert "logger.debug2.level = debug" in text  # RecordAccumulator: no level given
        assert "java-client.%i.log.gz" in text
        assert "rootLogger.appenderRef.file.ref = file" in text  # java-client.log as before
    else:
        assert "log4j.appender.debug.MaxBackupIndex=4" in text
        assert "producer.internals.Sender=TRACE, debug" in text
