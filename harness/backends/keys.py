"""SSH keys for clusters: per-cluster client keys and pinned host keys.

Connections use paramiko's RejectPolicy whenever a backend pins host keys, so
a node answering with an unexpected key (a reused address, another
engineer's namespace) is refused instead of silently trusted.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from pathlib import Path

from kafka_chaos.harness.backends.hostcmd import host_run
from kafka_chaos.harness.errors import NodeUnreachable
from kafka_chaos.harness.node import CONNECT_TIMEOUT_S, Node


def generate_keypair(path: Path, comment: str) -> Path:
    """Create an ed25519 key at ``path`` (and ``path.pub``) unless it exists."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        host_run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])
    return path


def public_key(path: Path) -> str:
    """The ``type base64`` part of ``path.pub``."""
    parts = Path(f"{path}.pub").read_text().split()
    return f"{parts[0]} {parts[1]}"


def known_hosts_line(host: str, port: int, key: str) -> str:
    """One known_hosts entry; non-22 ports use the ``[host]:port`` form."""
    name = host if port == 22 else f"[{host}]:{port}"
    return f"{name} {key}"


def write_known_hosts(path: Path, entries: Iterable[str]) -> None:
    path.write_text("".join(f"{e}\n" for e in entries))


def fetch_host_key(host: str, port: int) -> str:
    """Ask an SSH server for its host key (trust on first use for VMs and inventories)."""
    import paramiko

    try:
        sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    except OSError as e:
        raise NodeUnreachable(f"{host}:{port}: cannot connect to read its host key: {e}") from e
    transport = paramiko.Transport(sock)
    try:
        transport.banner_timeout = CONNECT_TIMEOUT_S
        transport.start_client(timeout=CONNECT_TIMEOUT_S)
        key = transport.get_remote_server_key()
        return f"{key.get_name()} {key.get_base64()}"
    except Exception as e:
        raise NodeUnreachable(f"{host}:{port}: SSH handshake failed: {e}") from e
    finally:
        transport.close()


def pin_nodes(nodes: Iterable[Node], path: Path) -> None:
    """Record the current host key of every node in ``path``."""
    write_known_hosts(
        path,
        (
            known_hosts_line(n.ssh.host, n.ssh.port, fetch_host_key(n.ssh.host, n.ssh.port))
            for n in nodes
        ),
    )
