"""Clock faults, as Jepsen's clock nemesis has them: bump, strobe, reset; their kinds.

A bump moves a node's wall clock by ``delta_ms``; a strobe flips it between
that offset and the true time every ``period_ms`` for the fault's duration;
a reset (every heal) puts it back and stops any strobe.  How a clock is
moved is the cluster's business (``Cluster.clock``), not the nemesis's:

- ``faketime`` (local nodes, which share one kernel clock): every JVM of the
  node runs under libfaketime and reads its offset from
  ``kafka_config.faketime_file``; moving the clock is rewriting that file,
  and the JVMs see it within ``kafka_config.FAKETIME_REFRESH_S`` (1 s).
  A fault's history line is written when the file is; the nemesis does not
  wait out that second, which would put every clock fault's end 1.2 s off
  plan (measured), so a clock change reaches the broker up to 1 s after
  its line says.
- ``system`` (Vagrant VMs, SSH hosts): ``date -s`` relative to the current
  time.  The offset applied is remembered in ``run/clock-offset-ms`` and a
  reset undoes exactly it, so no time server is needed (a running NTP
  daemon would fight the fault: stop it on such nodes).

Both keep the offset as state on the node, so applying or healing twice is
harmless.  A strobe is a detached shell loop on the node with its own pid
file in ``run/``, stopped by that pid once its command line proves it is
this node's loop (local nodes share one PID namespace), and bounded by the
fault's duration, so it ends and resets the clock by itself even if the
harness dies.
"""

from __future__ import annotations

import base64
import random
from abc import abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from kafka_chaos.harness import kafka_config as kc
from kafka_chaos.harness import services
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.node import Node, quote
from kafka_chaos.nemeses.base import (
    NEMESIS_COMMAND_TIMEOUT_S,
    TARGETING_PARAMS,
    FaultOp,
    NemesisError,
)
from kafka_chaos.nemeses.kinds import Ctx, Model, NodeFault, Params, Sweep

if TYPE_CHECKING:
    from hypothesis.strategies import DrawFn

STROBE_SCRIPT = "clock-strobe.sh"
STROBE_PID = "clock-strobe.pid"
STROBE_LOG = "clock-strobe.log"
OFFSET_RECORD = "clock-offset-ms"
STROBE_STOP_WAIT_S = 2.5  # how long a SIGKILLed loop may take to be gone
STROBE_START_WAIT_S = 3.0


def offset_text(ms: int) -> str:
    """An offset in libfaketime's syntax, seconds with a sign: ``+0``, ``+1.500``, ``-0.250``."""
    if ms == 0:
        return "+0"
    whole, frac = divmod(abs(ms), 1000)
    return f"{'-' if ms < 0 else '+'}{whole}.{frac:03d}"


class FaketimeClock:
    """Per-node clock of the node's JVMs: the offset file libfaketime reads."""

    name = "faketime"

    def prelude(self, node: Node) -> str:
        return f"F={quote(kc.faketime_file(node))}\nmkdir -p {quote(node.path('run'))}\n"

    def set_to(self, ms: int) -> str:
        # a new file moved into place: libfaketime never reads half an offset
        return f'printf \'%s\\n\' {offset_text(ms)} > "$F.$$" && mv -f "$F.$$" "$F"'

    def if_moved(self, action: str) -> str:
        return f'case "$(cat "$F" 2>/dev/null)" in ""|+0) ;; *) {action};; esac'

    def ready(self, cluster: Cluster, node: Node) -> None:
        """Refuse when a JVM would ignore the offset file: a fault must not pretend."""
        from kafka_chaos.harness import kafka_db  # late: the pure parts need no Kafka modules

        res = node.run(
            f"test -r {quote(kc.FAKETIME_LIB)}", timeout=NEMESIS_COMMAND_TIMEOUT_S, check=False
        )
        if not res.ok:
            raise NemesisError(
                f"{node.name}: no {kc.FAKETIME_LIB}; install libfaketime (setup.sh) "
                "to inject clock faults on local nodes"
            )
        unfaked = kafka_db.unfaked_services(cluster, node)
        if unfaked:
            raise NemesisError(
                f"{node.name}: {', '.join(unfaked)} runs on the real clock, not under "
                f"libfaketime reading {kc.faketime_file(node)} (started by an older launcher "
                "or without libfaketime); recreate the cluster to inject clock faults"
            )


