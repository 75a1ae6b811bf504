"""What reaches the terminal when something goes wrong: one line, never a trace."""

from __future__ import annotations

import argparse
import logging
import sys

from kafka_chaos import cli, terminal_log


def _parser_failing_with(exc: Exception) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("-v", "--verbose", action="store_true")

    def handler(_args: argparse.Namespace) -> int:
        raise exc

    parser.set_defaults(handler=handler)
    return parser


def test_a_bug_is_one_line_with_exit_3_and_the_trace_goes_to_the_log(
    monkeypatch, tmp_path, capsys
) -> None:
    monkeypatch.setenv("KAFKA_CHAOS_HOME", str(tmp_path))
    monkeypatch.setattr(cli, "build_parser", lambda: _parser_failing_with(KeyError("topic")))
    assert cli.main([]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("kafka-chaos: error: internal error: KeyError: 'topic' (full trace in ")
    log = (tmp_path / "harness.log").read_text()
    assert "Traceback" in log and "KeyError: 'topic'" in log


def test_log_records_with_a_trace_are_one_line_on_the_terminal() -> None:
    formatter = terminal_log._NoTraceback(terminal_log.TERMINAL_FORMAT)
    try:
        raise RuntimeError("ssh gone")
    except RuntimeError:
        record = logging.LogRecord("kafka_chaos.run", logging.ERROR, __file__, 1, "heal failed", (),
                                   exc_info=sys.exc_info())  # fmt: skip
    line = formatter.format(record)
    assert "\n" not in line
    assert line.endswith("heal failed: RuntimeError: ssh gone (trace in harness.log)")
    assert "Traceback" in logging.Formatter().format(record), "the log file keeps the trace"


def test_only_our_own_records_reach_the_terminal() -> None:
    def record(name: str, level: int) -> logging.LogRecord:
        return logging.LogRecord(name, level, __file__, 1, "m", (), None)

    assert terminal_log._only_our_own(record("kafka_chaos.nemeses.runner", logging.INFO))
    assert terminal_log._only_our_own(record("kafka_chaos.run", logging.INFO))
    assert not terminal_log._only_our_own(record("spark.jvm", logging.INFO))
    assert not terminal_log._only_our_own(record("paramiko.transport", logging.WARNING))
    assert terminal_log._only_our_own(record("py4j.clientserver", logging.ERROR))
