"""The ssh backend: your own hosts, listed in a TOML or YAML inventory.

    # hosts.toml                              # hosts.yaml
    known_hosts = "~/.ssh/known_hosts"        known_hosts: ~/.ssh/known_hosts
    [[hosts]]                                 hosts:
    host = "kafka1.example"                     - host: kafka1.example
    key = "~/.ssh/id_ed25519"                     key: ~/.ssh/id_ed25519
    # port = 22, user = "root",                   port: 22
    # address = host, name = "n1"

``address`` is what brokers and clients use (default: ``host``).  Without a
``known_hosts`` file, host keys are pinned on first contact into the
cluster's state dir and enforced from then on.  Kafka lives below
``/var/lib/kafka-chaos/<cluster>`` on each host; teardown removes only that.
"""

from __future__ import annotations

import logging
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kafka_chaos.harness.backends import remote
from kafka_chaos.harness.cluster import Cluster, cluster_dir
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.node import Node, SSHTarget
from kafka_chaos.harness.spec import ClusterSpec

log = logging.getLogger(__name__)

REMOTE_ROOT = "/var/lib/kafka-chaos"
HOST_KEYS = {"host", "port", "user", "key", "address", "name"}
TOP_KEYS = {"hosts", "known_hosts"}


@dataclass(frozen=True)
class InventoryHost:
    name: str
    host: str
    port: int
    user: str
    key: str | None
    address: str


@dataclass(frozen=True)
class Inventory:
    hosts: tuple[InventoryHost, ...]
    known_hosts: str | None = None


def load_inventory(path: str | Path) -> Inventory:
    """Read and validate an inventory file (``.toml``, ``.yaml`` or ``.yml``)."""
    path = Path(path).expanduser()
    try:
        text = path.read_text()
    except FileNotFoundError as e:
        raise ConfigError(f"{path}: no such inventory file") from e
    except OSError as e:
        raise ConfigError(f"{path}: cannot read inventory: {e}") from e
    return parse_inventory(text, path)


def parse_inventory(text: str, path: Path) -> Inventory:
    """Parse inventory ``text``; ``path`` picks the format and names the file in errors."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            data: Any = tomllib.loads(text)
        elif suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text)
        else:
            raise ConfigError(f"{path}: inventory must be .toml, .yaml or .yml")
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from e
    if isinstance(data, list):  # a bare YAML list of hosts
        data = {"hosts": data}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a table/mapping with a `hosts` list")
    unknown = set(data) - TOP_KEYS
    if unknown:
        raise ConfigError(
            f"{path}: unknown key(s) {', '.join(sorted(unknown))} (known: hosts, known_hosts)"
        )
    entries = data.get("hosts")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{path}: `hosts` must be a non-empty list of hosts")
    hosts = tuple(_host(path, i, entry) for i, entry in enumerate(entries, start=1))
    _reject_duplicates(path, hosts)
    known = data.get("known_hosts")
    if known is not None:
        if not isinstance(known, str) or not Path(known).expanduser().is_file():
            raise ConfigError(f"{path}: known_hosts {known!r} is not a readable file")
        known = str(Path(known).expanduser())
    return Inventory(hosts=hosts, known_hosts=known)


def _host(path: Path, index: int, entry: Any) -> InventoryHost:
    where = f"{path}: hosts[{index}]"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a table/mapping, got {entry!r}")
    where = f"{where} ({entry.get('name') or entry.get('host') or '?'})"
    unknown = set(entry) - HOST_KEYS
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(sorted(unknown))} "
            f"(known: {', '.join(sorted(HOST_KEYS))})"
        )
    host = entry.get("host")
    if not isinstance(host, str) or not host.strip():
        raise ConfigError(f"{where}: `host` is required and must be a non-empty string")
    port = entry.get("port", 22)
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ConfigError(f"{where}: `port` must be an integer 1..65535, got {port!r}")
    for field_name in ("user", "key", "address", "name"):
        value = entry.get(field_name)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"{where}: `{field_name}` must be a non-empty string")
    key = entry.get("key")
    if key is not None:
        key = str(Path(key).expanduser())
        if not Path(key).is_file():
            raise ConfigError(f"{where}: key file {key} does not exist")
    return InventoryHost(
        name=entry.get("name") or f"n{index}",
        host=host,
        port=port,
        user=entry.get("user") or "root",
        key=key,
        address=entry.get("address") or host,
    )


def _reject_duplicates(path: Path, hosts: tuple[InventoryHost, ...]) -> None:
    for attr in ("name", "address"):
        seen: set[str] = set()
        for h in hosts:
            value = getattr(h, attr)
            if value in seen:
                raise ConfigError(f"{path}: two hosts have the same {attr} {value!r}")
            seen.add(value)


def nodes_from_inventory(
    inventory: Inventory, cluster: str, count: int, known_hosts: str
) -> list[Node]:
    """The first ``count`` hosts as Nodes with ids 1..count."""
    if count > len(inventory.hosts):
        raise ConfigError(
            f"{count} nodes requested but the inventory lists only {len(inventory.hosts)} hosts"
        )
    return [
        Node(
            name=h.name,
            node_id=i,
            address=h.address,
            ssh=SSHTarget(
                host=h.host, port=h.port, user=h.user, key_file=h.key, known_hosts=known_hosts
            ),
            root_dir=f"{REMOTE_ROOT}/{cluster}",
        )
        for i, h in enumerate(inventory.hosts[:count], start=1)
    ]


def create(spec: ClusterSpec) -> Cluster:
    if not spec.inventory:
        raise ConfigError("the ssh backend needs an inventory: --inventory FILE (TOML or YAML)")
    inventory = load_inventory(spec.inventory)
    known_hosts = inventory.known_hosts or str(cluster_dir(spec.name) / "known_hosts")
    nodes = nodes_from_inventory(inventory, spec.name, spec.nodes, known_hosts)
    state = {"inventory": str(Path(spec.inventory).expanduser().resolve())}
    return remote.provision(
        spec, nodes, pin_to=None if inventory.known_hosts else known_hosts, state=state
    )


def destroy(cluster: Cluster) -> list[str]:
    """Stop our processes and remove root_dir on each host; then forget the cluster."""
    return remote.teardown(cluster)
