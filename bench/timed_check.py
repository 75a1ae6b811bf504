"""Time one `kafka-chaos check` in a fresh process, as a user's cold check runs.

Its own module because every check benchmark (check_scale, check_reference,
check_stages, check_ab, txn_check_scale) times checks the same way; living in
check_scale, it tied check_scale and check_reference into an import loop.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

TICKS_PER_S = os.sysconf("SC_CLK_TCK")
POLL_S = 0.2


@dataclass
class Measured:
    """One check: wall seconds, its Spark JVM's CPU seconds, and its ``--json`` output.

    On a machine shared with other work the wall time drifts two- or threefold
    with the load; the CPU seconds the check's own JVM spent move far less
    (the same check at load 3-14: 19-23 CPU-s, 18-65 s wall), so they show
    whether a change saves work when the wall times cannot.
    """

    seconds: float
    jvm_cpu_s: float  # user + system of the CLI's child JVM, as last seen before it ended
    results: dict
    by_thread: dict[str, float] = field(default_factory=dict)  # ``thread_kinds``


# What a Spark JVM's threads do, by their names: a kind's CPU seconds say
# whether a setting saved the tasks' work or only moved it (to the collector,
# say, or to the JIT compilers).
THREAD_KINDS = (
    ("tasks", r"^Executor task"),
    ("C2 compiler", r"^C2 CompilerThre"),
    ("C1 compiler", r"^C1 CompilerThre"),
    ("collector", r"^(GC Thread|ParGC|PSYoung|VM Thread)"),
    ("driver (planning)", r"^Thread-\d"),  # py4j's: analysis, planning, code generation
)


def timed_check(
    history: Path, master: str | None = None, spark_conf: str = "", config: Path | None = None
) -> tuple[float, dict]:
    """Wall time and results of one `kafka-chaos check` in a fresh process."""
    done = measured_check(history, master, spark_conf, config)
    return done.seconds, done.results


def measured_check(
    history: Path, master: str | None = None, spark_conf: str = "", config: Path | None = None
) -> Measured:
    """One `kafka-chaos check` in a fresh process, its JVM's CPU read from /proc as it runs.

    ``spark_conf`` ("key=value,...") goes to checkers/session.py through KC_SPARK_CONF;
    ``config``: the run config to judge under (default: the CLI's).
    """
    cmd = [sys.executable, "-m", "kafka_chaos.cli", "check", str(history), "--json"]
    if config:
        cmd += ["--config", str(config)]
    if master:
        cmd += ["--spark-master", master]
    env = {**os.environ, "KC_SPARK_CONF": spark_conf}
    by_thread: dict[str, float] = {}
    took, cpu, (rc, stdout, stderr) = watched(cmd, env, timeout=3600, by_thread=by_thread)
    if rc not in (0, 1, 2):
        raise SystemExit(f"check failed ({rc}): {stderr[-2000:]}")
    return Measured(took, cpu, json.loads(stdout), by_thread)


def watched(
    cmd: list[str],
    env: dict[str, str],
    timeout: float,
    cwd: Path | None = None,
    by_thread: dict[str, float] | None = None,
) -> tuple[float, float, tuple[int, str, str]]:
    """Run ``cmd``: its wall seconds, its unreaped children's CPU seconds (read from /proc
    while it runs) and (exit code, stdout, stderr); exits when it outlives ``timeout``.
    ``by_thread`` is filled with the children's CPU seconds by ``THREAD_KINDS``."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(proc.communicate(timeout=timeout)))
    reader.start()
    cpu = 0.0
    threads: dict[tuple[int, str], tuple[str, float]] = {}
    while reader.is_alive():
        cpu = max(cpu, _children_cpu_s(proc.pid))
        if by_thread is not None:
            _read_threads(proc.pid, threads)
        reader.join(POLL_S)
    if by_thread is not None:
        by_thread.update(thread_kinds(threads.values()))
    took = time.monotonic() - t0
    if not out:  # communicate timed out
        proc.kill()
        raise SystemExit(f"{' '.join(cmd[:4])} still running after {timeout:.0f} s: killed")
    return took, cpu, (proc.returncode, out[0], out[1])


def _read_threads(pid: int, into: dict[tuple[int, str], tuple[str, float]]) -> None:
    """Every live child thread's (name, CPU seconds so far), by (child pid, thread id):
    a thread's last reading stands for it once it has ended."""
    for kid in child_pids(pid):
        try:
            tasks = list(Path(f"/proc/{kid}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                stat = (task / "stat").read_text()
            except OSError:
                continue
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            into[(int(kid), task.name)] = (name, stat_cpu_s(stat))


def thread_kinds(threads: Iterable[tuple[str, float]]) -> dict[str, float]:
    """CPU seconds by ``THREAD_KINDS`` (the rest as "other") of (thread name, seconds)."""
    out: dict[str, float] = {}
    for name, seconds in threads:
        kind = next((k for k, pattern in THREAD_KINDS if re.match(pattern, name)), "other")
        out[kind] = out.get(kind, 0.0) + seconds
    return out


def _children_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid``'s live children (the CLI's one child is Spark's
    JVM; the JVM is never waited for, so the kernel's rusage of children misses it)."""
    total = 0.0
    for kid in child_pids(pid):
        try:
            total += stat_cpu_s(Path(f"/proc/{kid}/stat").read_text())
        except OSError:
            continue
    return total


def child_pids(pid: int) -> list[str]:
    """The pids of ``pid``'s live children; none once it is gone."""
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []


def stat_cpu_s(stat: str) -> float:
    """User + system CPU seconds of a /proc ``stat`` line (of a process or a thread):
    after the command's closing parenthesis, utime and stime are the 12th and 13th fields."""
    fields = stat.rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S
