"""The Parquet rows of a history, written while the run records it (issue 46).

The history writer (``harness.history.HistoryWriter``) hands this recorder
each burst of lines right after writing them to history.jsonl.  ``feed``
only appends the bytes to a queue: the recording path never waits for
Parquet.  A background thread takes what is queued every ``FLUSH_S``
seconds (sooner once ``BATCH_BYTES`` are waiting, later while less than
``MIN_BATCH_BYTES`` are), turns the lines into rows
with the same code as the check's own conversion (``ingest.ChunkRows`` and
``ingest.RowsDir``), and appends them to the Parquet files as row groups.
``close`` has the thread convert the rest and put ``history.parquet`` in
place, marked with the bytes and lines of JSON it covers (``ingest.Covers``),
so the check starts from it instead of parsing the JSON (``checkers.ingest.load``).
``close`` does not wait for that: the check of the same process does
(``wait_until_written``), while its Spark starts, and so does the process's
exit.

history.jsonl stays the truth.  Any failure here (a line the rows cannot
take, a full disk, a writer left too far behind) is logged once and the
Parquet is dropped; the JSON lines were written before they were queued, so
none is lost, and the check rebuilds the rows from them.  A run killed
before ``close`` leaves only a ``.history.parquet.PID.tmp`` directory, which
the check ignores and removes.

    # rows for a finished history, as a run would:
    python -m kafka_chaos.checkers.ingest.recorded_rows HISTORY
"""

from __future__ import annotations

import argparse
import atexit
import logging
import os
import sys
import threading
import time
from collections import deque
from pathlib import Path

from kafka_chaos.checkers.ingest import convert as ingest

log = logging.getLogger(__name__)

FLUSH_S = 5.0  # rows reach the Parquet files this often...
BATCH_BYTES = 8 << 20  # ...or as soon as this much JSON waits
MIN_BATCH_BYTES = 1 << 20  # ...but a slow run's rows wait for this much: no tiny row groups
MAX_PENDING_BYTES = 512 << 20  # a writer this far behind gives up rather than hold more


class RowsRecorder:
    """Parquet rows of ``history``, fed its lines as they are written."""

    def __init__(
        self,
        history: Path,
        flush_s: float = FLUSH_S,
        batch_bytes: int = BATCH_BYTES,
        max_pending: int = MAX_PENDING_BYTES,
    ) -> None:
        self.history = Path(history)
        self.parquet = self.history.with_suffix(".parquet")
        self.flush_s, self.batch_bytes, self.max_pending = flush_s, batch_bytes, max_pending
        self.failed: str | None = None
        # fed is written by the feeder only, taken by the thread only: no lock.
        self._queue: deque[bytes] = deque()
        self._fed = self._taken = self._lines = 0
        self._wake, self._closing = threading.Event(), False
        self._rows = ingest.ChunkRows(self.history)
        self._out: ingest.RowsDir | None = None
        self._thread = threading.Thread(target=self._run, name="rows-recorder", daemon=True)
        self._thread.start()

    def feed(self, data: bytes) -> None:
        """Queue whole lines just written to the history (never blocks)."""
        if self.failed is not None:
            return
        self._queue.append(data)
        self._fed += len(data)
        waiting = self._fed - self._taken
        if waiting >= self.batch_bytes and not self._wake.is_set():
            self._wake.set()
        if waiting > self.max_pending:
            self._fail(f"the Parquet writer fell {waiting >> 20} MB behind the history")

    @property
    def backlog(self) -> int:
        """Bytes fed but not yet turned into rows."""
        return self._fed - self._taken

    def drop(self, why: str) -> None:
        """Give up on the Parquet (the check will rebuild it from the JSON)."""
        self._fail(why)

    def close(self) -> None:
        """Have the rest converted and the rows put in place (unless dropped);
        returns at once (``wait``)."""
        with _FINISHING_LOCK:
            _FINISHING[self.parquet.resolve()] = self
        self._closing = True
        self._wake.set()

    def wait(self) -> None:
        """Wait until the rows are in place, or dropped."""
        self._thread.join()
        with _FINISHING_LOCK:
            if _FINISHING.get(self.parquet.resolve()) is self:
                del _FINISHING[self.parquet.resolve()]

    def _fail(self, why: str) -> None:
        if self.failed is None:
            self.failed = why
            log.warning(
                "%s is not written while recording (%s); the check builds it from %s",
                self.parquet.name,
                why,
                self.history.name,
            )
        self._queue.clear()
        self._wake.set()

    def _run(self) -> None:
        try:
            self._out = ingest.RowsDir(
                self.parquet, self.parquet.with_name(f".{self.parquet.name}.{os.getpid()}.tmp")
            )
            while self.failed is None:
                self._wake.wait(self.flush_s)
                self._wake.clear()
                closing = self._closing
                waiting = self._fed - self._taken
                if closing or waiting >= min(MIN_BATCH_BYTES, self.batch_bytes):
                    self._convert_queued()
                if closing:
                    break
            if self.failed is None:
                self._rows.finish()
                self._out.finish(ingest.Covers(self._taken, self._lines))
                log.info("%s written while recording (%d lines)", self.parquet.name, self._lines)
        except Exception as e:  # noqa: BLE001 - any failure only costs the Parquet
            self._fail(f"{type(e).__name__}: {e}")
        finally:
            if self._out is not None:
                self._out.abort()

    def _convert_queued(self) -> None:
        """Turn the queued lines into rows, at most about ``ingest.CHUNK_BYTES`` at a time."""
        while self._queue and self.failed is None:
            parts, size = [], 0
            while self._queue and size < ingest.CHUNK_BYTES:
                part = self._queue.popleft()
                parts.append(part)
                size += len(part)
            chunk = b"".join(parts)
            tables = self._rows.rows(self._taken, chunk)
            assert self._out is not None
            self._out.write(tables)
            self._taken += len(chunk)
            self._lines += chunk.count(b"\n")