class SystemClock:
    """The node's own clock, set with ``date -s``; the offset applied is remembered."""

    name = "system"

    def prelude(self, node: Node) -> str:
        record = quote(node.path("run", OFFSET_RECORD))
        return (
            f"R={record}\nmkdir -p {quote(node.path('run'))}\n"
            'CUR=$(cat "$R" 2>/dev/null); case "$CUR" in ""|-|*[!0-9-]*) CUR=0;; esac\n'
            # move the clock by the difference to the wanted offset, then remember it;
            # relative to "now" within one date process, so a flip loses no time
            "adjust_to() { d=$(($1 - CUR)); if [ $d -ne 0 ]; then "
            "sg=+; m=$d; if [ $m -lt 0 ]; then sg=-; m=$((-m)); fi; "
            'date -s "now $sg$((m / 1000)).$(printf %03d $((m % 1000))) seconds" >/dev/null '
            "|| return 1; fi; "
            'CUR=$1; echo $1 > "$R.$$" && mv -f "$R.$$" "$R"; }\n'
        )

    def set_to(self, ms: int) -> str:
        return f"adjust_to {int(ms)}"

    def if_moved(self, action: str) -> str:
        return f'if [ "$CUR" -ne 0 ]; then {action}; fi'

    def ready(self, cluster: Cluster, node: Node) -> None:
        return None  # `date -s` failing (not root) fails the fault with its error


Mechanism = FaketimeClock | SystemClock


def mechanism(cluster: Cluster) -> Mechanism:
    """The way this cluster's node clocks move, as the cluster says."""
    if cluster.clock == "faketime":
        return FaketimeClock()
    if cluster.clock == "system":
        return SystemClock()
    raise NemesisError(f"cluster {cluster.name!r}: unknown clock mechanism {cluster.clock!r}")


# --- shell ----------------------------------------------------------------------------


def stop_strobe_script(node: Node) -> str:
    """Stop this node's strobe loop, if one runs, and forget its pid; sets ``stopped=1``.

    The pid is signalled only while its command line names this node's loop
    script, so a reused pid or another node's loop is never touched.
    """
    pid_file = quote(node.path("run", STROBE_PID))
    script = quote(node.path("run", STROBE_SCRIPT))
    loops = int(STROBE_STOP_WAIT_S * 20)
    return (
        services.ALIVE_FN
        + f"stopped=0; pid=$(cat {pid_file} 2>/dev/null); "
        + 'case "$pid" in ""|*[!0-9]*) pid=;; esac\n'
        + 'if [ -n "$pid" ] && alive "$pid" && '
        + f"tr '\\0' '\\n' < /proc/$pid/cmdline 2>/dev/null | grep -qxF -- {script}; then\n"
        # SIGKILL, not TERM: the loop then cannot flip the clock after this
        # script resets it, and a heal does not wait on a loaded machine for
        # the loop's own exit path (that wait put strobe heals 1 s off plan)
        + "  kill -KILL $pid 2>/dev/null; i=0\n"
        + f"  while [ $i -lt {loops} ] && alive $pid; do sleep 0.05; i=$((i+1)); done\n"
        + "  stopped=1\nfi\n"
        + f"rm -f {pid_file}\n"
    )


def set_script(clock: Mechanism, node: Node, ms: int) -> str:
    """Stop any strobe, then set the offset to ``ms``; prints ``changed`` if a fault was undone."""
    return (
        stop_strobe_script(node)
        + clock.prelude(node)  # after the stop: the loop may have moved the clock
        + "changed=$stopped\n"
        + clock.if_moved("changed=1")
        + "\n"
        + clock.set_to(ms)
        + "\n"
        + '[ "$changed" = 1 ] && echo changed\nexit 0\n'
    )


