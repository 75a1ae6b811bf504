"""``kafka-chaos`` command line.

Each area registers its own subcommands (``add_commands(subparsers)``) so the
CLI stays a thin index: ``check`` lives with the checkers, ``heal`` with the
nemeses, ``report`` with the reports; the ground floor's commands (``cluster``,
``dist``, ``elle``) and ``run``/``suite``/``reproduce`` live here beside it.

Exit codes: 0 valid, 1 invalid, 2 unknown, 3 or more a harness error.
"""

from __future__ import annotations

import argparse
import logging
import sys

from checkers import cli as checkers_cli
from harness.cluster import home
from harness.errors import HarnessError
from kafka_chaos import cluster_cli, dist_cli, elle_cli, run_cli
from nemeses import cli as nemeses_cli
from reports import cli as reports_cli

EXIT_HARNESS_ERROR = 3

# Modules providing ``add_commands(subparsers)``, in the order ``--help`` lists them.
COMMAND_MODULES = (
    cluster_cli,
    dist_cli,
    elle_cli,
    run_cli,
    checkers_cli,
    nemeses_cli,
    reports_cli,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafka-chaos", description="Jepsen-style chaos and correctness testing for Kafka."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.add_commands(sub)
    return parser


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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format=TERMINAL_FORMAT
    )
    for noisy in ("paramiko", "py4j", "invoke", "fabric"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # What the SSH and Spark libraries say is for harness.log, not the terminal.
    if not args.verbose:
        for handler in logging.getLogger().handlers:
            if getattr(handler, "stream", None) is not sys.stderr:
                continue  # only the terminal's handler
            handler.addFilter(_only_our_own)
            handler.setFormatter(_NoTraceback(TERMINAL_FORMAT))
    try:
        return int(args.handler(args) or 0)
    except HarnessError as e:
        print(f"kafka-chaos: error: {e}", file=sys.stderr)
        return EXIT_HARNESS_ERROR
    except KeyboardInterrupt:
        print("kafka-chaos: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug: one line for the user, the trace to a log file
        where = _log_trace(e)
        print(
            f"kafka-chaos: error: internal error: {type(e).__name__}: {e} (full trace in {where})",
            file=sys.stderr,
        )
        return EXIT_HARNESS_ERROR


def _log_trace(e: Exception) -> str:
    """Append the trace to ``<home>/harness.log`` (a run also has it in its own log)."""
    import traceback

    path = home() / "harness.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write("".join(traceback.format_exception(e)))
    except OSError:
        return "nowhere: cannot write " + str(path)
    return str(path)


if __name__ == "__main__":
    sys.exit(main())
