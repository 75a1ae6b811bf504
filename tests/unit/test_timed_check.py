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
