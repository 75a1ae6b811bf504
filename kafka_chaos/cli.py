"""``kafka-chaos`` command line.

Each area registers its own subcommands (``add_commands(subparsers)``) so the
CLI stays a thin index: ``check`` lives with the checkers, ``heal`` with the
nemeses, ``report`` with the reports; the ground floor's commands (``cluster``,
``dist``, ``elle``) and ``run``/``suite``/``reproduce``/``shrink`` live here beside it.

Exit codes: 0 valid, 1 invalid, 2 unknown, 3 or more a harness error.
"""

from __future__ import annotations

import argparse
import sys

from kafka_chaos import cluster_cli, dist_cli, elle_cli, run_cli, share_story, terminal_log
from kafka_chaos.checkers import cli as checkers_cli
from kafka_chaos.harness.cluster import home
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.nemeses import cli as nemeses_cli
from kafka_chaos.reports import cli as reports_cli
from kafka_chaos.shrink import cli as shrink_cli

EXIT_HARNESS_ERROR = 3

# Modules providing ``add_commands(subparsers)``, in the order ``--help`` lists them.
COMMAND_MODULES = (
    cluster_cli,
    dist_cli,
    elle_cli,
    run_cli,
    shrink_cli,
    share_story,
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    terminal_log.configure(args.verbose)
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
