"""``kafka-chaos check RUN_DIR|history.jsonl``: judge a history and print the verdict.

Exit codes follow kafka_chaos/cli.py: 0 valid, 1 invalid, 2 unknown; a
HarnessError (e.g. a malformed history line) propagates and becomes 3.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.spec import TestSpec

EXIT_CODES = {"valid": 0, "invalid": 1, "unknown": 2}


def add_commands(subparsers: Any) -> None:
    p = subparsers.add_parser("check", help="judge a history with the Spark checkers")
    p.add_argument("target", type=Path, help="a run directory or a history.jsonl file")
    p.add_argument("--spark-master", help="Spark master URL (default: config, else local[*])")
    p.add_argument(
        "--spark-remote",
        metavar="sc://HOST:PORT",
        help="check on this running Spark Connect server instead of a Spark of its own",
    )
    p.add_argument("--json", action="store_true", help="print the results JSON instead of a table")
    p.add_argument("--examples", type=int, help="examples kept per anomaly")
    p.add_argument("--config", type=Path, help="run config (default: RUN_DIR/config.json)")
    p.add_argument(
        "--no-ww-deps",
        action="store_true",
        help="txn cycle checks from wr edges only (Jepsen's --no-ww-deps): G1c becomes an error",
    )
    p.set_defaults(handler=run_check)


def resolve(target: Path, config_path: Path | None) -> tuple[Path, dict[str, Any], Path | None]:
    """(history file, config dict, results.json path or None) for a CLI target.

    The config is ``--config``, else the run's ``config.json`` (in the run
    directory, or beside the history file), else empty: the workload is then
    taken from the history's lines (checkers/history_workload.py).
    """
    if target.is_dir() and target.suffix != ".parquet":
        history, out = target / "history.jsonl", target / "results.json"
        if not history.exists():
            raise ConfigError(f"{target}: not a run directory (no history.jsonl)")
    else:
        history, out = target, None
    beside = history.parent / "config.json"
    config_path = config_path or (beside if beside.is_file() else None)
    if config_path is None:
        return history, {}, out
    TestSpec.load(config_path)  # validates the file, naming any bad key
    return history, json.loads(config_path.read_text()), out


def run_check(args: argparse.Namespace) -> int:
    from kafka_chaos.checkers.api import check_history  # Spark import only when actually checking

    history, config, out = resolve(args.target, args.config)
    from_lines = not config
    config = config or TestSpec().to_dict()
    if args.examples is not None:
        config.setdefault("checker", {})["examples"] = args.examples
    if args.no_ww_deps:
        config.setdefault("checker", {})["ww_deps"] = False
    results = check_history(
        history,
        config,
        out,
        args.spark_master,
        from_lines=from_lines,
        spark_remote=args.spark_remote,
    )
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print_summary(results)
    return EXIT_CODES[results["verdict"]]


def print_summary(results: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{results['history']}: {results['ops']} ops")
    for col in ("check", "count", "severity", "valid", "first examples"):
        table.add_column(col)
    for name, c in results["checks"].items():
        shown = "; ".join(_brief(ex) for ex in c["examples"][:2])
        style = "red" if c["valid"] is False and c["severity"] == "error" else None
        table.add_row(name, str(c["count"]), c["severity"], str(c["valid"]), shown, style=style)
    console = Console()
    console.print(table)
    avail = results.get("stats", {}).get("availability")
    if avail:
        console.print(
            f"send rate {avail['send_rate']}/s, poll rate {avail['poll_rate']}/s, "
            f"longest gap {avail['longest_gap_s']} s at {avail['longest_gap_start_s']} s"
        )
    for line in summary_lines(results):  # unwrapped: one reason, one line, even on a narrow tty
        console.print(line, markup=False, soft_wrap=True)
    console.print(answer_line(results), markup=False)
    console.print(f"final drain: {results['final_drain']}   verdict: [bold]{results['verdict']}")


def answer_line(results: dict[str, Any]) -> str:
    """results.json's ``summary`` as one line: the figures a user asks for first."""
    s = results.get("summary") or {}
    lost = "unknown" if s.get("acked_lost") is None else s["acked_lost"]
    return (
        f"acknowledged: {s.get('acked', 0)}   lost: {lost}   "
        f"duplicated: {s.get('duplicated', 0)}   read out of order: {s.get('reordered', 0)}"
    )


def summary_lines(results: dict[str, Any]) -> list[str]:
    """Plain lines on what qualifies the verdict: why it is unknown, and faults that
    ran off plan (a flag on the availability figures, not an anomaly)."""
    lines = [f"unknown: {reason}" for reason in results.get("unknown_reasons") or []]
    plan = results.get("faults_off_plan") or {}
    if plan.get("count"):
        worst = plan.get("worst_deviation_s")
        lines.append(
            f"{plan['count']} fault(s) ran off plan (more than {plan['tolerance_s']} s late or "
            f"early, or never healed; worst deviation "
            f"{'unknown' if worst is None else f'{worst} s'}): availability figures do not "
            "describe the planned schedule"
        )
    return lines


def _brief(example: dict[str, Any]) -> str:
    skip = {"neighbours", "indices", "explanation"}
    return ", ".join(f"{k}={v}" for k, v in example.items() if k not in skip)[:120]
