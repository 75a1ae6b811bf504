"""``kafka-chaos run``, ``suite``, ``reproduce`` and ``scenarios``."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

from kafka_chaos.checkers.cli import answer_line
from kafka_chaos.child_run import needs_own_process, run_in_child
from kafka_chaos.forensics import replica_verify
from kafka_chaos.harness import store as store_mod
from kafka_chaos.harness import tansu_evidence
from kafka_chaos.harness.errors import ConfigError, HarnessError
from kafka_chaos.harness.rates import rate_text
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.options import (
    add_debug_options,
    add_run_options,
    build_spec,
    cli_overrides,
    debug_overrides,
    load_mapping,
)
from kafka_chaos.run import RunOutcome, run_test
from kafka_chaos.scenarios import describe, scenario_layer
from kafka_chaos.shrink.cli import anomalies, default_anomalies
from kafka_chaos.suite import run_suite


def add_commands(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser(
        "run",
        help="run a chaos test and write its report",
        description="Bring up (or reuse) a cluster, run the workload under faults, heal, "
        "drain, check and report. Exit 0 valid, 1 invalid, 2 unknown, 3+ harness error.",
    )
    run.add_argument("--scenario", help="a built-in preset (see `kafka-chaos scenarios`)")
    run.add_argument("--config", type=Path, help="JSON/YAML file of run options")
    run.add_argument(
        "--replay",
        type=Path,
        metavar="RUN_DIR",
        help="replay the fault schedule recorded in RUN_DIR",
    )
    run.add_argument("--store", type=Path, default=store_mod.DEFAULT_STORE)
    add_run_options(run)
    run.set_defaults(handler=_run)

    suite = sub.add_parser("suite", help="run a list of scenarios; write JUnit XML")
    suite.add_argument("suite_file", type=Path, metavar="SUITE.yaml")
    suite.add_argument("--store", type=Path, default=None)
    suite.add_argument("--junit", type=Path, default=None, help="JUnit XML path")
    suite.set_defaults(handler=_suite)

    rep = sub.add_parser("reproduce", help="re-run a recorded run with its config and schedule")
    rep.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    rep.add_argument("--repeat", type=int, default=1)
    rep.add_argument("--store", type=Path, default=store_mod.DEFAULT_STORE)
    add_debug_options(rep)
    rep.set_defaults(handler=_reproduce)

    sc = sub.add_parser("scenarios", help="list the built-in scenario presets")
    sc.set_defaults(handler=_scenarios)


def spec_from_args(args: argparse.Namespace, *more: dict[str, Any]) -> TestSpec:
    """Scenario, config file, replayed schedule, flags, then ``more``, each over the last."""
    layers: list[dict[str, Any]] = []
    if args.scenario:
        layers.append(scenario_layer(args.scenario))
    if args.config:
        layers.append(load_mapping(args.config))
    if args.replay:
        layers.append(replay_layer(args.replay))
    layers.append(cli_overrides(args))
    return build_spec(*layers, *more)


def replay_layer(run_dir: Path) -> dict[str, Any]:
    """The recorded fault schedule of ``run_dir``, to be replayed exactly."""
    run = store_mod.resolve_run_dir(run_dir)
    schedule = run.read_json(store_mod.SCHEDULE)
    ops = schedule.get("ops")
    if not isinstance(ops, list):
        raise ConfigError(f"{run.file(store_mod.SCHEDULE)}: no 'ops' list")
    return {"nemesis": {"schedule": ops}, "seed": schedule.get("seed", 0)}


def _print_outcome(outcome: RunOutcome, prefix: str = "") -> None:
    if outcome.interrupted:
        print(f"{prefix}interrupted; cluster healed. Partial run: {outcome.run_dir.path}")
        return
    print(f"{prefix}verdict: {outcome.verdict}")
    if outcome.expectation_held is not None:
        print("expectation held" if outcome.expectation_held else "expectation NOT held")
    for line in _answer_lines(outcome.run_dir):
        print(f"{prefix}{line}")
    print(f"report: {outcome.report}")


def _answer_lines(run: store_mod.RunDir) -> list[str]:
    """The loss figures and what the replicas (or, on Tansu, the storage) say, when the
    run got that far."""
    lines = []
    for name, say in (
        (store_mod.RESULTS, answer_line),
        (replica_verify.RESULT, replica_verify.summary),
        (tansu_evidence.RESULT, tansu_evidence.summary),
    ):
        try:
            lines.append(say(run.read_json(name)))
        except (OSError, ValueError, HarnessError):
            continue
    return lines


def _run(args: argparse.Namespace) -> int:
    if cli_overrides(args).get("producer", {}).get("client") == BOTH:
        return _run_per_client(args)
    spec = spec_from_args(args)
    outcome = run_test(spec, store=args.store)
    _print_outcome(outcome)
    return outcome.exit_code


BOTH = "both"
CLIENTS = ("librdkafka", "java")


def _run_per_client(args: argparse.Namespace) -> int:
    """``--client both``: the run once per client, named ``NAME-CLIENT``, on one cluster.

    The second run replays the first's recorded fault schedule under the same
    seed, so the two differ only in the client.  The Java run gets a process
    of its own (kafka_chaos/child_run.py).  Both are built before either runs,
    so a setting one client refuses stops both in one line.  The exit code is
    the worse of the two; the store index shows them side by side.
    """
    first = spec_from_args(args, _client_layer(CLIENTS[0]))
    first = dataclasses.replace(first, name=f"{first.name}-{CLIENTS[0]}")
    spec_from_args(args, _client_layer(CLIENTS[1]))  # refused settings: before any run
    outcomes = [run_test(first, store=args.store)]
    _print_outcome(outcomes[0], f"{CLIENTS[0]}: ")
    if outcomes[0].interrupted:
        return outcomes[0].exit_code
    replay = {**replay_layer(outcomes[0].run_dir.path), "seed": first.seed}
    second = spec_from_args(args, replay, _client_layer(CLIENTS[1]))
    second = dataclasses.replace(second, name=first.name.removesuffix(CLIENTS[0]) + CLIENTS[1])
    outcomes.append(run_in_child(second, args.store))
    _print_outcome(outcomes[1], f"{CLIENTS[1]}: ")
    verdicts = ", ".join(f"{c} {o.verdict}" for c, o in zip(CLIENTS, outcomes, strict=True))
    print(f"side by side (seed {first.seed}, one fault schedule): {verdicts}")
    print(f"index: {Path(args.store) / 'index.html'}")
    return max(o.exit_code for o in outcomes)


def _client_layer(client: str) -> dict[str, Any]:
    return {"producer": {"client": client}, "consumer": {"client": client}}


def _scenarios(_args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    table = Table("scenario", "expects", "what it shows")
    for name, expected, text in describe():
        table.add_row(name, expected, text)
    Console().print(table)
    return 0


def _suite(args: argparse.Namespace) -> int:
    return run_suite(args.suite_file, store=args.store, junit=args.junit)


def _reproduce(args: argparse.Namespace) -> int:
    """Re-run with the recorded config, seed and fault schedule, N times."""
    run = store_mod.resolve_run_dir(args.run_dir)
    if args.repeat < 1:
        raise ConfigError("--repeat must be at least 1")
    config = run.read_json(store_mod.CONFIG)
    layers = [config, replay_layer(run.path), debug_overrides(args)]
    spec = build_spec(*layers)
    original = _anomalies(run)
    if not original:
        print(f"{run.path} recorded no anomaly; reproducing its verdict instead")
    reproduced = 0
    for i in range(args.repeat):
        # A Java run holds its process's JVM (kafka_chaos/child_run.py).
        outcome = (
            run_in_child(spec, args.store)
            if needs_own_process(spec)
            else run_test(spec, args.store)
        )
        if outcome.interrupted:
            return outcome.exit_code
        found = _anomalies(outcome.run_dir, every=True)
        hit = bool(found & original) if original else outcome.verdict == config_verdict(run)
        reproduced += hit
        print(
            f"run {i + 1}/{args.repeat}: {outcome.verdict} "
            f"({'reproduced' if hit else 'not reproduced'}) {outcome.report}"
        )
    print(f"reproduced {rate_text(reproduced, args.repeat)}")
    return 0 if reproduced == args.repeat else 1


def _anomalies(run: store_mod.RunDir, every: bool = False) -> set[str]:
    """The findings a reproduction must show again, as a shrink keeps them (the errors,
    else the warnings); ``every``: a new run's findings of any severity."""
    try:
        results = run.read_json(store_mod.RESULTS)
        return anomalies(results, errors_only=False) if every else default_anomalies(results)
    except HarnessError:
        return set()


def config_verdict(run: store_mod.RunDir) -> str | None:
    try:
        return json.loads(run.file(store_mod.RESULTS).read_text()).get("verdict")
    except (OSError, ValueError):
        return None
