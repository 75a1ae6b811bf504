"""Nodes and clusters as every layer above the backends sees them.

A backend (local namespaces, Vagrant VMs, SSH inventory) only decides how to
reach a node.  Everything else - Kafka lifecycle, nemeses, log collection -
acts through ``Node.run`` / ``Node.put`` / ``Node.get``, i.e. over SSH with
Fabric, and never asks which backend it is talking to.

Every remote command is bounded in time: a paused or partitioned node must
never hang the harness.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import shlex
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kafka_chaos.harness.errors import CommandFailed, NodeUnreachable

CONNECT_TIMEOUT_S = 10
DEFAULT_COMMAND_TIMEOUT_S = 60
# A command whose transport broke is tried this many times in all, each on a
# fresh connection.  Small: a node that fails three fresh connections in a
# row is down, not flaky.
MAX_ATTEMPTS = 3
# Idle connections kept per node; more are opened while many threads act on
# one node at once, and closed again when they are handed back.
IDLE_CONNECTIONS = 4
# An SFTP read or write that waits longer than this fails its transfer.
TRANSFER_STALL_S = 60
# A node at least this many times slower than the host is a slow guest.
SLOW_GUEST_SCALE = 3.0

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SSHTarget:
    host: str
    port: int = 22
    user: str = "root"
    key_file: str | None = None
    known_hosts: str | None = None  # pinned host keys; None means the user's default


class TransportLost(Exception):
    """The SSH transport failed under a command: its outcome is unknown."""


class CommandTimeout(Exception):
    """The command outlived its time bound (its channel has been closed)."""


def _exec(
    transport: Any, command: str, timeout: float, connect_s: float = CONNECT_TIMEOUT_S
) -> RunResult:
    """Run ``command`` on one channel of ``transport``, all within ``timeout``.

    Written on paramiko rather than with invoke's runner: invoke enforces its
    timeout from a timer thread that closes the channel, and decides whether
    the command timed out by asking whether that thread is still alive - so a
    command that timed out while the timer was still closing its channel came
    back as exit status -1, and a timer firing on a closed transport printed
    a traceback.  Here one thread owns the channel and the clock.
    """
    deadline = time.monotonic() + timeout
    chan = transport.open_session(timeout=min(connect_s, timeout))
    out: list[bytes] = []
    err: list[bytes] = []
    try:
        chan.exec_command(command)
        chan.shutdown_write()
        while True:
            while chan.recv_ready():
                out.append(chan.recv(65536))
            while chan.recv_stderr_ready():
                err.append(chan.recv_stderr(65536))
            if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CommandTimeout(command)
            # set by the exit status or the channel's close; the short bound
            # keeps a large output flowing through the SSH window
            chan.status_event.wait(min(remaining, 0.05))
        # Output sent before the exit status may still be in flight.  A
        # process the command left in the background may hold the channel
        # open, so stop reading after a short while: the status is in.
        chan.settimeout(min(max(0.1, deadline - time.monotonic()), 2.0))
        with contextlib.suppress(TimeoutError):
            for buf, recv in ((out, chan.recv), (err, chan.recv_stderr)):
                while chunk := recv(65536):
                    buf.append(chunk)
        status = chan.recv_exit_status()
    finally:
        chan.close()
    if status == -1:
        raise TransportLost("the channel closed without an exit status")
    return RunResult(status, _text(out), _text(err))


def _text(parts: list[bytes]) -> str:
    return b"".join(parts).decode("utf-8", "replace")


@dataclass
class Node:
    """One host of the cluster.

    ``address`` is what brokers and clients use to reach it (it may differ
    from ``ssh.host`` for Vagrant port forwards).  ``root_dir`` is this
    cluster's directory on the node: data, logs, pid files and configs live
    below it, so local nodes sharing one filesystem never collide.

    Every command runs on a connection that belongs to it alone (see
    ``docs/control-plane.md``): a connection is opened and authenticated
    before anyone uses it, lent to one command at a time, and dropped, never
    shared, when its transport fails.  One thread's failure therefore can
    never close the channel another thread is waiting on.
    """

    name: str
    node_id: int
    address: str
    ssh: SSHTarget
    root_dir: str
    time_scale: float = 1.0
    _idle: list[Any] = field(default_factory=list, init=False, repr=False, compare=False)
    _generation: int = field(default=0, init=False, repr=False, compare=False)
    _lock: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False
    )

    @property
    def is_slow_guest(self) -> bool:
        """A node many times slower than the host (a VM under software emulation).

        Such a node gets work moved to the host and its brokers yield the CPU
        to the harness's commands (``harness/kafka_db.py``).
        """
        return self.time_scale >= SLOW_GUEST_SCALE

    # --- connections ---------------------------------------------------------------

    def _open(self) -> Any:
        """A new, fully authenticated Fabric connection with bounded waits.

        ``channel_timeout`` bounds opening a channel: paramiko's default is an
        hour, and invoke's command timeout only starts once the channel is open.
        """
        from fabric import Config, Connection

        wait = CONNECT_TIMEOUT_S * self.time_scale
        connect_kwargs: dict[str, Any] = {
            "banner_timeout": wait,
            "auth_timeout": wait,
            "channel_timeout": wait,
            "allow_agent": False,
            "look_for_keys": self.ssh.key_file is None,
        }
        if self.ssh.key_file:
            connect_kwargs["key_filename"] = self.ssh.key_file
        conn = Connection(
            self.ssh.host,
            user=self.ssh.user,
            port=self.ssh.port,
            connect_timeout=wait,
            connect_kwargs=connect_kwargs,
            config=Config(overrides={"load_ssh_configs": False}),
        )
        _pin_host_keys(conn, self.ssh.known_hosts)
        try:
            conn.open()
        except BaseException:
            _quietly_close(conn)
            raise
        return conn

    def warm(self, connections: int) -> None:
        """Open connections until ``connections`` are idle (at most ``IDLE_CONNECTIONS``).

        For commands that must run on a schedule while other threads use the
        node: on a slow guest opening a connection took 10-28 s, which the
        first fault of a run paid whenever the cluster sampler held the only
        pooled one.
        """
        with self._lock:
            missing = min(connections, IDLE_CONNECTIONS) - len(self._idle)
            generation = self._generation
        opened = [self._open() for _ in range(max(0, missing))]
        with self._lock:
            keep = generation == self._generation
            for conn in opened:
                if keep and len(self._idle) < IDLE_CONNECTIONS:
                    self._idle.append(conn)
                else:
                    _quietly_close(conn)

    @contextlib.contextmanager
    def _lease(self) -> Iterator[Any]:
        """Lend a connection to one command; drop it if the command broke it."""
        with self._lock:
            conn = self._idle.pop() if self._idle else None
            generation = self._generation
        if conn is None or not conn.is_connected:
            if conn is not None:
                _quietly_close(conn)
            conn = self._open()
        healthy = False
        try:
            yield conn
            healthy = True
        finally:
            with self._lock:
                keep = (
                    healthy
                    and conn.is_connected
                    and generation == self._generation
                    and len(self._idle) < IDLE_CONNECTIONS
                )
                if keep:
                    self._idle.append(conn)
            if not keep:
                _quietly_close(conn)

    def _attempts(self, step: str, idempotent: bool, fn: Any) -> Any:
        """Call ``fn(conn)``, again on a fresh connection while its transport fails.

        Only idempotent steps are repeated: a lost transport leaves the
        outcome unknown, and only an idempotent step may run twice.
        """
        attempts = MAX_ATTEMPTS if idempotent else 1
        for attempt in range(1, attempts + 1):
            try:
                with self._lease() as conn:
                    return fn(conn)
            except (TransportLost, OSError, EOFError) as e:
                last: BaseException = e
            except Exception as e:
                if _is_timeout(e) or type(e).__module__.split(".")[0] not in _SSH_MODULES:
                    raise
                last = e
            if attempt < attempts:
                log.warning(
                    "%s: %s: SSH transport failed (%s); retrying on a fresh connection (%d/%d)",
                    self.name,
                    step,
                    _said(last),
                    attempt + 1,
                    attempts,
                )
        raise NodeUnreachable(f"{self.where()}: {step}: {_said(last)}") from last

    def where(self) -> str:
        return f"{self.name} ({self.ssh.host}:{self.ssh.port})"

    # --- commands --------------------------------------------------------------------

    def run(
        self,
        command: str,
        timeout: float = DEFAULT_COMMAND_TIMEOUT_S,
        check: bool = True,
        idempotent: bool = True,
    ) -> RunResult:
        """Run a shell command on the node, bounded by ``timeout`` seconds.

        A command whose transport fails is tried again on a fresh connection
        (``MAX_ATTEMPTS`` in all) unless ``idempotent`` is False.  An exit
        status of -1 (the channel closed without one) is a lost transport,
        never the command's result.  Raises ``NodeUnreachable`` when SSH
        cannot connect or the command times out, and ``CommandFailed`` on a
        non-zero exit when ``check``.
        """
        step = f"`{_short(command)}`"
        timeout = timeout * self.time_scale

        def once(conn: Any) -> RunResult:
            try:
                return _exec(conn.transport, command, timeout, CONNECT_TIMEOUT_S * self.time_scale)
            except CommandTimeout as e:
                raise NodeUnreachable(
                    f"{self.where()}: command timed out after {timeout}s: {_short(command)}"
                ) from e

        out = self._attempts(step, idempotent, once)
        if check and out.exit_code != 0:
            raise CommandFailed(
                f"{self.name}: {step} exited {out.exit_code}: "
                f"{(out.stderr or out.stdout).strip()[-500:] or '(no output)'}"
            )
        return out

    def put(self, local: str | Path, remote: str) -> None:
        """Upload a file over SFTP (whole-file writes may be repeated)."""
        self._transfer(f"upload of {local}", lambda c: c.put(str(local), remote))

    def write_files(self, files: dict[str, str], timeout_s: float = 30.0) -> None:
        """Write text files in one command (base64: no quoting issues), each whole or not at all."""
        parts = ["set -e"]
        for path, content in files.items():
            b64 = base64.b64encode(content.encode()).decode()
            parts.append(
                f"mkdir -p {quote(str(Path(path).parent))}; "
                f"echo {b64} | base64 -d > {quote(path)}.tmp; mv {quote(path)}.tmp {quote(path)}"
            )
        self.run("; ".join(parts), timeout=timeout_s)

    def get(self, remote: str, local: str | Path) -> None:
        """Download a file over SFTP."""
        self._transfer(f"download of {remote}", lambda c: c.get(remote, str(local)))

    def _transfer(self, step: str, fn: Any) -> None:
        """An SFTP transfer whose every read and write is bounded: a node that stops
        answering mid-transfer (paused, partitioned) fails it instead of hanging."""

        def bounded(conn: Any) -> Any:
            conn.sftp().get_channel().settimeout(TRANSFER_STALL_S * self.time_scale)
            return fn(conn)

        self._attempts(step, True, bounded)

    def path(self, *parts: str) -> str:
        """A path below this cluster's directory on the node."""
        return "/".join([self.root_dir.rstrip("/"), *parts])

    def close(self) -> None:
        """Close the idle connections; those lent out close when handed back."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._generation += 1
        for conn in idle:
            _quietly_close(conn)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "node_id": self.node_id,
            "address": self.address,
            "ssh": asdict(self.ssh),
            "root_dir": self.root_dir,
            **({"time_scale": self.time_scale} if self.time_scale != 1.0 else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Node:
        return cls(
            name=data["name"],
            node_id=data["node_id"],
            address=data["address"],
            ssh=SSHTarget(**data["ssh"]),
            root_dir=data["root_dir"],
            time_scale=float(data.get("time_scale", 1.0)),
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


# Exceptions from these packages (and OSError/EOFError) mean the transport
# failed; anything else is a bug and propagates as it is.
_SSH_MODULES = ("paramiko", "fabric", "invoke", "socket")


def _said(e: BaseException) -> str:
    """What SSH said, never empty: paramiko raises some errors without text."""
    text = str(e).strip()
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _quietly_close(conn: Any) -> None:
    with contextlib.suppress(Exception):
        conn.close()


def _is_timeout(e: Exception) -> bool:
    from invoke.exceptions import CommandTimedOut

    return isinstance(e, CommandTimedOut | TimeoutError) or "timed out" in str(e).lower()


def _short(command: str, limit: int = 120) -> str:
    return command if len(command) <= limit else command[: limit - 3] + "..."


def quote(value: str) -> str:
    """Shell-quote for remote commands."""
    return shlex.quote(value)
