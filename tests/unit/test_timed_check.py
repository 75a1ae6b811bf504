"""bench/timed_check.py: the CPU seconds of a check's child JVM, read from /proc while it runs
(the kernel's rusage of children misses a child that is never waited for)."""

from __future__ import annotations

import subprocess
import sys
import time

from bench import timed_check

# A parent whose child burns 0.6 CPU-s, then idles until killed (as Spark's JVM
# outlives its last job); the grandchild's CPU is not the child's.
BUSY_CHILD = """
import subprocess, sys
subprocess.run([sys.executable, "-c", '''
import time
t = time.process_time()
while time.process_time() - t < 0.6:
    pass
time.sleep(60)
'''])
"""


def test_a_busy_childs_cpu_is_counted() -> None:
    parent = subprocess.Popen([sys.executable, "-c", BUSY_CHILD])
    try:
        seen, deadline = 0.0, time.monotonic() + 30
        while seen < 0.55 and time.monotonic() < deadline:
            seen = timed_check._children_cpu_s(parent.pid)
            time.sleep(0.1)
        assert 0.55 <= seen < 5
    finally:
        for kid in open(f"/proc/{parent.pid}/task/{parent.pid}/children").read().split():
            subprocess.run(["kill", kid], check=False)
        parent.kill()
        parent.wait()


def test_a_gone_process_has_no_children() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert timed_check._children_cpu_s(gone.pid) == 0.0


# A parent whose child names a thread as the JVM names its optimising compiler's
# and burns 0.5 CPU-s in it, while the child's main thread sleeps.
NAMED_THREAD_CHILD = """
import subprocess, sys
subprocess.run([sys.executable, "-c", '''
import ctypes, threading, time
def busy():
    ctypes.CDLL(None).prctl(15, b"C2 CompilerThre")  # PR_SET_NAME
    t = time.process_time()
    while time.process_time() - t < 0.5:
        pass
    time.sleep(1.0)
threading.Thread(target=busy).start()
'''])
"""


def test_a_threads_cpu_is_counted_by_its_kind() -> None:
    by_thread: dict[str, float] = {}
    cmd = [sys.executable, "-c", NAMED_THREAD_CHILD]
    _, _, (rc, _, _) = timed_check.watched(cmd, {}, timeout=60, by_thread=by_thread)
    assert rc == 0
    assert 0.4 <= by_thread["C2 compiler"] < 5
    assert by_thread.get("other", 0.0) < 0.4  # the sleeping main thread and the interpreter's start


def test_thread_names_map_to_kinds() -> None:
    kinds = timed_check.thread_kinds(
        [("Executor task launch worker for task 3.0 in stage 1.0 (TID 7)", 2.0),
         ("Executor task launch worker for task 4.0 in stage 1.0 (TID 8)", 1.0),
         ("C1 CompilerThre", 0.5), ("ParGC Thread#1", 0.25), ("Thread-3", 0.125),
         ("dag-scheduler-e", 0.0625)]
    )  # fmt: skip
    assert kinds == {
        "tasks": 3.0, "C1 compiler": 0.5, "collector": 0.25, "driver (planning)": 0.125,
        "other": 0.0625,
    }  # fmt: skip
