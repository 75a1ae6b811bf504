"""Long-running processes on a node, started and signalled through pid files only.

Why a module of its own: Kafka, ZooKeeper and MirrorMaker are each one
``Service`` (a launcher script in ``<root_dir>/config``, a pid file in
``<root_dir>/run`` the launcher writes, stdout in ``<root_dir>/logs``), and
every signal to any of them goes through ``signal``: it reads the pid file and
checks that the process carries this node's tag (``tag``) before touching
the pid, so a reused pid or another engineer's process on the same host is
never signalled.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kafka_chaos.harness.errors import CommandFailed
from kafka_chaos.harness.node import Node, quote

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 30.0
START_CHECK_S = 3.0
# nice(1) of a slow guest's JVMs: weight 110 against the harness's 1024.
SLOW_GUEST_NICENESS = 10


@dataclass(frozen=True)
class Service:
    """A long-running process on a node and the files that describe it.

    ``tagged_by``: where the process carries its node's tag. A JVM takes
    any ``-D`` system property on its command line; a program that refuses
    unknown arguments (PostgreSQL, Tansu) carries it in its environment,
    which its launcher exports before the ``exec``.
    ``stop_signal``: the signal that asks for a clean stop (PostgreSQL's
    SIGTERM waits for every client to disconnect; SIGINT does not).
    ``with_children``: every other signal goes to the process's children
    too.  PostgreSQL's server is many processes, each in its own session: a
    crash or a pause of the server is one of all of them, and the stop
    signal alone goes to the parent, which brings its children down.
    """

    name: str  # kafka | zookeeper | mirrormaker | postgres: the files below are named after it
    tagged_by: str = "cmdline"  # cmdline | environ
    stop_signal: str = "TERM"
    with_children: bool = False

    def pid_file(self, node: Node) -> str:
        return node.path("run", f"{self.name}.pid")

    def launcher(self, node: Node) -> str:
        return node.path("config", f"{self.name}-start.sh")

    def stdout(self, node: Node) -> str:
        return node.path("logs", f"{self.name}.out")


# --- pid-file guarded signalling -------------------------------------------------


# ``alive PID``: the process exists and is not a zombie (a SIGKILLed JVM
# stays a zombie until reaped, and must count as gone).
ALIVE_FN = (
    "alive() { s=$(sed -n 's/^State:[[:space:]]*\\([A-Z]\\).*/\\1/p' /proc/$1/status "
    '2>/dev/null); [ -n "$s" ] && [ "$s" != Z ]; }; '
)


def tag(service: Service, node: Node) -> str:
    """The whole argument (or environment entry) that marks the process as this node's."""
    if service.tagged_by == "environ":
        return f"KAFKA_CHAOS_ROOT={node.root_dir}"
    return f"-Dkafka.chaos.root={node.root_dir}"


def owned_pid_script(service: Service, node: Node) -> str:
    """Shell that sets $pid to the service's pid if it is alive and ours, else exits 3.

    The tag must be a whole argument (or environment entry), so node ``n1``
    never matches ``n10``'s processes.
    """
    return (
        ALIVE_FN
        + f"pid=$(cat {quote(service.pid_file(node))} 2>/dev/null) || exit 3; "
        + 'case "$pid" in ""|*[!0-9]*) exit 3;; esac; '
        + f"tr '\\0' '\\n' < /proc/$pid/{service.tagged_by} 2>/dev/null "
        + f"| grep -qxF -- {quote(tag(service, node))} "
        + "|| exit 3; alive $pid || exit 3; "
    )


def running(service: Service, node: Node) -> bool:
    res = node.run(owned_pid_script(service, node) + "exit 0", timeout=15, check=False)
    return res.exit_code == 0


