"""A consumer slot that runs client incarnations on its own thread until stopped.

Consumer-group, share-group and transactional slots share this lifecycle: one
incarnation is one client under one process number; a crash (asked for by
the failover schedule, or an unexpected exception) records ``crash`` and the
slot goes on under a new process number.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from kafka_chaos.harness.history import HistoryWriter

log = logging.getLogger(__name__)

RESTART_PAUSE_S = 1.0


@dataclass
class ConsumerStats:
    polls: int = 0
    records: int = 0
    poll_errors: int = 0
    commits_ok: int = 0
    commits_failed: int = 0
    rebalances: int = 0
    crashes: int = 0


class Slot:
    """A client slot on its own thread: started, joined, and asked to crash."""

    def __init__(self, history: HistoryWriter, stop: threading.Event, name: str) -> None:
        self.history = history
        self.stop_event = stop
        self.process = -1
        self._crash_reason: str | None = None
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def join(self, timeout: float) -> bool:
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def request_crash(self, reason: str) -> None:
        """Ask the slot to crash at its next loop turn (within one poll timeout)."""
        self._crash_reason = reason

    def _take_crash(self) -> str | None:
        """The crash asked for, if any, now handled."""
        reason, self._crash_reason = self._crash_reason, None
        return reason

    def _run(self) -> None:
        raise NotImplementedError


class ClientSlot(Slot):
    """Subclasses implement ``_incarnation``: run one client until stopped or crashed."""

    def __init__(self, history: HistoryWriter, stop: threading.Event, name: str) -> None:
        super().__init__(history, stop, name)
        self.stats = ConsumerStats()

    def _incarnation(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while not self.stop_event.is_set():
            try:
                self._incarnation()
            except ValueError:  # history closed under us: the run is over
                return
            except Exception as e:
                log.warning("%s (process %s) failed: %s", self.thread.name, self.process, e)
                self._record_crash(f"{type(e).__name__}: {e}")
                self.stop_event.wait(RESTART_PAUSE_S)

    def _record_crash(self, reason: str) -> None:
        self.history.append(self.process, "info", "crash", {"reason": reason})
        self.stats.crashes += 1
