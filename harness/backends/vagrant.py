"""The vagrant backend: Debian VMs from ``vagrant/Vagrantfile``.

The harness SSHes to each VM where ``vagrant ssh-config`` says (a forwarded
port on 127.0.0.1 with VirtualBox, the management address with libvirt), as
root with Vagrant's per-machine key (provisioning authorizes it for root).
Brokers and clients use the VM's fixed private address instead, which the
Vagrantfile derives from the machine name exactly like ``private_address``
below: node ``n<i>`` is ``<KC_SUBNET>.<10+i>``.  Both read ``KC_SUBNET``
(default 192.168.56) and ``KC_NODES``, and the harness passes them to every
vagrant command so the two sides cannot disagree.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from harness.backends import remote
from harness.backends.hostcmd import host_run
from harness.cluster import Cluster, cluster_dir
from harness.errors import ConfigError, HarnessError
from harness.node import Node, SSHTarget
from harness.spec import ClusterSpec

REMOTE_ROOT = "/var/lib/kafka-chaos"
DEFAULT_SUBNET = "192.168.56"
STATUS_TIMEOUT_S = 180.0
UP_TIMEOUT_S = 3600.0
_MACHINE = re.compile(r"^n(\d+)$")


@dataclass(frozen=True)
class SSHConfigHost:
    """One ``Host`` block of ``vagrant ssh-config`` output."""

    alias: str
    hostname: str
    user: str
    port: int
    identity_file: str | None


def parse_ssh_config(text: str) -> list[SSHConfigHost]:
    """Parse ``vagrant ssh-config`` output (one ``Host`` block per machine).

    Keywords are case-insensitive and may use ``Key value`` or ``Key=value``;
    values may be double-quoted (paths with spaces).  The first IdentityFile
    wins, as with OpenSSH.
    """
    blocks: list[dict[str, str]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, value = _split_option(line, number)
        if key == "host":
            blocks.append({"host": value})
        elif not blocks:
            raise HarnessError(f"vagrant ssh-config line {number}: {key!r} before any Host")
        else:
            blocks[-1].setdefault(key, value)
    return [_host_from_block(b) for b in blocks]


def _split_option(line: str, number: int) -> tuple[str, str]:
    match = re.match(r"^(\S+?)(?:\s*=\s*|\s+)(.*)$", line)
    if not match:
        raise HarnessError(f"vagrant ssh-config line {number}: no value in {line!r}")
    value = match.group(2).strip()
    if value.startswith('"'):
        value = " ".join(shlex.split(value))
    return match.group(1).lower(), value


def _host_from_block(block: dict[str, str]) -> SSHConfigHost:
    alias = block["host"]
    if "hostname" not in block:
        raise HarnessError(f"vagrant ssh-config: Host {alias} has no HostName")
    port = block.get("port", "22")
    if not port.isdigit():
        raise HarnessError(f"vagrant ssh-config: Host {alias} has a bad Port {port!r}")
    return SSHConfigHost(
        alias=alias,
        hostname=block["hostname"],
        user=block.get("user", "vagrant"),
        port=int(port),
        identity_file=block.get("identityfile"),
    )


def parse_status(text: str) -> dict[str, str]:
    """Machine name -> state, from ``vagrant status --machine-readable``."""
    states = {}
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) >= 4 and parts[2] == "state" and parts[1]:
            states[parts[1]] = parts[3]
    return states


def machine_index(machine: str) -> int:
    """``i`` of machine ``n<i>``, the Vagrantfile's naming."""
    match = _MACHINE.match(machine)
    if not match:
        raise HarnessError(f"vagrant machine {machine!r} is not named n<i> like the Vagrantfile's")
    return int(match.group(1))


def private_address(subnet: str, machine: str) -> str:
    """The Vagrantfile's fixed private address of machine ``n<i>``."""
    return f"{subnet}.{10 + machine_index(machine)}"


def nodes_from_ssh_config(
    hosts: list[SSHConfigHost], cluster: str, subnet: str, known_hosts: str
) -> list[Node]:
    """Nodes ordered n1..nN: SSH to the ssh-config endpoint as root, address = private IP."""
    ordered = sorted(hosts, key=lambda h: machine_index(h.alias))
    return [
        Node(
            name=h.alias,
            node_id=i,
            address=private_address(subnet, h.alias),
            ssh=SSHTarget(
                host=h.hostname,
                port=h.port,
                user="root",
                key_file=h.identity_file,
                known_hosts=known_hosts,
            ),
            root_dir=f"{REMOTE_ROOT}/{cluster}",
        )
        for i, h in enumerate(ordered, start=1)
    ]


def _vagrant(vagrant_dir: Path, nodes: int, args: list[str], timeout: float) -> str:
    env_args = [
        "env",
        f"KC_NODES={nodes}",
        f"KC_SUBNET={_subnet()}",
        f"VAGRANT_CWD={vagrant_dir}",
        "vagrant",
    ]
    return host_run([*env_args, *args], timeout=timeout).stdout


def _subnet() -> str:
    return os.environ.get("KC_SUBNET", DEFAULT_SUBNET)


def _vagrant_dir(spec: ClusterSpec) -> Path:
    path = Path(spec.vagrant_dir or "vagrant").expanduser().resolve()
    if not (path / "Vagrantfile").is_file():
        raise ConfigError(f"{path}: no Vagrantfile there; pass --vagrant-dir DIR")
    if shutil.which("vagrant") is None:
        raise HarnessError("`vagrant` is not installed (apt-get install vagrant)")
    return path


def create(spec: ClusterSpec) -> Cluster:
    """Bring the VMs up if needed, then connect to them as ``vagrant ssh-config`` says."""
    vagrant_dir = _vagrant_dir(spec)
    wanted = {f"n{i}" for i in range(1, spec.nodes + 1)}
    states = parse_status(
        _vagrant(vagrant_dir, spec.nodes, ["status", "--machine-readable"], STATUS_TIMEOUT_S)
    )
    if any(states.get(m) != "running" for m in wanted):
        _vagrant(vagrant_dir, spec.nodes, ["up"], UP_TIMEOUT_S)
    hosts = parse_ssh_config(
        _vagrant(vagrant_dir, spec.nodes, ["ssh-config", *sorted(wanted)], STATUS_TIMEOUT_S)
    )
    known_hosts = str(cluster_dir(spec.name) / "known_hosts")
    nodes = nodes_from_ssh_config(hosts, spec.name, _subnet(), known_hosts)
    state = {"vagrant_dir": str(vagrant_dir), "subnet": _subnet()}
    return remote.provision(spec, nodes, pin_to=known_hosts, state=state)


def destroy(cluster: Cluster) -> list[str]:
    """Clean root_dir on the VMs; the VMs stay (``vagrant destroy`` removes them)."""
    return remote.teardown(cluster)
