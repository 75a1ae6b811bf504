"""Fault schedules: a seeded, composable generator, the realised file, replay.

Generators are small values combined like Jepsen's (``mix``, ``cycle``,
``stagger``, ``time_limit``, ``phases``).  Everything random is drawn from
one ``random.Random(seed)`` passed down explicitly, so the same seed, spec
and node names always give the same schedule.  What a run actually did
(times, resolved leader/controller targets) is written to
``<run_dir>/schedule.json``; feeding that file (or ``spec.nemesis.schedule``)
back in replays it: same ops, same times relative to start, same nodes.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.jsonfile import load_json
from kafka_chaos.harness.spec import NemesisSpec
from kafka_chaos.nemeses import partition, registry
from kafka_chaos.nemeses.base import (
    GROUP_TARGETS,
    REALISED_FIELDS,
    RESOLVED_GROUP_TARGETS,
    TARGET_MODES,
    FaultOp,
    group_size,
)
from kafka_chaos.nemeses.kinds import Ctx, Draft

SCHEDULE_FORMAT = 1
MAX_OPS = 10_000  # guards against a composition that never ends


Source = Callable[[random.Random, Ctx], Iterator[Draft]]
Timed = Callable[[random.Random, Ctx, float], Iterator[FaultOp]]


# --- sources: what ----------------------------------------------------------------


def fault(kind: str) -> Source:
    """An endless stream of one kind of fault with targets drawn from the rng."""
    registry.kind(kind)

    def gen(rng: random.Random, ctx: Ctx) -> Iterator[Draft]:
        while True:
            yield draft(kind, rng, ctx)

    return gen


def draft(kind: str, rng: random.Random, ctx: Ctx) -> Draft:
    """One fault of ``kind``: the nemesis options decide the targeting, the kind the rest."""
    k = registry.kind(kind)
    if ctx.targets in RESOLVED_GROUP_TARGETS and not k.groupable:
        targets, params = k.draw(rng, ctx)  # one node at a time, as with a drawn group
        return Draft(kind, targets, params=params)
    if ctx.targets in GROUP_TARGETS:
        if not k.groupable:  # one node at a time, as with random targets
            targets, params = k.draw(rng, ctx)
            return Draft(kind, targets, params=params)
        nodes = list(ctx.nodes)
        rng.shuffle(nodes)
        targets = sorted(nodes[: group_size(ctx.targets, len(nodes))])
        return Draft(kind, targets, ctx.targets, dict(k.draw_params(rng, ctx)))
    if ctx.targets != "random" and k.targetable:
        # No params.topic: the fault acts on whichever run replays it (``replay_of``).
        params = dict(k.targeted_params(rng, ctx))
        return Draft(kind, [], ctx.targets, params)
    targets, params = k.draw(rng, ctx)
    return Draft(kind, targets, params=params)


def mix(*sources: Source) -> Source:
    """Each fault from a source chosen at random."""
    _need_sources(sources, "mix")

    def gen(rng: random.Random, ctx: Ctx) -> Iterator[Draft]:
        streams = [s(rng, ctx) for s in sources]
        while True:
            yield next(rng.choice(streams))

    return gen


def cycle(*sources: Source) -> Source:
    """Faults from each source in turn."""
    _need_sources(sources, "cycle")

    def gen(rng: random.Random, ctx: Ctx) -> Iterator[Draft]:
        streams = [s(rng, ctx) for s in sources]
        for stream in itertools.cycle(streams):
            yield next(stream)

    return gen


# --- timing: when -----------------------------------------------------------------


def stagger(source: Source, interval_s: float, duration_s: float, jitter: float = 0.5) -> Timed:
    """One fault at a time: a quiet gap of ~interval_s, then a fault of duration_s.

    The gap varies by ±jitter·interval so faults don't fall into lockstep
    with periodic broker work (session timeouts, log rolls).
    """
    if interval_s < 0 or duration_s <= 0:
        raise ConfigError("nemesis: interval_s must be >= 0 and duration_s > 0")

    duration = round(duration_s, 3)

    def gen(rng: random.Random, ctx: Ctx, t0: float) -> Iterator[FaultOp]:
        t = t0
        for d in source(rng, ctx):
            # whole milliseconds, rounded up so a fault never starts before the last ends
            t = math.ceil((t + interval_s * rng.uniform(1 - jitter, 1 + jitter)) * 1000) / 1000
            yield FaultOp(-1, d.f, t, duration, d.targets, d.target, d.params)
            t += duration

    return gen


def time_limit(timed: Timed, limit_s: float) -> Timed:
    """Only the faults that end within ``limit_s`` of the generator's start."""

    def gen(rng: random.Random, ctx: Ctx, t0: float) -> Iterator[FaultOp]:
        for op in timed(rng, ctx, t0):
            if op.end_s > t0 + limit_s + 1e-9:
                return
            yield op

    return gen