def strobe_loop(
    clock: Mechanism, node: Node, delta_ms: int, period_ms: int, duration_ms: int
) -> str:
    """The strobe's own script (POSIX sh): flip between ``delta_ms`` and 0 until the deadline.

    Times are on the boot clock (/proc/uptime), which no wall-clock change
    moves, and flips keep to a fixed grid of ``period_ms`` however long a
    flip takes.  SIGTERM ends the loop between two steps, never inside one,
    and whichever way it ends it leaves the offset at 0.
    """
    pid_file = quote(node.path("run", STROBE_PID))
    period = int(period_ms)
    return (
        "#!/bin/sh\n# written by kafka-chaos: a clock strobe that ends by itself\n"
        f"echo $$ > {pid_file}\n"
        + clock.prelude(node)
        + "stop=0\ntrap 'stop=1' TERM INT\n"
        + "uptime_ms() { read u _ < /proc/uptime; echo $((${u%.*}${u#*.} * 10)); }\n"
        + f"next=$(uptime_ms); end=$((next + {int(duration_ms)})); on=0; sp=\n"
        + "while [ $stop -eq 0 ]; do\n"
        + "  now=$(uptime_ms); [ $now -lt $end ] || break\n"
        + "  if [ $now -ge $next ]; then\n"
        + f"    if [ $on -eq 0 ]; then {clock.set_to(delta_ms)}; on=1; "
        + f"else {clock.set_to(0)}; on=0; fi\n"
        # a flip that overran a whole period is not made up for by flips back to back
        + f"    next=$((next + {period})); [ $next -gt $now ] || next=$((now + {period}))\n"
        + "  fi\n"
        + "  wake=$next; [ $wake -lt $end ] || wake=$end\n"
        + "  left=$((wake - $(uptime_ms))); [ $left -gt 0 ] || continue\n"
        # an unreaped child keeps its pid, so killing a sleep not yet waited for is safe
        + '  sleep "$((left / 1000)).$(printf %03d $((left % 1000)))" & sp=$!\n'
        + "  wait $sp && sp=\n"
        + "done\n"
        + '[ -z "$sp" ] || kill $sp 2>/dev/null\n'
        + clock.set_to(0)
        + "\n"
        + f'[ "$(cat {pid_file} 2>/dev/null)" = "$$" ] && rm -f {pid_file}\nexit 0\n'
    )


def start_strobe_script(
    clock: Mechanism, node: Node, delta_ms: int, period_ms: int, duration_ms: int
) -> str:
    """Replace any running strobe with a new detached loop; fails unless it started."""
    run, logs = node.path("run"), node.path("logs")
    script = quote(node.path("run", STROBE_SCRIPT))
    pid_file = quote(node.path("run", STROBE_PID))
    log_file = quote(node.path("logs", STROBE_LOG))
    b64 = base64.b64encode(strobe_loop(clock, node, delta_ms, period_ms, duration_ms).encode())
    loops = int(STROBE_START_WAIT_S * 10)
    return (
        stop_strobe_script(node)
        + f"mkdir -p {quote(run)} {quote(logs)}\n"
        + f"echo {b64.decode()} | base64 -d > {script}.tmp && mv -f {script}.tmp {script}\n"
        + f"setsid nohup sh {script} </dev/null >>{log_file} 2>&1 &\n"
        + f"i=0; while [ $i -lt {loops} ] && ! [ -s {pid_file} ]; do sleep 0.1; i=$((i+1)); done\n"
        + f"[ -s {pid_file} ] || {{ echo 'the clock strobe did not start' >&2; "
        + f"tail -n 5 {log_file} >&2; exit 1; }}\n"
    )


# --- faults ---------------------------------------------------------------------------


def bump(cluster: Cluster, node: Node, delta_ms: int) -> None:
    """Move the node's clock to ``delta_ms`` off the true time (stops any strobe first)."""
    clock = mechanism(cluster)
    clock.ready(cluster, node)
    node.run(set_script(clock, node, delta_ms), timeout=NEMESIS_COMMAND_TIMEOUT_S)


def strobe(cluster: Cluster, node: Node, delta_ms: int, period_ms: int, duration_s: float) -> None:
    """Start flipping the node's clock; the loop ends by itself after ``duration_s``."""
    clock = mechanism(cluster)
    clock.ready(cluster, node)
    duration_ms = max(1, round(duration_s * 1000))
    node.run(
        start_strobe_script(clock, node, delta_ms, period_ms, duration_ms),
        timeout=NEMESIS_COMMAND_TIMEOUT_S,
    )


def reset(cluster: Cluster, node: Node) -> bool:
    """Stop any strobe and put the clock back to true time; True if anything was undone."""
    clock = mechanism(cluster)
    res = node.run(set_script(clock, node, 0), timeout=NEMESIS_COMMAND_TIMEOUT_S)
    return "changed" in res.stdout.split()


# --- the kinds ------------------------------------------------------------------------

# Bounds of the clock faults' params.  A strobe flips no faster than once a
# second because local nodes' JVMs (libfaketime) re-read their offset only
# that often (by default every other second, so each JVM sees every state);
# the same bound everywhere keeps a schedule replayable on every backend.
MAX_CLOCK_DELTA_MS = 86_400_000  # a day
MIN_STROBE_PERIOD_MS = 1_000
MAX_STROBE_PERIOD_MS = 60_000

# After rules and packet faults, before processes: a broker the sweep
# restarts then starts on true time.
CLOCK_SWEEP = Sweep(
    "clock",
    order=30,
    undo=lambda cluster, node, every_tag: reset(cluster, node),
    model=lambda model: _model_reset(model, model.names),
    done="reset the clock",
)