def signal(service: Service, node: Node, sig: str, wait_exit_s: float = 0.0) -> bool:
    """Send ``sig`` to the service; with ``wait_exit_s``, wait for it to exit.

    Returns False when the service was not running (nothing signalled).
    """
    wait = ""
    if wait_exit_s > 0:
        loops = max(1, int(wait_exit_s * 5))
        wait = (
            f"i=0; while [ $i -lt {loops} ] && alive $pid; do sleep 0.2; i=$((i+1)); done; "
            f"alive $pid && exit 4; rm -f {quote(service.pid_file(node))}; "
        )
    # Children by their parent's pid (never by name), listed while the parent runs.
    targets = (
        "$pid $(pgrep -P $pid)" if service.with_children and sig != service.stop_signal else "$pid"
    )
    script = owned_pid_script(service, node) + f"kill -{sig} {targets}; " + wait + "exit 0"
    res = node.run(script, timeout=wait_exit_s + 20, check=False)
    if res.exit_code == 3:
        return False
    if res.exit_code == 4:
        raise CommandFailed(f"{node.name}: {service.name} still alive {wait_exit_s}s after {sig}")
    if res.exit_code != 0:
        raise CommandFailed(
            f"{node.name}: signalling {service.name} (SIG{sig}) exited {res.exit_code}: "
            f"{(res.stderr or res.stdout).strip()}"
        )
    return True


def niceness(node: Node) -> str:
    """``nice`` for a slow guest's JVMs, so the harness's commands run on time.

    A guest under software emulation has one vCPU that its JVM fills, and
    sshd and iptables wait for it: on 19x slower guests, side by side on one
    cluster, partitions took 25.3 and 14.6 s to apply without this and 13.8,
    7.9 and 4.5 s with it.  The JVM still gets every cycle nothing else asks
    for.
    """
    return f"nice -n {SLOW_GUEST_NICENESS} " if node.is_slow_guest else ""


def start(service: Service, node: Node) -> bool:
    """Start the service detached from the SSH session; False if it was already running.

    One SSH round trip: check, launch, and wait for the launcher to become
    this node's JVM, all in one script, so a heal that restarts a broker
    ends as soon as the JVM runs (every round trip is 0.1-0.3 s on a
    loaded machine, and heals must end within 1 s of plan).
    """
    launcher = service.launcher(node)
    owned = "( " + owned_pid_script(service, node) + "exit 0 )"
    checks = max(1, int(START_CHECK_S / 0.1))
    res = node.run(
        f"if {owned}; then echo running; exit 0; fi; "
        f"test -f {quote(launcher)} || "
        f"{{ echo 'no {launcher}; run configure first' >&2; exit 1; }}; "
        f"mkdir -p {quote(node.path('run'))} {quote(node.path('logs'))}; "
        f"rm -f {quote(service.pid_file(node))}; "
        f"setsid nohup {niceness(node)}sh {quote(launcher)} "
        f"</dev/null >>{quote(service.stdout(node))} 2>&1 & "
        f"i=0; while [ $i -lt {checks} ]; do sleep 0.1; "
        f"if {owned}; then echo started; exit 0; fi; i=$((i+1)); done; exit 5",
        timeout=START_CHECK_S + 20,
        check=False,
        idempotent=False,  # twice would start two JVMs; callers re-check and start again
    )
    if res.exit_code == 0:
        return res.stdout.split()[-1:] == ["started"]
    if res.exit_code != 5:
        raise CommandFailed(
            f"{node.name}: starting {service.name} exited {res.exit_code}: "
            f"{(res.stderr or res.stdout).strip() or '(no output)'}"
        )
    tail = node.run(f"tail -n 20 {quote(service.stdout(node))}", timeout=15, check=False).stdout
    raise CommandFailed(f"{node.name}: {service.name} did not stay up; its output:\n{tail}")


def stop(service: Service, node: Node, timeout_s: float, slow_ok: bool = False) -> bool:
    """The stop signal (plus SIGCONT so a paused process can act on it), then SIGKILL.

    ``slow_ok``: outliving the grace is expected (whole-cluster stops), so it
    is not worth a warning.
    """
    if not signal(service, node, service.stop_signal):
        return False
    signal(service, node, "CONT")
    timeout_s *= node.time_scale
    try:
        signal(service, node, "0", wait_exit_s=timeout_s)
    except CommandFailed:
        log.log(
            logging.INFO if slow_ok else logging.WARNING,
            "%s: %s still up %ss after SIG%s; killing it",
            node.name,
            service.name,
            service.stop_signal,
            timeout_s,
        )
        kill(service, node)
    return True


def kill(service: Service, node: Node) -> bool:
    return signal(service, node, "KILL", wait_exit_s=10.0)
