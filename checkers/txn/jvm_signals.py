"""Keep an in-process JVM's signal handlers installed until the process exits.

HotSpot relies on its own SIGSEGV/SIGBUS/SIGFPE/SIGILL handlers: compiled code
dereferences null and lets the handler turn the fault into a
NullPointerException, and safepoints work the same way.  Anything in the
Python process that restores a handler it saved *before* the JVM started
removes the JVM's handler.  pytest's faulthandler plugin does exactly that at
the end of a session (``faulthandler.disable()`` puts back ``SIG_DFL``), and
JPype then runs Java code at interpreter exit (its shutdown hook, Clojure's
``shutdown-agents``): the first implicit null check kills the process with
SIGSEGV, after every test passed (exit 139, jpype-project/jpype#1261).

:func:`save` records the JVM's handlers right after it starts and
:func:`restore` puts them back at exit, before any Java code runs.  The
``struct sigaction`` is kept as opaque bytes, so nothing here depends on its
layout.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import signal

log = logging.getLogger(__name__)

# The signals HotSpot handles on Linux and faulthandler takes over.
JVM_SIGNALS = (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL)
_SIGACTION_BYTES = 512  # larger than any libc's struct sigaction (152 bytes on glibc x86_64)

_saved: dict[int, ctypes.Array[ctypes.c_char]] = {}


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def save() -> None:
    """Record the current handlers of :data:`JVM_SIGNALS` (call once the JVM runs)."""
    libc = _libc()
    for signum in JVM_SIGNALS:
        action = ctypes.create_string_buffer(_SIGACTION_BYTES)
        if libc.sigaction(int(signum), None, action) != 0:
            log.debug("sigaction(%s) could not be read: errno %d", signum, ctypes.get_errno())
            continue
        _saved[int(signum)] = action


def restore() -> None:
    """Reinstall the handlers :func:`save` recorded, whoever replaced them since."""
    libc = _libc()
    for signum, action in _saved.items():
        if libc.sigaction(signum, action, None) != 0:
            log.debug("sigaction(%s) could not be restored: errno %d", signum, ctypes.get_errno())
