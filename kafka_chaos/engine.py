"""One warm Spark for every check of a suite, a shrink, a version grid or a replay.

Why: each check used to start a Spark of its own (a JVM start, class loading
and JIT warm-up, seconds to tens of seconds on this machine) and a suite of
14 scenarios paid it 14 times.  ``shared_engine`` starts one Spark Connect
server (checkers/connect_server.py) for the whole batch and names it in
``KC_SPARK_REMOTE``, so every check attaches to it: those in this process
and those in child processes alike (a Java-client run, kafka_chaos/child_run.py;
a grid cell's interpreter, bench/versions.py), which a local session could
not serve.  ``kafka-chaos run`` and ``check`` alone do not use it.

Inside another shared engine (an outer suite, the test session) or with a
server the user named (``KC_SPARK_REMOTE`` set), it starts nothing.  The
server is stopped in ``finally`` and at exit; one left by a SIGKILLed owner
is reaped by the next start or by ``kafka-chaos cluster down``.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
from collections.abc import Iterator

from kafka_chaos.checkers import connect_server
from kafka_chaos.checkers.remote import LOCAL_HERE_ENV, REMOTE_ENV
from kafka_chaos.harness.errors import HarnessError

log = logging.getLogger(__name__)


@contextlib.contextmanager
def shared_engine(children_only: bool = False) -> Iterator[str | None]:
    """Yield the ``sc://`` URL every check inside attaches to, starting a server if none is
    (None if it cannot start: the checks then start their own, as before).

    ``children_only``: this process keeps its own local session (the test
    session's unit tests), and only its child processes attach.
    """
    given = os.environ.get(REMOTE_ENV)
    if given:
        yield given
        return
    try:
        server = connect_server.start()
    except HarnessError as e:  # the checks can still run, each on a Spark of its own
        log.warning("no shared Spark engine (%s): each check starts its own", e)
        yield None
        return
    atexit.register(connect_server.stop, server)  # if the finally below never runs
    os.environ[REMOTE_ENV] = server.url
    if children_only:
        os.environ[LOCAL_HERE_ENV] = str(os.getpid())
    try:
        yield server.url
    finally:
        os.environ.pop(REMOTE_ENV, None)
        os.environ.pop(LOCAL_HERE_ENV, None)
        connect_server.stop(server)
        atexit.unregister(connect_server.stop)
