"""Elle's JVM, started inside this Python process with JPype, lazily and once.

Spark runs in a JVM of its own and is driven over Py4J (checkers/session.py);
Elle, a Clojure library, runs in-process instead: JPype calls Clojure
functions directly, with no server, port or serialisation layer.  JPype can
start only one JVM per process and never restart it, so :func:`clojure` starts
it on first use (only when a cycle search is needed) and every later caller
shares it.

What the start needs (notes in docs/elle.md):

- ``-Djava.awt.headless=true``: rhizome, which Elle loads for plots, touches AWT.
- ``*compile-path*`` bound to a temp directory before any ``require``: dom-top
  (loaded by Elle) writes the classes it generates there, and with the var
  unbound (only clojure.main binds it) they land in the current directory.
- ``clojure.core/shutdown-agents`` at exit: otherwise Python waits about a
  minute for Clojure's idle future threads before it can exit.
- The JVM's signal handlers, put back at exit (checkers/txn/jvm_signals.py):
  pytest removes them, and Java code at exit then dies of SIGSEGV.

Loading Elle from its source jars compiles some 2,000 classes on every start
(5-12 s here).  The first start therefore compiles them ahead of time into
the cache (``~/.cache/kafka-chaos/elle/<version>/aot-<classpath hash>/``,
about 10 MB); later starts put that directory first on the classpath and load
the classes instead (2-3 s).  A new classpath gets a directory of its own.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_chaos.checkers.txn import jvm_signals
from kafka_chaos.harness import elle_classpath
from kafka_chaos.harness.errors import HarnessError

log = logging.getLogger(__name__)

HEAP = "-Xmx1g"  # a cycle search over 1e4-1e5 transactions peaks near 600 MB
REQUIRED_NAMESPACES = ("elle.core", "elle.graph", "elle.txn")


@dataclass
class StartTimes:
    """Seconds each start-up step took, for docs/elle.md and bench reports."""

    classpath_s: float = 0.0
    jvm_s: float = 0.0
    clojure_s: float = 0.0
    require_s: float = 0.0
    compiled: bool = False  # require_s includes compiling Elle ahead of time into the cache
    loads: dict[str, float] = field(default_factory=dict)  # load_file: path -> seconds


class _Elle:
    """The started JVM's Clojure entry points (``clojure.java.api.Clojure``)."""

    def __init__(self, api: Any, times: StartTimes) -> None:
        self._api = api
        self.times = times
        self._loaded: set[str] = set()
        self._lock = threading.Lock()

    def var(self, namespace: str, name: str) -> Any:
        """The Clojure var ``namespace/name``; call it with ``.invoke(...)``."""
        return self._api.var(namespace, name)

    def load_file(self, path: str) -> None:
        """``clojure.core/load-file`` once per path: reloading would redefine its records."""
        with self._lock:
            if path in self._loaded:
                return
            started = time.perf_counter()
            self.var("clojure.core", "load-file").invoke(path)
            self.times.loads[path] = time.perf_counter() - started
            self._loaded.add(path)


_started: _Elle | None = None
_start_lock = threading.Lock()


def clojure() -> _Elle:
    """The process's Elle JVM, started (classpath, JVM, ``require``) on first call.

    Raises ElleResolveError when Elle's jars cannot be resolved, and
    HarnessError when this process already runs a JVM without Clojure on it.
    """
    global _started
    with _start_lock:
        if _started is None:
            _started = _start()
        return _started


def started() -> bool:
    """Whether Elle's JVM already runs in this process (no start is triggered)."""
    return _started is not None


def jvm_held_by_another() -> bool:
    """Whether this process's one JVM runs, but not Elle's (Kafka's Java client
    does, in a run with ``--client java``): Elle must then run in a child."""
    import sys

    if _started is not None or "jpype" not in sys.modules:
        return False
    import jpype

    return bool(jpype.isJVMStarted())


