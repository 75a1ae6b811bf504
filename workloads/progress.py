"""Live progress of a run: a rich table on a terminal, a log line per interval otherwise.

CI logs cannot render a live display, and a silent 10-minute run looks hung,
so without a TTY the same figures go to the log every few seconds.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Progress:
    """A workload's counts so far, in its unit (``Snapshot.unit``): what its summary
    gives the display."""

    done: int
    ok: int
    fail: int
    info: int
    polls: int
    records: int
    crashes: int
    target_rate: float  # <= 0: unlimited


@dataclass
class Snapshot:
    """The figures shown; produced by the workload on demand."""

    elapsed_s: float
    counts: Progress
    rate: float  # units/s over the last display interval
    fault: str
    unit: str = "sends"  # what the counts' done/ok/fail/info count

    def line(self) -> str:
        c = self.counts
        target = f"{c.target_rate:.0f}" if c.target_rate > 0 else "unlimited"
        return (
            f"t={self.elapsed_s:.0f}s {self.unit}={c.done} ok={c.ok} fail={c.fail} "
            f"info={c.info} rate={self.rate:.0f}/s (target {target}) polls={c.polls} "
            f"records={c.records} crashes={c.crashes} fault={self.fault}"
        )


def _table(s: Snapshot) -> Any:
    from rich.table import Table

    u, c = s.unit, s.counts
    table = Table(title="kafka-chaos workload", show_header=False, min_width=50)
    table.add_column(style="bold")
    table.add_column(justify="right")
    target = f"{c.target_rate:.0f}/s" if c.target_rate > 0 else "unlimited"
    short = c.target_rate > 0 and s.elapsed_s > 3 and s.rate < 0.9 * c.target_rate
    rows = [
        ("elapsed", f"{s.elapsed_s:.0f} s"),
        (f"{u} ok", f"[green]{c.ok}[/]"),
        (f"{u} failed", f"[red]{c.fail}[/]" if c.fail else "0"),
        (f"{u} indeterminate", f"[yellow]{c.info}[/]" if c.info else "0"),
        (f"{u} rate", f"{'[red]' if short else ''}{s.rate:.0f}/s{'[/]' if short else ''}"),
        ("target rate", target),
        ("polls / records", f"{c.polls} / {c.records}"),
        ("consumer crashes", str(c.crashes)),
        ("current fault", f"[magenta]{s.fault}[/]" if s.fault != "none" else "none"),
    ]
    for k, v in rows:
        table.add_row(k, v)
    return table


class ProgressDisplay:
    """Refreshes from ``snapshot()`` in its own daemon thread until stopped."""

    def __init__(
        self,
        snapshot: Callable[[], Snapshot],
        interval_s: float | None = None,
        live: bool | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.live = sys.stdout.isatty() if live is None else live
        self.interval_s = interval_s if interval_s is not None else (0.5 if self.live else 5.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="progress", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def _run(self) -> None:
        try:
            if self.live:
                self._run_live()
            else:
                self._run_log()
        except Exception:  # a display problem must never affect the run
            log.exception("progress display failed")

    def _run_live(self) -> None:
        from rich.live import Live

        with Live(_table(self.snapshot()), refresh_per_second=4, transient=False) as live:
            while not self._stop.wait(self.interval_s):
                live.update(_table(self.snapshot()))
            live.update(_table(self.snapshot()))

    def _run_log(self) -> None:
        while not self._stop.wait(self.interval_s):
            log.info("%s", self.snapshot().line())


class RateMeter:
    """Sends per second between successive reads (for the display only)."""

    def __init__(self) -> None:
        self._last = (time.monotonic(), 0)

    def rate(self, total: int) -> float:
        now = time.monotonic()
        t0, n0 = self._last
        self._last = (now, total)
        return (total - n0) / (now - t0) if now > t0 else 0.0
