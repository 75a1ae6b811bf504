"""The clients' own account of a run: librdkafka's debug log, one file per client.

``--client-debug`` (``debug.client``) asks every librdkafka client of the run
for its debug log (the ``debug`` contexts) through confluent-kafka's
``logger``.  confluent-kafka hands each line to that logger inside the
client's ``poll``/``consume``, on the worker's own thread, so writing it there
would stall sends and polls behind the disk.  Instead a line is put on a
queue (no lock held beyond the queue's own, never blocking) and one writer
thread formats it and writes it, compressed, to
``client-logs/<client>.log.gz``.

Bounded twice, and neither bound ever blocks a client:

* the queue holds at most ``queue_lines`` lines: when the writer falls
  behind, new lines are dropped and counted;
* the files together take at most ``max_bytes`` on disk: past that the
  writer stops writing and keeps counting.  The *oldest* data is kept: a
  finding's story starts with the client's start (its producer id and epoch,
  its first assignment), and a run that needs a later stretch can replay it
  with a larger cap.

Whatever was dropped is said at the end of the client's file in one marker
line (``kafka-chaos: dropped N lines ...``) and in ``client-logs/summary.json``.
Files are gzip members appended to (``zcat`` reads them whole), flushed every
``FLUSH_INTERVAL_S`` so a killed run keeps all but its last seconds, and
closed by ``close`` on every way out of a run (``kafka_chaos.run``).
"""

from __future__ import annotations

import atexit
import gzip
import json
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kafka_chaos.harness.spec import DEFAULT_CLIENT_DEBUG, DebugSpec, TestSpec

log = logging.getLogger(__name__)

DIR = "client-logs"
SUMMARY = "summary.json"
QUEUE_LINES = 200_000  # ~40 MB of queued lines at most: seconds of a busy client's log
OPEN_FILES = 32  # more clients than this (crash restarts): the idlest is closed, reopened later
FLUSH_INTERVAL_S = 2.0
CLOSE_TIMEOUT_S = 30.0
SIZE_CHECK_BYTES = 256 * 1024  # re-measure the files on disk after this much text
MARKER = "kafka-chaos:"
_STOP = object()


@dataclass
class _Client:
    """What the writer knows of one client's file."""

    path: Path
    lines: int = 0
    text_bytes: int = 0
    dropped_full: int = 0  # queue full: the writer fell behind
    dropped_cap: int = 0  # the run's cap on disk was reached
    dropped_cap_bytes: int = 0


@dataclass
class _Open:
    gz: gzip.GzipFile
    raw: Any  # the file under the gzip stream: its position is the size on disk


class _ClientLogger(logging.Logger):
    """The ``logger`` handed to confluent-kafka for one client.

    Only ``log`` is called by confluent-kafka (``logger.log(level, fmt, fac,
    name, message)``); it enqueues the raw pieces and returns.  Formatting,
    compression and disk are the writer's.  Never added to logging's manager:
    nothing else can find it, nothing propagates to the root logger.
    """

    def __init__(self, logs: ClientLogs, name: str) -> None:
        super().__init__(f"{__name__}.{name}", logging.DEBUG)
        self.propagate = False
        self._logs = logs
        self._client = name

    def log(self, level: int, msg: object, *args: object, **_kwargs: Any) -> None:
        self._logs.put(self._client, level, msg, args)


