"""Run one function on several threads at once: the shape of every concurrency test here."""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_in_threads(work: Callable[[int], object], count: int) -> None:
    """Start ``work(0) .. work(count - 1)`` on their own threads and wait for all of them."""
    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
