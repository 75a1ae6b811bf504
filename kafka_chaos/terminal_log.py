"""What the terminal shows of the log: kafka-chaos' own records, one line each.

Shared by the CLI and by a suite cell's child process (kafka_chaos/suite.py),
so a run looks the same on the terminal whichever process runs it.
"""

from __future__ import annotations

import logging
import sys

OUR_LOGGERS = (
    "kafka_chaos",
    "harness",
    "nemeses",
    "workloads",
    "checkers",
    "reports",
    "__main__",
)


TERMINAL_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _only_our_own(record: logging.LogRecord) -> bool:
    return record.name.split(".")[0] in OUR_LOGGERS or record.levelno >= logging.ERROR


class _NoTraceback(logging.Formatter):
    """One line per record on the terminal; the trace stays in harness.log."""

    def format(self, record: logging.LogRecord) -> str:
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info = record.exc_text = record.stack_info = None
        try:
            line = super().format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved
        if saved[0] and saved[0][1] is not None:
            line += f": {type(saved[0][1]).__name__}: {saved[0][1]}"
        if saved[0] or saved[2]:
            line += " (trace in harness.log)"
        return line


def configure(verbose: bool) -> None:
    """Log INFO (DEBUG when ``verbose``) to the terminal; quiet the chatty libraries.

    What the SSH and Spark libraries say is for harness.log, not the terminal.
    """
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format=TERMINAL_FORMAT)
    for noisy in ("paramiko", "py4j", "invoke", "fabric"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if verbose:
        return
    for handler in logging.getLogger().handlers:
        if getattr(handler, "stream", None) is not sys.stderr:
            continue  # only the terminal's handler
        handler.addFilter(_only_our_own)
        handler.setFormatter(_NoTraceback(TERMINAL_FORMAT))
