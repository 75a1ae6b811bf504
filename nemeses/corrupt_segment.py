"""Corrupt segment: one replica's newest log segment damaged at its tail while its broker is down.

Why this fault: a disk that flips bits or loses a file's tail hands Kafka a
log that is not what it wrote.  Kafka's defence is its own: every record
batch carries a CRC, and a broker that did not shut down cleanly recovers
each segment above its recovery point on start (LogLoader.recoverLog ->
LogSegment.recover), checking every batch and truncating the segment at
the first one that is invalid or incomplete.  It logs "Found invalid
messages in log segment <file> at byte offset <n>" for a bad CRC and
"Corruption found in segment <base>, truncating to offset <n>" for either
kind; the follower then fetches the lost tail from the leader again.

How: SIGKILL the target's broker (so the restart recovers: a clean
shutdown would skip it), pick the workload topic's partition whose newest
segment on that node is largest, and either flip (XOR 0xff) or cut off its
last ``bytes`` bytes.  That segment is the active one, always above the
recovery point (Kafka checkpoints it only on flush or roll).  Heal starts
the broker; replica verification (forensics/replica_verify.py) collects
its recovery lines into replicas.json's ``recoveries``.

``segment: closed`` damages the newest closed segment (the second newest)
instead.  Once Kafka has flushed it on roll and checkpointed the recovery
point past it, an unclean start does not re-read it, so nothing is found
on start; the damage shows only when those bytes are read
(docs/disk-faults.md says what Kafka 4.4 did).  ``resolved`` records the
checkpointed recovery point and whether the segment lay below it.
"""

from __future__ import annotations

import json
import random
from shlex import quote
from typing import TYPE_CHECKING, Any

from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.fan_out import on_nodes
from kafka_chaos.harness.node import Node
from kafka_chaos.nemeses.base import (
    FAULT_STEP_TIMEOUT_S,
    NEMESIS_COMMAND_TIMEOUT_S,
    FaultOp,
    NemesisError,
)
from kafka_chaos.nemeses.kinds import Ctx, FaultKind, Model, Params
from kafka_chaos.nemeses.process import STOPPED_SWEEP, ensure_running, kill

if TYPE_CHECKING:
    from hypothesis.strategies import DrawFn

NAME = "corrupt-segment"
MODES = ("flip", "truncate")
MAX_BYTES = 4096
DEFAULTS: Params = {"mode": "flip", "bytes": 8}
# ``segment``: which segment is damaged.  "active" (the newest) when absent: it is
# not filled in, so schedules recorded before it existed, and the seeded
# generator's drafts, stay byte for byte what they were.  "closed" (the newest
# closed segment) only comes from a schedule or a config that names it.
SEGMENTS = ("active", "closed")
PARAMS = (*DEFAULTS, "segment")

# Run on the node: find the partition directory of TOPIC whose chosen segment (the
# newest, or the newest closed one: the second newest) is largest, damage its tail,
# print what was done as JSON (exit 3: nothing to damage).  It also reads the
# recovery point Kafka last checkpointed for that partition: a segment wholly
# below it is not re-read on an unclean start.
_SCRIPT = r"""
import json, os, sys
data, topic, mode, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
which = sys.argv[5] if len(sys.argv) > 5 else "active"
best, seen = None, []
for name in sorted(os.listdir(data)):
    head, _, part = name.rpartition("-")
    if head != topic or not part.isdigit():
        continue
    d = os.path.join(data, name)
    logs = sorted(f for f in os.listdir(d) if f.endswith(".log"))
    if len(logs) < (2 if which == "closed" else 1):
        seen.append("%s: %d segment(s)" % (name, len(logs)))
        continue
    i = len(logs) - (2 if which == "closed" else 1)
    path = os.path.join(d, logs[i])
    size = os.path.getsize(path)
    seen.append("%s/%s: %d bytes" % (name, logs[i], size))
    if size and (best is None or size > best[2]):
        best = (int(part), path, size, len(logs), int(logs[i][:-4]), int(logs[i + 1][:-4])
                if i + 1 < len(logs) else None)
if best is None:
    print(json.dumps({"error": "no %s segment of %s with data in %s (%s)"
                      % (which, topic, data, ", ".join(seen) or "none")}))
    sys.exit(3)
part, path, size, count, base, next_base = best
recovery_point = None
try:
    with open(os.path.join(data, "recovery-point-offset-checkpoint")) as f:
        for line in f.read().splitlines()[2:]:
            t, p, o = line.rsplit(" ", 2)
            if t == topic and int(p) == part:
                recovery_point = int(o)
except (OSError, ValueError):
    pass
n = min(n, size)
if mode == "truncate":
    os.truncate(path, size - n)
else:
    with open(path, "r+b") as f:
        f.seek(size - n)
        tail = f.read(n)
        f.seek(size - n)
        f.write(bytes(b ^ 0xFF for b in tail))
        f.flush()
        os.fsync(f.fileno())
print(json.dumps({"partition": part, "segment": path, "segments": count, "which": which,
                  "base_offset": base, "next_base_offset": next_base,
                  "recovery_point": recovery_point,
                  "below_recovery_point": (recovery_point is not None and next_base is not None
                                           and next_base <= recovery_point),
                  "size_before": size, "size_after": os.path.getsize(path),
                  "from_byte": size - n, "mode": mode, "bytes": n}))
"""