class ClientLogs:
    """One run's client debug logs: the queue, the writer thread and the files."""

    def __init__(
        self,
        directory: Path,
        max_bytes: int,
        queue_lines: int = QUEUE_LINES,
        check_bytes: int = SIZE_CHECK_BYTES,
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._queue_lines = queue_lines
        self._check_bytes = check_bytes  # the cap's overshoot: this much text, plus zlib's buffer
        self._clients: dict[str, _Client] = {}
        self._open: OrderedDict[str, _Open] = OrderedDict()
        self._closed_bytes = 0  # on disk, of members already closed
        self._since_check = 0
        self._capped_at: str | None = None
        self._lock = threading.Lock()  # registration and close only, never per line
        self._closed = False
        self._writer = threading.Thread(target=self._write_loop, name="client-logs", daemon=True)
        self._writer.start()
        atexit.register(self.close)

    # -- the clients' side: never blocks ----------------------------------

    def logger(self, client: str) -> logging.Logger:
        """The ``logger`` for ``client``'s configuration; its file is ``<client>.log.gz``."""
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in client)
        with self._lock:
            self._clients.setdefault(safe, _Client(self.directory / f"{safe}.log.gz"))
        return _ClientLogger(self, safe)

    def put(self, client: str, level: int, msg: object, args: tuple[object, ...]) -> None:
        """Queue one line, or count it dropped when the writer is behind."""
        if self._closed or self._queue.qsize() >= self._queue_lines:
            self._clients[client].dropped_full += 1
            return
        self._queue.put((client, time.time(), level, msg, args))

    # -- the writer -------------------------------------------------------

    def _write_loop(self) -> None:
        failed = False
        next_flush = time.monotonic() + FLUSH_INTERVAL_S
        while True:
            try:
                item = self._queue.get(timeout=FLUSH_INTERVAL_S)
            except queue.Empty:
                item = None
            if item is _STOP:
                return
            try:
                if item is not None:
                    self._write(*item)
                if time.monotonic() >= next_flush:
                    self._flush_all()
                    next_flush = time.monotonic() + FLUSH_INTERVAL_S
            except Exception:  # a full disk: said once; the queue still drains (never blocks)
                if not failed:
                    log.exception("client debug log: writing failed")
                failed = True

    def _write(self, client: str, at: float, level: int, msg: object, args: tuple) -> None:
        c = self._clients[client]
        try:
            text = str(msg) % args if args else str(msg)
        except (TypeError, ValueError):
            text = f"{msg} {args}"
        stamp = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
        line = f"{stamp}Z {logging.getLevelName(level)} {text}\n".encode(errors="replace")
        if self._capped_at is not None:
            c.dropped_cap += 1
            c.dropped_cap_bytes += len(line)
            return
        self._file(client).gz.write(line)
        c.lines += 1
        c.text_bytes += len(line)
        self._since_check += len(line)
        if self._since_check >= self._check_bytes:
            self._since_check = 0
            if self.disk_bytes() >= self.max_bytes:
                self._capped_at = datetime.now(UTC).isoformat(timespec="seconds")
                log.warning(
                    "client debug logs reached their cap (%g MB on disk): later lines are "
                    "dropped and counted (--client-debug-max-mb)",
                    self.max_bytes / 1e6,
                )

    def _file(self, client: str) -> _Open:
        f = self._open.get(client)
        if f is not None:
            self._open.move_to_end(client)
            return f
        if len(self._open) >= OPEN_FILES:
            _, idlest = self._open.popitem(last=False)
            self._close_file(idlest)
        raw = open(self._clients[client].path, "ab")  # noqa: SIM115 - kept open across lines
        f = _Open(gzip.GzipFile(fileobj=raw, mode="ab", compresslevel=1), raw)
        self._open[client] = f
        return f

    def _close_file(self, f: _Open) -> None:
        f.gz.close()
        self._closed_bytes += f.raw.tell()
        f.raw.close()

    def _flush_all(self) -> None:
        """Every FLUSH_INTERVAL_S: a killed run keeps all but its last seconds."""
        for f in self._open.values():
            f.gz.flush()

    def disk_bytes(self) -> int:
        """Bytes on disk of every file so far (what zlib still buffers not counted)."""
        return self._closed_bytes + sum(f.raw.tell() for f in self._open.values())

    # -- the end ----------------------------------------------------------

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> dict[str, Any]:
        """Write what is queued (bounded), mark what was dropped, close every file.

        Idempotent; returns (and writes) the summary.  Lines that arrive
        after this are counted as dropped.
        """
        with self._lock:
            if self._closed:
                return self._summary()
            self._closed = True
        self._queue.put(_STOP)
        self._writer.join(timeout_s)
        if self._writer.is_alive():
            log.warning("client debug logs: the writer did not finish in %.0fs", timeout_s)
            return self._summary()  # its files stay as flushed; the summary says nothing lost
        for name, f in list(self._open.items()):
            self._close_file(f)
            del self._open[name]
        for c in self._clients.values():
            self._mark(c)
        summary = self._summary()
        (self.directory / SUMMARY).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
        atexit.unregister(self.close)
        return summary

    def _mark(self, c: _Client) -> None:
        notes = []
        if c.dropped_cap:
            notes.append(
                f"{MARKER} dropped {c.dropped_cap} lines ({c.dropped_cap_bytes} bytes) of this "
                f"client after the run's cap of {self.max_bytes / 1e6:g} MB on disk was reached "
                f"at {self._capped_at}"
            )
        if c.dropped_full:
            notes.append(
                f"{MARKER} dropped {c.dropped_full} lines of this client: the log writer "
                f"fell behind ({self._queue_lines} lines queued)"
            )
        if notes:
            with gzip.open(c.path, "ab", compresslevel=1) as gz:
                gz.write("".join(f"{n}\n" for n in notes).encode())

    def _summary(self) -> dict[str, Any]:
        clients = {
            name: {
                "file": c.path.name,
                "lines": c.lines,
                "text_bytes": c.text_bytes,
                "dropped_queue_full": c.dropped_full,
                "dropped_over_cap": c.dropped_cap,
            }
            for name, c in sorted(self._clients.items())
        }
        return {
            "max_bytes": self.max_bytes,
            "disk_bytes": self.disk_bytes(),
            "capped_at": self._capped_at,
            "clients": clients,
        }