def phases(*timed: Timed) -> Timed:
    """Run generators one after another, each starting where the last one ended."""

    def gen(rng: random.Random, ctx: Ctx, t0: float) -> Iterator[FaultOp]:
        t = t0
        for phase in timed:
            for op in phase(rng, ctx, t):
                yield op
                t = max(t, op.end_s)

    return gen


def _need_sources(sources: Sequence[Source], name: str) -> None:
    if not sources:
        raise ConfigError(f"{name}: needs at least one fault source")


# --- schedules --------------------------------------------------------------------


@dataclass
class Schedule:
    """A realised list of faults plus what produced it."""

    ops: list[FaultOp]
    seed: int | None = None
    nodes: list[str] = field(default_factory=list)
    time_limit_s: float | None = None
    replayed_from: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": SCHEDULE_FORMAT,
            "seed": self.seed,
            "nodes": self.nodes,
            "time_limit_s": self.time_limit_s,
            "replayed_from": self.replayed_from,
            "ops": [op.to_dict() for op in self.ops],
        }

    def plan(self) -> list[dict[str, Any]]:
        return [op.plan() for op in self.ops]

    def save(self, path: Path) -> None:
        """Atomic write: a reader (or a crash) never sees half a file."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")
        tmp.replace(path)

    @classmethod
    def from_dict(cls, data: Any, where: str = "schedule") -> Schedule:
        if isinstance(data, list):  # spec.nemesis.schedule: just the ops
            data = {"ops": data}
        if not isinstance(data, dict) or not isinstance(data.get("ops"), list):
            raise ConfigError(f"{where}: expected a mapping with an 'ops' list, or a list of ops")
        if data.get("format", SCHEDULE_FORMAT) != SCHEDULE_FORMAT:
            raise ConfigError(f"{where}: unsupported schedule format {data.get('format')!r}")
        ops = [registry.op_from_dict(op, f"{where}.ops[{i}]") for i, op in enumerate(data["ops"])]
        validate_sequence(ops, where)
        return cls(
            ops=ops,
            seed=data.get("seed"),
            nodes=list(data.get("nodes") or []),
            time_limit_s=data.get("time_limit_s"),
            replayed_from=data.get("replayed_from"),
        )

    @classmethod
    def load(cls, path: Path) -> Schedule:
        return cls.from_dict(load_json(path, "schedule"), str(path))


def validate_sequence(ops: Sequence[FaultOp], where: str = "schedule") -> None:
    """Ids unique; faults in time order and never overlapping.

    The runner heals each fault before the next starts, so one schedule
    never stacks two faults; that keeps every fault's effect attributable.
    """
    seen: set[int] = set()
    last_end = 0.0
    for op in ops:
        if op.id in seen:
            raise ConfigError(f"{where}: duplicate fault id {op.id}")
        seen.add(op.id)
        if op.at_s + 1e-9 < last_end:
            raise ConfigError(
                f"{where}: fault {op.id} starts at {op.at_s}s, before the previous one ends "
                f"({last_end}s)"
            )
        last_end = op.end_s


def realise(timed: Timed, rng: random.Random, ctx: Ctx, t0: float = 0.0) -> list[FaultOp]:
    """Draw a finite list of ops and number them 0..n-1."""
    ops = []
    for i, op in enumerate(itertools.islice(timed(rng, ctx, t0), MAX_OPS + 1)):
        if i == MAX_OPS:
            raise ConfigError(f"schedule: more than {MAX_OPS} faults; add a time limit")
        op.id = i
        ops.append(op)
    return ops


def validate_nemesis(spec: NemesisSpec) -> None:
    for kind in spec.faults:
        registry.kind(kind, "nemesis.faults")
    if spec.targets not in TARGET_MODES:
        raise ConfigError(f"nemesis.targets: {spec.targets!r} (known: {', '.join(TARGET_MODES)})")
    if spec.interval_s < 0:
        raise ConfigError(f"nemesis.interval_s: must be >= 0, got {spec.interval_s}")
    if spec.duration_s <= 0:
        raise ConfigError(f"nemesis.duration_s: must be > 0, got {spec.duration_s}")


def generate(
    spec: NemesisSpec,
    nodes: Sequence[str],
    time_limit_s: float,
    seed: int,
    topic: str | None = None,
) -> Schedule:
    """The schedule a seed gives: staggered faults mixed from spec.faults."""
    validate_nemesis(spec)
    if not spec.faults:  # a run without faults: an empty schedule
        return Schedule(ops=[], seed=seed, nodes=list(nodes), time_limit_s=time_limit_s)
    if not nodes:
        raise ConfigError("schedule: no nodes to inject faults into")
    gen = time_limit(
        stagger(mix(*(fault(k) for k in spec.faults)), spec.interval_s, spec.duration_s),
        time_limit_s,
    )
    rng = random.Random(seed)
    ops = realise(gen, rng, Ctx(tuple(nodes), spec.targets, topic))
    return Schedule(ops=ops, seed=seed, nodes=list(nodes), time_limit_s=time_limit_s)


def for_spec(
    spec: NemesisSpec,
    nodes: Sequence[str],
    time_limit_s: float,
    seed: int,
    topic: str | None = None,
) -> Schedule:
    """The recorded schedule if the spec carries one, else a generated one."""
    if spec.schedule is not None:
        sched = Schedule.from_dict(spec.schedule, "nemesis.schedule")
        check_nodes(sched, nodes)
        return replay_of(sched, "nemesis.schedule")
    return generate(spec, nodes, time_limit_s, seed, topic)


# A run's own topic: its base name and the run's id (kafka_chaos.run), e.g. chaos-20261125t111818z.
RUN_TOPIC = re.compile(r".+-\d{8}t\d{6}z$")


def replay_of(recorded: Schedule, source: str) -> Schedule:
    """A fresh copy of a recorded schedule: resolved targets fixed, results cleared."""
    ops = []
    for op in recorded.ops:
        data = op.to_dict()
        for name in REALISED_FIELDS:
            data.pop(name, None)
        if RUN_TOPIC.match(str(data.get("params", {}).get("topic", ""))):
            # The recorded run's own topic (schedules recorded before 2026-11-27 name
            # it): that topic is gone, and the fault belongs on this run's.
            data["params"] = {k: v for k, v in data["params"].items() if k != "topic"}
        ops.append(registry.op_from_dict(data))
    return Schedule(
        ops=ops,
        seed=recorded.seed,
        nodes=list(recorded.nodes),
        time_limit_s=recorded.time_limit_s,
        replayed_from=source,
    )


def check_nodes(sched: Schedule, nodes: Sequence[str]) -> None:
    """A replay must name only nodes the cluster has."""
    known = set(nodes)
    for op in sched.ops:
        registry.validate_op(op, f"schedule fault {op.id}")
        missing = [t for t in op.targets if t not in known]
        if missing:
            raise ConfigError(
                f"schedule fault {op.id} ({op.f}) targets {missing}, which this cluster lacks "
                f"(nodes: {', '.join(nodes)})"
            )
        grudge = op.params.get("grudge")
        if grudge is not None:
            partition.validate_grudge(grudge, nodes)


# --- execution order ----------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    at_s: float
    phase: str  # start | end
    op: FaultOp


def steps(ops: Sequence[FaultOp]) -> list[Step]:
    """The order the runner applies and heals faults in.

    Shared by the runner and the property tests' cluster model, so the model
    checks the real sequencing rather than a copy of it.
    """
    out = []
    for op in ops:
        out.append(Step(op.at_s, "start", op))
        out.append(Step(op.end_s, "end", op))
    return out