def damage(node: Node, topic: str, mode: str, n: int, segment: str = "active") -> dict[str, Any]:
    """Damage the tail of ``topic``'s largest newest (or newest closed) segment on ``node``;
    what was done."""
    data = node.path("data", "kafka")
    res = node.run(
        f"python3 -c {quote(_SCRIPT)} {quote(data)} {quote(topic)} {quote(mode)} {int(n)} "
        f"{quote(segment)}",
        timeout=NEMESIS_COMMAND_TIMEOUT_S,
        check=False,
    )
    try:
        done = json.loads(res.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        done = {"error": (res.stderr or res.stdout).strip()[-300:] or f"exit {res.exit_code}"}
    if res.exit_code != 0 or "error" in done:
        raise NemesisError(f"{node.name}: corrupting a segment failed: {done.get('error')}")
    return done


class CorruptSegment(FaultKind):
    """SIGKILL the target's broker and damage a segment's tail; heal restarts it, Kafka recovers."""

    name = NAME
    summary = (
        "The target's broker SIGKILLed and the tail of its newest segment of the topic flipped "
        "or cut (`mode`, `bytes`); heal restarts it and Kafka's recovery truncates the damage. "
        "`segment: closed` damages the newest closed segment, which a restart does not re-read."
    )
    targetable = True
    sweeps = (STOPPED_SWEEP,)  # the damage stays (Kafka repairs it); the broker must come back

    def params(self, params: Params, where: str = "fault") -> Params:
        unknown = sorted(set(params) - set(PARAMS))
        if unknown:
            raise ConfigError(
                f"{where}: {NAME} takes mode, bytes and segment, not {', '.join(unknown)}"
            )
        out = {**DEFAULTS, **params}
        if out.get("segment", "active") not in SEGMENTS:
            raise ConfigError(
                f"{where}: {NAME} segment must be active or closed, not {out['segment']!r}"
            )
        if out["mode"] not in MODES:
            raise ConfigError(f"{where}: {NAME} mode must be flip or truncate, not {out['mode']!r}")
        n = out["bytes"]
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_BYTES:
            raise ConfigError(
                f"{where}: {NAME} bytes must be a whole number 1..{MAX_BYTES}, not {n!r}"
            )
        return out

    def draw_params(self, rng: random.Random, ctx: Ctx) -> Params:
        return {"mode": rng.choice(MODES), "bytes": rng.choice((1, 8, 64))}

    def arbitrary_params(self, draw: DrawFn) -> Params:
        from hypothesis import strategies as st

        out = {"mode": draw(st.sampled_from(MODES)), "bytes": draw(st.integers(1, MAX_BYTES))}
        segment = draw(st.sampled_from((None, *SEGMENTS)))  # None: left out, as old schedules
        return out if segment is None else {**out, "segment": segment}

    def apply(self, cluster: Cluster, op: FaultOp, nodes: list[Node], topic: str | None) -> None:
        if not topic:
            raise NemesisError(f"{NAME} needs the workload's topic, and this run names none")
        p = {**DEFAULTS, **op.params}

        def corrupt(node: Node) -> dict[str, Any]:
            kill(cluster, node)
            return damage(node, topic, p["mode"], int(p["bytes"]), p.get("segment", "active"))

        done = on_nodes(nodes, corrupt, timeout_s=FAULT_STEP_TIMEOUT_S, what=f"applying {NAME}")
        by_node = dict(zip((n.name for n in nodes), done.values(), strict=True))
        op.resolved = {**(op.resolved or {}), "corrupted": by_node}

    def heal(self, cluster: Cluster, op: FaultOp, nodes: list[Node]) -> dict[str, Any] | None:
        on_nodes(nodes, lambda n: ensure_running(cluster, n), timeout_s=FAULT_STEP_TIMEOUT_S,
                 what=f"healing {NAME}").values()  # fmt: skip
        return None

    def model_start(self, model: Model, op: FaultOp) -> None:
        model.mark(op.targets, "down")  # its broker is down while the fault lasts

    def model_end(self, model: Model, op: FaultOp) -> None:
        model.unmark(op.targets, "down")
