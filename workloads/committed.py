"""Recorded reads of a group's committed offsets (``committed`` lines).

Why: a commit that returned success can still be lost by the broker (a
``__consumer_offsets`` leader change, KAFKA-20634), and nothing a member
reads shows it: the next owner just re-reads, which at-least-once allows.
The committed offsets themselves show it.  So each member reads its group's
committed offsets for the partitions it was just assigned, and again for
what it owns when the run ends, and records what it got; the
``commit-regression`` check compares them with the commits that returned
success before (docs/history.md, ``committed``).

The client's own fetch goes in ``fetch``; this module only records it, the
same way for librdkafka and the Java client.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka_chaos.harness.history import HistoryWriter

# A partition with no committed offset for the group, as a ``committed`` line says it.
NO_OFFSET = -1

Pairs = list[list[Any]]
Triples = list[list[Any]]


class FetchFailed(Exception):
    """The client answered, with an error for some partition: its name is the message."""


def record_fetch(
    history: HistoryWriter,
    process: int,
    group: str,
    partitions: Pairs,
    at: str,
    fetch: Callable[[Pairs], Triples],
    error_of: Callable[[BaseException], str],
) -> Triples | None:
    """Record one committed-offset read: an invoke, then ``ok`` with the offsets
    (``NO_OFFSET`` for none) or ``fail`` with the error.  A read changes
    nothing, so a failed one is ``fail`` whatever the error.  ``at`` says
    why it was made (``assigned``, ``end``).  Returns the offsets, or None."""
    value = {"group": group, "partitions": sorted(partitions), "at": at}
    history.append(process, "invoke", "committed", value)
    try:
        offsets = sorted(fetch(value["partitions"]))
    except Exception as e:  # every client error, and a bounded call's timeout
        error = str(e) if isinstance(e, FetchFailed) else error_of(e)
        history.append(process, "fail", "committed", {**value, "error": error})
        return None
    history.append(process, "ok", "committed", {**value, "offsets": offsets})
    return offsets