# -- the run's instance -------------------------------------------------------
#
# One run at a time per process (a Java run gets a process of its own), and
# the clients are built deep in each workload: the run opens the instance and
# every librdkafka client asks it for its settings.

_active: ClientLogs | None = None


@contextmanager
def kept(run_dir: Path, debug: DebugSpec) -> Iterator[ClientLogs | None]:
    """The run's client debug logs while the workload runs (None when off); closed on
    every way out, an exception or a signal included."""
    global _active
    if debug.client is None:
        yield None
        return
    logs = ClientLogs(Path(run_dir) / DIR, int(debug.client_max_mb * 1e6))
    _active = logs
    try:
        yield logs
    finally:
        _active = None
        summary = logs.close()
        java_finish(Path(run_dir) / DIR)
        total = sum(c["lines"] for c in summary["clients"].values())
        log.info(
            "client debug logs: %d clients, %d lines, %.1f MB on disk in %s",
            len(summary["clients"]),
            total,
            summary["disk_bytes"] / 1e6,
            DIR,
        )


def contexts(debug: DebugSpec, kind: str) -> str | None:
    """librdkafka's ``debug`` for a client of ``kind`` (producer, consumer, share)."""
    if debug.client is None:
        return None
    return DEFAULT_CLIENT_DEBUG[kind] if debug.client == "default" else debug.client


def librdkafka(spec: TestSpec, kind: str, client: str) -> dict[str, Any]:
    """Settings that add ``debug`` and this run's ``logger`` to a librdkafka client's
    configuration; none when the run keeps no client logs."""
    wanted = contexts(spec.debug, kind)
    if wanted is None or _active is None:
        return {}
    return {"debug": wanted, "logger": _active.logger(client)}


def java_finish(directory: Path) -> None:
    """Close the Java client's debug log, if this process's JVM keeps one, and gzip it."""
    from kafka_chaos.workloads.java import jvm  # no JPype import unless the JVM runs

    jvm.finish_debug_log(directory)
