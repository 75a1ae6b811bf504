"""Nodes and clusters as every layer above the backends sees them.

A backend (local namespaces, Vagrant VMs, SSH inventory) only decides how to
reach a node.  Everything else - Kafka lifecycle, nemeses, log collection -
acts through ``Node.run`` / ``Node.put`` / ``Node.get``, i.e. over SSH with
Fabric, and never asks which backend it is talking to.

Every remote command is bounded in time: a paused or partitioned node must
never hang the harness.
"""

from __future__ import annotations

import shlex
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import CommandFailed, NodeUnreachable

CONNECT_TIMEOUT_S = 10
DEFAULT_COMMAND_TIMEOUT_S = 60


@dataclass(frozen=True)
class SSHTarget:
    host: str
    port: int = 22
    user: str = "root"
    key_file: str | None = None
    known_hosts: str | None = None  # pinned host keys; None means the user's default


@dataclass
class Node:
    """One host of the cluster.

    ``address`` is what brokers and clients use to reach it (it may differ
    from ``ssh.host`` for Vagrant port forwards).  ``root_dir`` is this
    cluster's directory on the node: data, logs, pid files and configs live
    below it, so local nodes sharing one filesystem never collide.
    """

    name: str
    node_id: int
    address: str
    ssh: SSHTarget
    root_dir: str
    _conn: Any = field(default=None, init=False, repr=False, compare=False)
    _lock: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False
    )

    def connection(self) -> Any:
        """A cached Fabric connection with a bounded connect timeout."""
        from fabric import Config, Connection

        with self._lock:
            if self._conn is None:
                connect_kwargs: dict[str, Any] = {
                    "banner_timeout": CONNECT_TIMEOUT_S,
                    "auth_timeout": CONNECT_TIMEOUT_S,
                    "allow_agent": False,
                    "look_for_keys": self.ssh.key_file is None,
                }
                if self.ssh.key_file:
                    connect_kwargs["key_filename"] = self.ssh.key_file
                config = Config(overrides={"load_ssh_configs": False})
                conn = Connection(
                    self.ssh.host,
                    user=self.ssh.user,
                    port=self.ssh.port,
                    connect_timeout=CONNECT_TIMEOUT_S,
                    connect_kwargs=connect_kwargs,
                    config=config,
                )
                _pin_host_keys(conn, self.ssh.known_hosts)
                self._conn = conn
            return self._conn

    def run(
        self,
        command: str,
        timeout: float = DEFAULT_COMMAND_TIMEOUT_S,
        check: bool = True,
    ) -> RunResult:
        """Run a shell command on the node, bounded by ``timeout`` seconds.

        Raises ``NodeUnreachable`` when SSH cannot connect or the command
        times out, and ``CommandFailed`` on a non-zero exit when ``check``.
        """
        try:
            result = self.connection().run(
                command, hide=True, warn=True, timeout=timeout, in_stream=False
            )
        except Exception as e:  # paramiko/socket/invoke errors all mean "unreachable"
            self.close()
            if _is_timeout(e):
                raise NodeUnreachable(
                    f"{self.name} ({self.ssh.host}): command timed out after {timeout}s: "
                    f"{_short(command)}"
                ) from e
            raise NodeUnreachable(f"{self.name} ({self.ssh.host}:{self.ssh.port}): {e}") from e
        out = RunResult(result.exited, result.stdout, result.stderr)
        if check and out.exit_code != 0:
            raise CommandFailed(
                f"{self.name}: `{_short(command)}` exited {out.exit_code}: "
                f"{(out.stderr or out.stdout).strip()[-500:]}"
            )
        return out

    def put(self, local: str | Path, remote: str) -> None:
        """Upload a file over SFTP."""
        try:
            self.connection().put(str(local), remote)
        except Exception as e:
            self.close()
            raise NodeUnreachable(f"{self.name}: upload of {local} failed: {e}") from e

    def get(self, remote: str, local: str | Path) -> None:
        """Download a file over SFTP."""
        try:
            self.connection().get(remote, str(local))
        except Exception as e:
            self.close()
            raise NodeUnreachable(f"{self.name}: download of {remote} failed: {e}") from e

    def path(self, *parts: str) -> str:
        """A path below this cluster's directory on the node."""
        return "/".join([self.root_dir.rstrip("/"), *parts])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.close()
                except Exception:
                    pass
                self._conn = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "node_id": self.node_id,
            "address": self.address,
            "ssh": asdict(self.ssh),
            "root_dir": self.root_dir,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Node:
        return cls(
            name=data["name"],
            node_id=data["node_id"],
            address=data["address"],
            ssh=SSHTarget(**data["ssh"]),
            root_dir=data["root_dir"],
        )


@dataclass(frozen=True)
class RunResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def _pin_host_keys(conn: Any, known_hosts: str | None) -> None:
    """Reject unknown host keys when the backend pinned them in a file."""
    import paramiko

    client = conn.client
    if known_hosts:
        client.load_host_keys(known_hosts)
        client.set_missing_host_key_policy(paramiko.RejectPolicy())


def _is_timeout(e: Exception) -> bool:
    from invoke.exceptions import CommandTimedOut

    return isinstance(e, CommandTimedOut | TimeoutError) or "timed out" in str(e).lower()


def _short(command: str, limit: int = 120) -> str:
    return command if len(command) <= limit else command[: limit - 3] + "..."


def quote(value: str) -> str:
    """Shell-quote for remote commands."""
    return shlex.quote(value)
