"""What a broker's ApiVersions answer says it supports, asked before a run.

Why: a workload that needs an API the broker lacks (transactions on a broker
without EndTxn, share groups on Kafka 3.9, KIP-848 on a broker that never
heard of it) would otherwise hang or fail mid-run with a client's error.  The
answer comes from the broker itself, so the same question serves Apache Kafka
and any Kafka-compatible broker (docs/brokers.md).

It is asked with Kafka's own ``BrokerApiVersionsCommand`` (the
``kafka-broker-api-versions.sh`` tool) from the harness's cached
distribution, on this host, as the clients connect: a well-kept client of the
protocol, rather than a hand-written one.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kafka_chaos.harness.distribution import Distribution
from kafka_chaos.harness.errors import HarnessError

TOOL = "org.apache.kafka.tools.BrokerApiVersionsCommand"
TOOL_3X = "kafka.admin.BrokerApiVersionsCommand"  # in the broker's own jar until Kafka 4.0
TOOL_HEAP_MB = 128
TIMEOUT_S = 90.0

# The APIs each capability needs; a capability is usable when every one is.
NEEDS: dict[str, tuple[str, ...]] = {
    "produce and fetch": ("Produce", "Fetch", "ListOffsets", "Metadata"),
    "idempotent producers": ("InitProducerId",),
    "consumer groups": (
        "FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit", "OffsetFetch",
    ),
    "transactions": ("InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn",
                     "TxnOffsetCommit"),
    "KIP-848 consumer groups": ("ConsumerGroupHeartbeat",),
    "share groups": ("ShareGroupHeartbeat", "ShareFetch", "ShareAcknowledge"),
}  # fmt: skip

_BROKER = re.compile(r"^(\S+) \(id: (-?\d+).*\) -> \($")
_API = re.compile(r"^\s+(\w+)\((\d+)\): (?:(UNSUPPORTED)|(\d+)(?: to (\d+))?)")


@dataclass(frozen=True)
class BrokerApis:
    """One broker's answer: each API it named, with its version range (None: unsupported)."""

    address: str
    node_id: int
    apis: dict[str, tuple[int, int] | None]

    def lacks(self, capability: str) -> list[str]:
        """The APIs ``capability`` needs that this broker does not support."""
        return [a for a in NEEDS[capability] if self.apis.get(a) is None]


def parse(text: str) -> list[BrokerApis]:
    """The tool's output, broker by broker; a HarnessError when it names none."""
    brokers: list[BrokerApis] = []
    current: BrokerApis | None = None
    for line in text.splitlines():
        if m := _BROKER.match(line):
            current = BrokerApis(m.group(1), int(m.group(2)), {})
            brokers.append(current)
        elif current is not None and (m := _API.match(line)):
            name, _key, unsupported, low, high = m.groups()
            current.apis[name] = None if unsupported else (int(low), int(high or low))
    if not brokers:
        first = text.strip().splitlines()[:1]
        raise HarnessError(
            f"ApiVersions: no broker answered ({first[0] if first else 'no output'})"
        )
    return brokers


def tool_of(dist: Distribution) -> tuple[str, str]:
    """The tool's class and classpath in ``dist``: Kafka 4 moved it to the tools jar."""
    major = dist.version.split(".")[0]
    if major.isdigit() and int(major) < 4:
        return TOOL_3X, dist.host_classpath(tools=False)
    return TOOL, dist.host_classpath(tools=True)


def ask(dist: Distribution, bootstrap: str, timeout_s: float = TIMEOUT_S) -> list[BrokerApis]:
    """Every reachable broker's ApiVersions answer, asked from this host."""
    tool, classpath = tool_of(dist)
    args = [
        "java", f"-Xmx{TOOL_HEAP_MB}m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
        "-cp", classpath, tool, "--bootstrap-server", bootstrap,
    ]  # fmt: skip
    try:
        res = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        raise HarnessError(
            f"ApiVersions: no answer from {bootstrap} within {timeout_s:.0f} s"
        ) from e
    if res.returncode != 0:
        said = [ln for ln in res.stderr.strip().splitlines() if not ln.lstrip().startswith("at ")]
        raise HarnessError(f"ApiVersions from {bootstrap} failed: {(said or ['(no output)'])[0]}")
    return parse(res.stdout)


def remembered(
    state_dir: Path, key: dict[str, Any], dist: Distribution, bootstrap: str
) -> list[BrokerApis]:
    """The cluster's answer, asked once per cluster and broker setup (``key``: the
    Kafka version and broker config it runs with), kept in ``state_dir``.

    Why kept: asking starts a JVM (seconds on two loaded cores), and a cluster
    reused run after run, brokers killed and restarted by the faults, answers
    the same while its version and config stay; a broker restarted with other
    settings is asked again.
    """
    path = state_dir / "api-versions.json"
    try:
        kept = json.loads(path.read_text())
        if kept.get("key") == key:
            return [BrokerApis(b["address"], b["node_id"],
                               {a: None if v is None else (v[0], v[1])
                                for a, v in b["apis"].items()})
                    for b in kept["brokers"]]  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        pass  # none kept yet, or unreadable: ask
    brokers = ask(dist, bootstrap)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({"key": key, "brokers": [asdict(b) for b in brokers]}, indent=1))
    tmp.replace(path)
    return brokers


def refusal(brokers: list[BrokerApis], capabilities: list[str], what: str) -> str | None:
    """One line naming the first broker that lacks an API ``what`` needs, or None."""
    for broker in brokers:
        for capability in capabilities:
            missing = broker.lacks(capability)
            if missing:
                return (
                    f"{what} needs {capability}, and the broker at {broker.address} does not "
                    f"support {', '.join(missing)} (its ApiVersions answer)"
                )
    return None
