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
"""

from __future__ import annotations

import atexit
import logging
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from harness import elle_classpath
from harness.errors import HarnessError

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


def _start() -> _Elle:
    import jpype

    times = StartTimes()
    t0 = time.perf_counter()
    jars = elle_classpath.classpath()
    times.classpath_s = time.perf_counter() - t0

    compile_dir = tempfile.mkdtemp(prefix="kafka-chaos-elle-classes-")
    # Registered after JPype's own handler (at its import), so it runs first, while
    # the JVM is still up.
    atexit.register(_shutdown, compile_dir)
    if jpype.isJVMStarted():
        log.warning("a JVM already runs in this process; using it for Elle")
    else:
        t0 = time.perf_counter()
        jpype.startJVM("-Djava.awt.headless=true", HEAP, classpath=jars, convertStrings=False)
        times.jvm_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    try:
        api = jpype.JClass("clojure.java.api.Clojure")
    except TypeError as e:  # JPype reports a missing class as a TypeError
        raise HarnessError(
            "a JVM without Clojure already runs in this process; Elle cannot be loaded into it"
        ) from e
    require = api.var("clojure.core", "require")
    times.clojure_s = time.perf_counter() - t0
    jpype.JClass("clojure.lang.Compiler").COMPILE_PATH.bindRoot(jpype.JString(compile_dir))

    t0 = time.perf_counter()
    for namespace in REQUIRED_NAMESPACES:
        require.invoke(api.read(namespace))
    times.require_s = time.perf_counter() - t0
    log.info(
        "Elle JVM started: classpath %.2f s, JVM %.2f s, Clojure %.2f s, require %.2f s",
        times.classpath_s,
        times.jvm_s,
        times.clojure_s,
        times.require_s,
    )
    return _Elle(api, times)


def _shutdown(compile_dir: str) -> None:
    """Stop Clojure's agent and future threads so the JVM (and Python) can exit now."""
    import jpype

    try:
        if jpype.isJVMStarted():
            jpype.JClass("clojure.java.api.Clojure").var("clojure.core", "shutdown-agents").invoke()
    except Exception:  # exiting anyway; a failure here must not hide the real exit status
        log.debug("shutdown-agents failed", exc_info=True)
    shutil.rmtree(compile_dir, ignore_errors=True)