_FINISHING: dict[Path, RowsRecorder] = {}  # closed, maybe still converting
_FINISHING_LOCK = threading.Lock()


def wait_until_written(parquet: Path) -> None:
    """Wait for this process's recorder of ``parquet`` to finish, if it has one."""
    with _FINISHING_LOCK:
        recorder = _FINISHING.get(Path(parquet).resolve())
    if recorder is not None:
        recorder.wait()


@atexit.register
def _finish_all() -> None:
    """Closed recorders finish before the process exits (their thread is a daemon,
    so that a writer never closed cannot hold the exit up)."""
    with _FINISHING_LOCK:
        recorders = list(_FINISHING.values())
    for recorder in recorders:
        recorder.wait()


def record_file(
    history: Path, burst_bytes: int = 64 << 10, max_pending: int = MAX_PENDING_BYTES
) -> None:
    """Feed a finished ``history`` to a recorder in bursts of whole lines, as a
    run's writer would (bench/check_diff.py --record: the check then starts
    from these rows), waiting while half of ``max_pending`` is queued."""
    recorder = RowsRecorder(
        history, batch_bytes=min(BATCH_BYTES, max_pending // 4), max_pending=max_pending
    )
    with open(history, "rb") as fh:
        rest = b""
        while block := fh.read(burst_bytes):
            cut = block.rfind(b"\n") + 1
            if not cut:
                rest += block
                continue
            recorder.feed(rest + block[:cut])
            rest = block[cut:]
            # A run feeds at its own pace; a file is read far faster than rows are
            # made, and a 1e7-op one passed max_pending and lost its Parquet.
            while recorder.backlog > recorder.max_pending // 2 and recorder.failed is None:
                time.sleep(0.01)
    if rest:
        recorder.drop("the history ends in a line cut short")
    recorder.close()
    recorder.wait()


def main(argv: list[str] | None = None) -> int:
    """Record each named history's rows beside it; a path that is not a file is one line."""
    ap = argparse.ArgumentParser(description="Write history.parquet beside each history.jsonl.")
    ap.add_argument("history", nargs="+", type=Path)
    args = ap.parse_args(argv)
    missing = [str(h) for h in args.history if not h.is_file()]
    if missing:
        print(f"recorded_rows: no such history file: {', '.join(missing)}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for history in args.history:
        record_file(history)
    return 0


if __name__ == "__main__":
    sys.exit(main())
