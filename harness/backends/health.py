"""Is a node up, and which of its pid-file processes are alive?

Used by ``cluster status`` and ``cluster up`` (reuse or recreate).  For the
local backend, processes are inspected on the host, so a paused or
partitioned node still reports truthfully; remote nodes are asked over SSH.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kafka_chaos.harness.backends.procs import owned, read_pid
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.fan_out import on_nodes
from kafka_chaos.harness.node import Node, quote

PROBE_TIMEOUT_S = 5.0
# Beyond a probe's own timeout: connecting (and reconnecting) time; a node
# still silent after it is down.
PROBE_CONNECT_S = 60.0


@dataclass(frozen=True)
class ProcessState:
    name: str  # pid file stem: kafka, zookeeper, sshd...
    pid: int | None
    alive: bool


def probe_nodes(cluster: Cluster, timeout: float = PROBE_TIMEOUT_S) -> dict[str, bool]:
    """Node name -> answers ``true`` over SSH within ``timeout``; probed in parallel.

    A node whose probe fails, or has not ended in time, is down: never an error.
    """
    probed = on_nodes(
        cluster.nodes,
        lambda n: n.run("true", timeout=timeout),
        timeout_s=timeout + PROBE_CONNECT_S,
        what="probing SSH",
    )
    return {o.node.name: o.ok for o in probed}


def node_processes(
    cluster: Cluster, node: Node, timeout: float = PROBE_TIMEOUT_S
) -> list[ProcessState]:
    """The processes recorded in ``<root_dir>/run/*.pid`` and whether each is ours and alive."""
    if cluster.backend == "local":
        return local_processes(node.root_dir)
    out = node.run(remote_process_script(node.root_dir), timeout=timeout).stdout
    states = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            pid = int(parts[1]) if parts[1].isdigit() else None
            states.append(ProcessState(parts[0], pid, parts[2] == "alive"))
    return states


def local_processes(root_dir: str) -> list[ProcessState]:
    states = []
    for pid_file in sorted((Path(root_dir) / "run").glob("*.pid")):
        pid = read_pid(pid_file)
        states.append(ProcessState(pid_file.stem, pid, bool(pid and owned(pid, root_dir))))
    return states


def remote_process_script(root_dir: str) -> str:
    """Shell that prints ``<name> <pid> alive|dead`` per pid file under ``root_dir/run``.

    "alive" requires the pid's command line to contain root_dir, the same
    ownership proof teardown uses.
    """
    return (
        f"cd {quote(root_dir)}/run 2>/dev/null || exit 0; "
        'for f in *.pid; do [ -e "$f" ] || continue; p=$(cat "$f"); s=dead; '
        f"if {owned_test(root_dir, '$p')}; then s=alive; fi; "
        'echo "${f%.pid} ${p:-none} $s"; done'
    )


def owned_test(root_dir: str, pid_expr: str) -> str:
    """Shell condition: process ``pid_expr`` lives and its command line names ``root_dir``.

    The remote twin of ``procs.owned``: an argument equal to root_dir, ending in
    ``=root_dir`` or containing ``root_dir/``.
    """
    root = quote(root_dir.rstrip("/"))
    return (
        f'[ -n "{pid_expr}" ] && [ -r /proc/{pid_expr}/cmdline ] && '
        f"tr '\\0' '\\n' < /proc/{pid_expr}/cmdline | awk -v r={root} "
        '\'$0 == r || index($0, r "/") || '
        '(length($0) > length(r) && substr($0, length($0) - length(r)) == "=" r) {f = 1} '
        "END {exit !f}'"
    )
