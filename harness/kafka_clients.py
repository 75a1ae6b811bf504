"""What every Kafka client the project opens shares, whoever opens it.

Workloads, nemeses (coordinator targeting) and the post-run forensics all open
librdkafka clients: they pass the same muted logger and close them the same
bounded way, so a wedged client never hangs the run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 10.0

# librdkafka's own log lines (connection refused, ...) go through Python
# logging instead of flooding stderr during faults; pass as the "logger"
# config.  During chaos they are expected noise (the history holds the
# evidence), so they are muted unless someone lowers this logger's level.
CLIENT_LOGGER = logging.getLogger("workloads.librdkafka")
CLIENT_LOGGER.setLevel(logging.CRITICAL)

T = TypeVar("T")


class CallTimedOut(Exception):
    """A client call did not return within its bound; its outcome is unknown."""


def bounded_call(fn: Callable[[], T], timeout_s: float, what: str) -> T:
    """Run a client call that has no timeout of its own, giving up after ``timeout_s``.

    The call continues in a daemon thread if it overruns; the caller treats the
    client as wedged and never touches it again.
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as e:  # re-raised in the caller
            box["error"] = e

    t = threading.Thread(target=target, name=f"bounded-{what}", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        raise CallTimedOut(f"{what} did not return within {timeout_s:g}s")
    if "error" in box:
        raise box["error"]
    return box["result"]


def close_quietly(consumer: Any, what: str) -> bool:
    """Close a client (consumer, share consumer) within CLOSE_TIMEOUT_S, logging any
    failure; whether close() returned, so the client has left its group.

    A close that does not return leaves the client alive in a daemon thread: it may
    stay a group member (heartbeating, owning partitions) until the process ends,
    so that is a warning, not a debug line."""
    try:
        bounded_call(consumer.close, CLOSE_TIMEOUT_S, what)
        return True
    except CallTimedOut as e:
        log.warning("%s: %s; the client may still be a member of its group", what, e)
    except Exception as e:
        log.debug("%s: %s", what, e)
    return False
