"""One run in a process of its own, for the suite cells that need one.

JPype gives a process one JVM, whose classpath is fixed at its start: a run
on Kafka's Java client holds the client of its Kafka version
(workloads/java/jvm.py).  A suite that runs the Java client on 3.9.2 and then
on 4.4.0 therefore runs each such cell in a fresh child process.  Other
cells run in the suite's own process, as before.

The child is spawned, not forked (a fork would copy the parent's threads'
locks and its JVM state).  It gets SIGINT from the terminal like the parent,
stops its run the usual way and sends back its outcome; the parent ignores
SIGINT meanwhile, so the interruption is the run's to report.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
from multiprocessing.connection import Connection
from pathlib import Path

from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.run import RunOutcome, run_test


def needs_own_process(spec: TestSpec) -> bool:
    """Whether the run starts a JVM that pins its process (the Java client)."""
    return spec.java_client


def run_in_child(spec: TestSpec, store: Path) -> RunOutcome:
    """``run_test(spec, store=store)`` in a spawned child; its HarnessError re-raised here."""
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    verbose = logging.getLogger().getEffectiveLevel() <= logging.DEBUG
    child = ctx.Process(target=_child, args=(spec, store, send, verbose), name=f"run {spec.name}")
    child.start()
    send.close()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        result = receive.recv()
    except EOFError:  # it died without an answer (killed, or a crash of the interpreter)
        result = HarnessError(f"{spec.name}: the run's process ended without an outcome")
    finally:
        signal.signal(signal.SIGINT, previous)
        child.join()
    if isinstance(result, BaseException):
        raise result
    return result


def _child(spec: TestSpec, store: Path, answer: Connection, verbose: bool) -> None:
    from kafka_chaos import terminal_log

    terminal_log.configure(verbose)
    try:
        answer.send(run_test(spec, store=store))
    except HarnessError as e:
        answer.send(e)
