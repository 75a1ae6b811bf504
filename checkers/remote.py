"""Attach to a Spark Connect server (``sc://HOST:PORT``) instead of starting Spark here.

Why: a suite, a shrink or a test session judges many histories, and a Spark
started per check pays its JVM start and warm-up every time.  One server
(checkers/connect_server.py, or one the user runs: ``--spark-remote``) stays
warm and every check attaches to it.  The URL travels in ``KC_SPARK_REMOTE``
so that checks in child processes (kafka_chaos/child_run.py) attach too.

A dead or unreachable server is one ``HarnessError`` line, found by a plain
TCP connect bounded by ``PROBE_TIMEOUT_S`` before the Connect client, which
would otherwise retry for minutes and end in a gRPC traceback.
"""

from __future__ import annotations

import logging
import os
import socket
import warnings
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from kafka_chaos.harness.errors import ConfigError, HarnessError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

REMOTE_ENV = "KC_SPARK_REMOTE"
# The pid of a process that keeps its own local session although it shares
# REMOTE_ENV with its children (the test session: its unit tests' local Spark).
LOCAL_HERE_ENV = "KC_SPARK_LOCAL_PID"
DEFAULT_PORT = 15002  # Spark Connect's own default
PROBE_TIMEOUT_S = 5.0


def address(url: str) -> tuple[str, int]:
    """(host, port) of an ``sc://HOST[:PORT][/;params]`` URL; ConfigError if it is not one."""
    parsed = urlparse(url)
    try:
        port = DEFAULT_PORT if parsed.port is None else parsed.port
    except ValueError:
        port = 0
    if parsed.scheme != "sc" or not parsed.hostname or not 0 < port < 65536:
        raise ConfigError(f"--spark-remote {url!r}: expected sc://HOST:PORT")
    return parsed.hostname, port


def probe(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Raise one clear HarnessError unless something accepts connections at ``url``."""
    host, port = address(url)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return
    except OSError as e:
        if isinstance(e, TimeoutError):
            reason = f"no answer within {timeout_s:g} s"
        else:
            reason = (e.strerror or str(e)).lower()
        raise HarnessError(
            f"Spark Connect server {url} is not reachable ({reason}): "
            "start it, or check without --spark-remote (a local Spark)"
        ) from None


def connect(url: str) -> SparkSession:
    """A Connect session on the server at ``url`` (one per URL in this process),
    checked to be reachable first.

    A process is either local or connected: ``pyspark.sql.functions`` builds
    Connect columns only once ``SPARK_CONNECT_MODE_ENABLED`` is set (as the
    builder sets it), and local ones otherwise, so checkers/session.py never
    connects a process that runs a local session.
    """
    probe(url)
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    session = _SESSIONS.get(url)
    if session is None or session.is_stopped:
        with warnings.catch_warnings():  # pandas 3 is fine for what the checks ask of it
            warnings.simplefilter("ignore", FutureWarning)
            from pyspark.sql.connect.session import SparkSession as RemoteSession

            session = RemoteSession.builder.remote(url).create()
        _SESSIONS[url] = session
        log.info("attached to Spark Connect server %s", url)
    return session  # type: ignore[return-value]  # the same DataFrame API


_SESSIONS: dict[str, SparkSession] = {}


def detach(url: str) -> None:
    """Close this process's session on ``url``, before its server stops.

    Why: a DataFrame kept by a local checkpoint is a cached relation on the
    server, and its ``__del__`` asks the server to drop it, through the Connect
    client's retries, unless the session is closed.  After the server is gone
    that is minutes of retrying at exit (bench/brokers.py hung there after its
    table); a closed session drops nothing and returns at once.
    """
    session = _SESSIONS.pop(url, None)
    if session is not None and not session.is_stopped:
        try:
            session.stop()
        except Exception as e:  # noqa: BLE001  the server may be gone already: nothing to release
            log.info("closing the Spark Connect session on %s: %s", url, e)
