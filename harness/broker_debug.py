"""``--broker-debug``: broker loggers at DEBUG for one run, through the log4j2 config.

Kafka 4's brokers re-read ``config/kafka-log.properties`` when it changes
(``monitorInterval``, kafka_config.LOG_RELOAD_S), so a run rewrites the file
with its loggers at DEBUG before its workload starts and rewrites it plain
when it ends; a broker a fault restarts reads the same file.  The DEBUG
lines go to the broker's own ``server.log``, bounded by its appender's
rotation (50 MB, 2 rolled files), and come with the run's logs
(``kafka_db.collect_logs``).

A broker started from a config without ``monitorInterval`` (a cluster
brought up by an older kafka-chaos) never sees the change: such a broker is
restarted once, one at a time, before the run.  The cluster's state keeps the
loggers set, so the next run on a reused cluster restores the plain config
even if the run that set them was killed.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path

from kafka_chaos.harness import kafka_config as kc
from kafka_chaos.harness import kafka_db
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.node import Node, quote

log = logging.getLogger(__name__)

STATE = "broker-debug.json"
CHECK_TIMEOUT_S = 15.0


def _state_path(cluster: Cluster) -> Path:
    return cluster.state_dir / STATE


def loggers_set(cluster: Cluster) -> list[str]:
    """The loggers a run set to DEBUG on this cluster and did not restore."""
    return list(_state(cluster).get("loggers", []))


def _state(cluster: Cluster) -> dict:
    try:
        return json.loads(_state_path(cluster).read_text())
    except (OSError, ValueError):
        return {}


def _config_path(node: Node) -> str:
    return f"{node.path('config')}/kafka-log.properties"


def _broker(node: Node) -> tuple[str | None, bool]:
    """The node's broker pid, and whether it started from the current log config
    file asking for reloading (at or after the file was last written)."""
    path = quote(_config_path(node))
    pid = quote(kafka_db.KAFKA.pid_file(node))
    res = node.run(
        f"p=$(cat {pid}) && age=$(ps -o etimes= -p $p) || exit 4; "
        f"grep -q '^monitorInterval=' {path} && m=1 || m=0; "
        f"echo $p $m $(( $(date +%s) - $(stat -c %Y {path}) - age ))",
        timeout=CHECK_TIMEOUT_S,
        check=False,
    )
    parts = res.stdout.split()
    if res.exit_code != 0 or len(parts) != 3:
        return None, False
    try:
        return parts[0], parts[1] == "1" and int(parts[2]) >= 0
    except ValueError:
        return parts[0], False


def reloading(cluster: Cluster) -> dict[str, str]:
    """Node name to broker pid, for the brokers known to re-read their log config.

    Known: started from a reloadable file that has not changed since, or a
    process seen so before (our own rewrites make the file newer than it).
    """
    seen = _state(cluster).get("reloading", {})
    found = {}
    for node in cluster.nodes:
        pid, fresh = _broker(node)
        if pid is not None and (fresh or seen.get(node.name) == pid):
            found[node.name] = pid
    return found


def set_loggers(cluster: Cluster, loggers: Sequence[str]) -> None:
    """Put ``loggers`` at DEBUG on every broker (none: the plain config), live.

    Does nothing when neither the cluster nor the run has any (the common
    case).  Waits until the brokers have re-read the file.
    """
    wanted = list(loggers)
    if not wanted and not loggers_set(cluster):
        return
    if wanted and kc.major(cluster.kafka_version) < 4:
        raise HarnessError(
            f"--broker-debug needs Kafka 4; this cluster runs {cluster.kafka_version}"
        )
    known = reloading(cluster)
    stale = [n for n in cluster.nodes if n.name not in known] if wanted else []
    stale = [n for n in stale if kafka_db.is_running(n)]  # a broker down reads it as it starts
    for node in cluster.nodes:
        text = kc.logging_config(cluster.kafka_version, node.path("logs", "server.log"), wanted)
        node.write_files({_config_path(node): text})
    if stale:
        log.info(
            "restarting %s once: started before their log config was reloadable",
            ", ".join(n.name for n in stale),
        )
        for node in stale:
            kafka_db.stop(node)
            kafka_db.start(node)
            kafka_db.wait_healthy(cluster, timeout_s=kafka_db.HEALTHY_TIMEOUT_S)
            pid, fresh = _broker(node)
            if pid is not None and fresh:
                known[node.name] = pid
    path = _state_path(cluster)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"loggers": wanted, "reloading": known}, indent=2) + "\n")
    if wanted:
        log.info("broker loggers at DEBUG for this run: %s", ", ".join(wanted))
    else:
        log.info("broker log config restored (no DEBUG loggers)")
    time.sleep(kc.LOG_RELOAD_S + 1)  # log4j2 checks the file every LOG_RELOAD_S