def aot_dir(jars: list[str]) -> Path:
    """Where Elle's ahead-of-time compiled classes for this classpath are cached."""
    digest = hashlib.sha256(os.pathsep.join(jars).encode()).hexdigest()[:12]
    return elle_classpath.cache_dir() / f"aot-{digest}"


def _start() -> _Elle:
    import jpype

    times = StartTimes()
    t0 = time.perf_counter()
    jars = elle_classpath.classpath()
    times.classpath_s = time.perf_counter() - t0
    aot = aot_dir(jars)
    have_aot = (aot / AOT_MARKER).is_file()

    compile_dir = tempfile.mkdtemp(prefix="kafka-chaos-elle-classes-")
    # Registered after JPype's own handler (at its import), so it runs first, while
    # the JVM is still up.
    atexit.register(_shutdown, compile_dir)
    if jpype.isJVMStarted():
        log.warning("a JVM already runs in this process; using it for Elle")
    else:
        t0 = time.perf_counter()
        classpath = ([str(aot)] if have_aot else []) + jars
        jpype.startJVM("-Djava.awt.headless=true", HEAP, classpath=classpath, convertStrings=False)
        times.jvm_s = time.perf_counter() - t0
    jvm_signals.save()

    t0 = time.perf_counter()
    try:
        api = jpype.JClass("clojure.java.api.Clojure")
    except TypeError as e:  # JPype reports a missing class as a TypeError
        raise HarnessError(
            "a JVM without Clojure already runs in this process; Elle cannot be loaded into it"
        ) from e
    compiler = jpype.JClass("clojure.lang.Compiler")
    compiler.COMPILE_PATH.bindRoot(jpype.JString(compile_dir))
    times.clojure_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    if have_aot:
        _require(api)
    else:
        _require_compiling(api, aot)
        times.compiled = True
    times.require_s = time.perf_counter() - t0
    log.info(
        "Elle JVM started: classpath %.2f s, JVM %.2f s, Clojure %.2f s, require %.2f s%s",
        times.classpath_s,
        times.jvm_s,
        times.clojure_s,
        times.require_s,
        " (compiling into the cache)" if times.compiled else "",
    )
    return _Elle(api, times)


AOT_MARKER = "COMPLETE"


def _require(api: Any) -> None:
    require = api.var("clojure.core", "require")
    for namespace in REQUIRED_NAMESPACES:
        require.invoke(api.read(namespace))


def _require_compiling(api: Any, aot: Path) -> None:
    """Require Elle from source, writing its classes into ``aot`` for later starts.

    Compiled into a temp directory beside it and renamed into place, so a
    concurrent or interrupted start never leaves a partial cache that looks whole.
    """
    import jpype

    aot.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{aot.name}-", dir=aot.parent))
    compiler = jpype.JClass("clojure.lang.Compiler")
    var = jpype.JClass("clojure.lang.Var")
    bindings = jpype.JClass("clojure.lang.RT").map(
        compiler.COMPILE_PATH, jpype.JString(str(work)), compiler.COMPILE_FILES, True
    )
    try:
        var.pushThreadBindings(bindings)
        try:
            _require(api)
        finally:
            var.popThreadBindings()
        (work / AOT_MARKER).write_text("classes of elle.core, elle.graph, elle.txn\n")
        try:
            work.rename(aot)
        except OSError:  # another process got there first; its classes are the same
            pass
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _shutdown(compile_dir: str) -> None:
    """Stop Clojure's agent and future threads so the JVM (and Python) can exit now.

    The JVM's signal handlers go back first: Java code runs from here on
    (this call, then JPype's shutdown), and without them it can die of SIGSEGV
    (checkers/txn/jvm_signals.py).
    """
    import jpype

    jvm_signals.restore()
    try:
        if jpype.isJVMStarted():
            jpype.JClass("clojure.java.api.Clojure").var("clojure.core", "shutdown-agents").invoke()
    except Exception:  # exiting anyway; a failure here must not hide the real exit status
        log.debug("shutdown-agents failed", exc_info=True)
    shutil.rmtree(compile_dir, ignore_errors=True)
