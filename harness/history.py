"""Writing and reading histories (see docs/history.md for the contract).

The contract sits on the ground floor because every package shares it:
workloads and nemeses write histories, checkers and reports read them.

The writer is the single place that assigns ``index`` and ``time`` so that
both are ordered across threads, and it hands every line to the kernel when
it is written (never keeping it in a user-space buffer), so that a SIGKILLed
harness still leaves a valid prefix.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import orjson
from kafka_chaos.harness.errors import HistoryError

TYPES = ("invoke", "ok", "fail", "info")
NEMESIS = "nemesis"


class LineMirror(Protocol):
    """Something fed every line the writer writes, in order, after the write
    (``checkers.ingest.recorded_rows.RowsRecorder``: the Parquet rows, as the run goes).
    ``feed`` must not block; a mirror that fails drops itself, never a line."""

    def feed(self, data: bytes) -> None: ...

    def drop(self, why: str) -> None: ...

    def close(self) -> None: ...


class HistoryWriter:
    """Append-only, thread-safe JSONL history writer.

    ``time`` is nanoseconds since ``start_ns`` on the monotonic clock.  The
    lock covers both stamping and writing, so line order equals index order
    equals time order.

    Lines go to the kernel with one ``os.write`` per call on an ``O_APPEND``
    descriptor: no user-space buffer can hold a line back when the harness
    is SIGKILLed.  ``append_encoded`` writes several lines with one
    ``os.write`` (a producer's burst of invokes, or the completions of one
    ``poll()``): at a hundred thousand sends per second a system call per
    line was most of the recorder's cost.

    ``mirror`` gets each write's bytes once they are in the file, and is
    closed after it (without waiting for it to finish): it can only mirror
    a history it saw from its first line, so it is dropped when ``path``
    already holds lines.
    """

    def __init__(
        self, path: Path, start_ns: int | None = None, mirror: LineMirror | None = None
    ) -> None:
        self.path = Path(path)
        self.start_ns = time.monotonic_ns() if start_ns is None else start_ns
        self._lock = threading.Lock()
        self._index = _next_index(self.path)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._mirror = mirror
        if mirror is not None and os.fstat(self._fd).st_size:
            mirror.drop(f"{self.path.name} already held lines")

    def append(self, process: int | str, type_: str, f: str, value: Any) -> dict[str, Any]:
        """Record one operation and return it as written."""
        if type_ not in TYPES:
            raise ValueError(f"unknown op type {type_!r}")
        index, stamp = self.append_encoded((encode_tail(process, type_, f, value),))
        return {
            "index": index,
            "time": stamp,
            "process": process,
            "type": type_,
            "f": f,
            "value": value,
        }

    def append_encoded(self, tails: Sequence[bytes]) -> tuple[int, int]:
        """Write lines from their encoded tails (``encode_tail``) with one ``os.write``.

        Each line gets the next index; all of them get the same ``time``, the
        moment of the write (still monotonic in index order).  Returns the
        first index and that time.  An empty ``tails`` writes nothing.
        """
        with self._lock:
            if self._fd is None:
                raise ValueError(f"history {self.path} is closed")
            first = self._index
            stamp = time.monotonic_ns() - self.start_ns
            if tails:
                n = len(tails)
                head = b'{"index":%d,"time":' + b"%d" % stamp + b","
                parts = [b""] * (2 * n)  # head, tail, head, tail, ...: joined without copies
                parts[0::2] = [head % i for i in range(first, first + n)]
                parts[1::2] = tails
                data = b"".join(parts)
                _write_all(self._fd, data)
                self._index += n
                if self._mirror is not None:
                    self._feed_mirror(data)
        return first, stamp

    def _feed_mirror(self, data: bytes) -> None:
        """The line is written already: a mirror that fails is dropped, never the write."""
        try:
            self._mirror.feed(data)
        except Exception as e:  # noqa: BLE001 - the JSON lines are the truth
            mirror, self._mirror = self._mirror, None
            mirror.drop(f"{type(e).__name__}: {e}")
            mirror.close()

    def elapsed_ns(self) -> int:
        return time.monotonic_ns() - self.start_ns

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            mirror, self._mirror = self._mirror, None
        if mirror is not None:
            mirror.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def encode_tail(process: int | str, type_: str, f: str, value: Any) -> bytes:
    """A line without its ``index`` and ``time``: ``"process":..,"type":..,"f":..,"value":..}\\n``.

    The writer prepends ``{"index":N,"time":T,`` when it writes the line.
    orjson encodes about 20x faster than ``json`` and writes no spaces, so
    the hot send lines (workloads.send_lines) can be byte-identical templates.
    """
    op = {"process": process, "type": type_, "f": f, "value": value}
    return orjson.dumps(op, option=orjson.OPT_APPEND_NEWLINE)[1:]


def _write_all(fd: int, data: bytes) -> None:
    """``os.write`` may write less than asked (signals, huge lines); finish the line."""
    while data:
        written = os.write(fd, data)
        data = data[written:]


def _next_index(path: Path) -> int:
    """Continue numbering after an existing history (e.g. a resumed drain)."""
    if not path.exists() or path.stat().st_size == 0:
        return 0
    last_index = -1
    for op in read_history(path):
        last_index = op["index"]
    return last_index + 1


def parse_line(line: str, lineno: int, path: Path | str = "history") -> dict[str, Any]:
    """Parse and validate one history line; errors name the line and the problem."""
    try:
        op = json.loads(line)
    except json.JSONDecodeError as e:
        raise HistoryError(f"{path}: line {lineno}: not valid JSON ({e.msg})") from e
    return check_envelope(op, lineno, path)


def check_envelope(op: Any, lineno: int, path: Path | str = "history") -> dict[str, Any]:
    """Check the fields every line has (see docs/history.md); errors name the line."""
    if not isinstance(op, dict):
        raise HistoryError(f"{path}: line {lineno}: expected a JSON object")
    for key, kinds in _REQUIRED.items():
        if key not in op:
            raise HistoryError(f"{path}: line {lineno}: missing field {key!r}")
        if not isinstance(op[key], kinds) or isinstance(op[key], bool):
            raise HistoryError(
                f"{path}: line {lineno}: field {key!r} has wrong type {type(op[key]).__name__}"
            )
    if op["type"] not in TYPES:
        raise HistoryError(f"{path}: line {lineno}: unknown type {op['type']!r}")
    if isinstance(op["process"], str) and op["process"] != NEMESIS:
        raise HistoryError(f"{path}: line {lineno}: process must be an int or 'nemesis'")
    return op


_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "index": int,
    "time": int,
    "process": (int, str),
    "type": str,
    "f": str,
}


def read_history(path: Path | str) -> Iterator[dict[str, Any]]:
    """Yield validated ops; indices must strictly increase.

    A final line without its newline is a write cut short by a crash; it is
    skipped if it does not parse, since the prefix before it is still valid.
    """
    path = Path(path)
    previous = -1
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            if not line.endswith("\n"):
                try:
                    op = parse_line(line, lineno, path)
                except HistoryError:
                    return
            else:
                op = parse_line(line, lineno, path)
            if op["index"] <= previous:
                raise HistoryError(
                    f"{path}: line {lineno}: index {op['index']} does not increase "
                    f"(previous {previous})"
                )
            previous = op["index"]
            yield op


def wall_clock_on_history_axis(
    clock_ns: Callable[[], int] | None,
) -> Callable[[int], float] | None:
    """Wall-clock milliseconds (as brokers stamp their logs and records) -> seconds on
    a history's axis, anchored by reading both clocks now; None without ``clock_ns``
    (the history's ``HistoryWriter.elapsed_ns``)."""
    if clock_ns is None:
        return None
    history_s, wall_ms = clock_ns() / 1e9, time.time() * 1000
    return lambda ms: round(history_s + (ms - wall_ms) / 1000, 3)