class ClockFault(NodeFault):
    """A node's clock moved off true time; every heal puts it back (``reset``)."""

    targetable = True
    sweeps = (CLOCK_SWEEP,)
    defaults: ClassVar[dict[str, int]]
    max_log2_delta: ClassVar[float]  # generated offsets reach 2**this ms

    def params(self, params: Params, where: str = "fault") -> Params:
        """Unknown keys are refused (a typo like ``delta`` must not silently run
        the default), except the ones leader/controller targeting adds."""
        f, defaults = self.name, self.defaults
        unknown = sorted(set(params) - set(defaults) - set(TARGETING_PARAMS))
        if unknown:
            raise ConfigError(
                f"{where}: {f} has no param(s) {unknown} (known: {', '.join(defaults)})"
            )
        out = {**defaults, **params}
        delta = out["delta_ms"]
        if not _is_int(delta) or delta == 0 or abs(delta) > MAX_CLOCK_DELTA_MS:
            raise ConfigError(
                f"{where}: {f} delta_ms must be a non-zero integer within "
                f"±{MAX_CLOCK_DELTA_MS}, got {delta!r}"
            )
        if "period_ms" in defaults:
            period = out["period_ms"]
            if not _is_int(period) or not MIN_STROBE_PERIOD_MS <= period <= MAX_STROBE_PERIOD_MS:
                raise ConfigError(
                    f"{where}: {f} period_ms must be an integer from {MIN_STROBE_PERIOD_MS} to "
                    f"{MAX_STROBE_PERIOD_MS}, got {period!r}"
                )
        return out

    def draw_params(self, rng: random.Random, ctx: Ctx) -> Params:
        """Offsets as Jepsen draws them: spread over orders of magnitude, either way."""
        return {"delta_ms": rng.choice((-1, 1)) * round(2 ** rng.uniform(6.7, self.max_log2_delta))}

    def apply_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        self.move(cluster, node, self.params(op.params, f"{op.f} on {node.name}"), op.duration_s)

    @abstractmethod
    def move(self, cluster: Cluster, node: Node, params: Params, duration_s: float) -> None:
        """Move the node's clock as the filled-in ``params`` say."""

    def heal_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        reset(cluster, node)

    def model_start(self, model: Model, op: FaultOp) -> None:
        _model_reset(model, op.targets)  # a clock fault first stops any strobe
        for t in op.targets:
            model.nodes[t].clock_ms = self.params(op.params)["delta_ms"]

    def model_end(self, model: Model, op: FaultOp) -> None:
        _model_reset(model, op.targets)

    def arbitrary_params(self, draw: DrawFn) -> Params:
        """Any valid params; any of them may be left to its default."""
        from hypothesis import strategies as st

        params = {}
        if draw(st.booleans()):
            params["delta_ms"] = draw(
                st.integers(-MAX_CLOCK_DELTA_MS, MAX_CLOCK_DELTA_MS).filter(lambda d: d != 0)
            )
        if "period_ms" in self.defaults and draw(st.booleans()):
            params["period_ms"] = draw(st.integers(MIN_STROBE_PERIOD_MS, MAX_STROBE_PERIOD_MS))
        return params


class ClockBump(ClockFault):
    """Generated bumps move the clock by 0.1 s to about 17 min."""

    summary = (
        "The node's wall clock moved by `delta_ms` for the fault's duration "
        "(docs/faults.md, clock faults)."
    )

    name = "clock-bump"
    defaults = {"delta_ms": 60_000}
    max_log2_delta = 20

    def move(self, cluster: Cluster, node: Node, params: Params, duration_s: float) -> None:
        bump(cluster, node, params["delta_ms"])


class ClockStrobe(ClockFault):
    """Generated strobes move the clock by 0.1 s to about 1 min, flipping every 1 to 8 s."""

    summary = "The node's wall clock flipped between `delta_ms` and true time every `period_ms`."

    name = "clock-strobe"
    defaults = {"delta_ms": 10_000, "period_ms": 2_000}
    max_log2_delta = 16

    def draw_params(self, rng: random.Random, ctx: Ctx) -> Params:
        return {**super().draw_params(rng, ctx), "period_ms": round(2 ** rng.uniform(10, 13))}

    def move(self, cluster: Cluster, node: Node, params: Params, duration_s: float) -> None:
        strobe(cluster, node, params["delta_ms"], params["period_ms"], duration_s)

    def model_start(self, model: Model, op: FaultOp) -> None:
        super().model_start(model, op)
        model.mark(op.targets, "strobing")


def _model_reset(model: Model, names: list[str]) -> None:
    model.unmark(names, "strobing")
    for name in names:
        model.nodes[name].clock_ms = 0


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
