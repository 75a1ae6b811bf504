"""Broker data on lazyfs: each node's Kafka log directory on its own mount.

Why: Kafka acknowledges a write once replicas hold it in memory and, by
default, never fsyncs; a power loss takes the page cache with it.  lazyfs
keeps every write that was not fsynced in its own cache and drops them all
on ``lazyfs::clear-cache`` (written to its control FIFO), which is that
power loss for one node, while its process and mount stay up.

Local backend only: nodes share the host's file system, so the host mounts
``<root>/data/kafka`` (backed by ``<root>/data/kafka.lazyfs``) before the
node's sshd starts (the host's mounts are private: a namespace made later
would not see them).  Every mount is recorded in cluster.json before it is
made (``records``); ``cluster down`` ends the lazyfs process by its pid
file with the node's other processes and unmounts whatever is mounted below
the cluster's directory (``unmount_below``), record or not.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

from kafka_chaos.harness.errors import HarnessError

DISKS = ("plain", "lazyfs", "tmpfs")  # tmpfs: harness/tmpfs_disk.py (disk-full)
FSTYPE = "fuse.lazyfs"
MOUNT_TIMEOUT_S = 30.0
CLEAR_TIMEOUT_S = 10.0
# lazyfs's cache per node, allocated whole when it starts (RSS: measured 1.18 GB
# at 1024 MB, ~2 s to mount).  Eviction stays off (an evicted page would be a
# write that survives power loss); but a write that finds the cache full goes
# straight to the backing file, so a run that writes more than this per node
# between power losses loses less than a real one would.  KC_LAZYFS_CACHE_MB sets it.
CACHE_MB = 512
CLEARED_LINE = "cache is cleared"
# Kafka preallocates each active segment's offset and time indexes to
# log.index.size.max.bytes (10 MiB): lazyfs holds those zeroes in its cache,
# 20 MiB per partition on every node.  1 MiB indexes (131k entries, 512 MiB
# of log each) keep ~56 partitions per node within the cache.
BROKER_CONFIG = {"log.index.size.max.bytes": str(1024 * 1024)}


def record(root_dir: str) -> dict[str, str]:
    """Where one node's mount, backing dir, config, FIFO, pid file and log go."""
    root = root_dir.rstrip("/")
    return {
        "mount": f"{root}/data/kafka",
        "backing": f"{root}/data/kafka.lazyfs",
        "config": f"{root}/config/lazyfs.toml",
        "fifo": f"{root}/run/lazyfs.fifo",
        "pid_file": f"{root}/run/lazyfs.pid",
        "log": f"{root}/logs/lazyfs.log",
    }


def records(backend_state: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The lazyfs mounts a cluster.json records, by node name ({} on a plain disk)."""
    return dict(backend_state.get("lazyfs") or {})


def config_text(rec: dict[str, str], cache_mb: int = CACHE_MB) -> str:
    """lazyfs's TOML config (its ``default.toml`` with our paths)."""
    return "\n".join(
        [
            "[faults]",
            f'fifo_path="{rec["fifo"]}"',
            "[cache]",
            "apply_eviction=false",
            "[cache.simple]",
            f'custom_size="{cache_mb}mb"',
            "blocks_per_page=1",
            "[filesystem]",
            "log_all_operations=false",
            f'logfile="{rec["log"]}"',
            "",
        ]
    )


def cache_mb() -> int:
    text = os.environ.get("KC_LAZYFS_CACHE_MB", "")
    if not text:
        return CACHE_MB
    if not text.isdigit() or int(text) < 16:
        raise HarnessError(f"KC_LAZYFS_CACHE_MB={text!r}: give a whole number of MB, at least 16")
    return int(text)


def mount_all(recs: list[dict[str, str]], binary: Path) -> list[int]:
    """Start lazyfs on every record's mount point at once; their pids once all are mounted."""
    procs = [_start(rec, binary) for rec in recs]
    return [_wait_mounted(rec, proc) for rec, proc in zip(recs, procs, strict=True)]


def mount(rec: dict[str, str], binary: Path) -> int:
    """Start lazyfs on ``rec``'s mount point; its pid once the mount is there."""
    return _wait_mounted(rec, _start(rec, binary))


def _start(rec: dict[str, str], binary: Path) -> subprocess.Popen[bytes]:
    # lazyfs's main() drops --config-path when it contains "-o" in any case
    # (strcasestr) and then aborts on config/default.toml: say why, up front
    if "-o" in rec["config"].lower():
        raise HarnessError(
            f"{rec['config']}: lazyfs ignores a config path with '-o' in it "
            "(lazyfs/src/main.cpp); put the cluster in a directory without '-o'"
        )
    for key in ("mount", "backing"):
        Path(rec[key]).mkdir(parents=True, exist_ok=True)
    for key in ("config", "fifo", "log"):
        Path(rec[key]).parent.mkdir(parents=True, exist_ok=True)
    Path(rec["config"]).write_text(config_text(rec, cache_mb()))
    args = [
        str(binary), rec["mount"], "--config-path", rec["config"],
        "-o", "allow_other", "-o", "modules=subdir", "-o", f"subdir={rec['backing']}", "-f",
    ]  # fmt: skip
    # stdout carries a line per file operation (">> FTRUNCATE"); its own log has what matters
    proc = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=open(rec["log"] + ".stderr", "ab"),  # noqa: SIM115 - the child keeps it
        start_new_session=True,  # outlives the harness, ended by its pid file
    )
    Path(rec["pid_file"]).write_text(f"{proc.pid}\n")
    return proc


def _wait_mounted(rec: dict[str, str], proc: subprocess.Popen[bytes]) -> int:
    deadline = time.monotonic() + MOUNT_TIMEOUT_S
    while time.monotonic() < deadline:
        if is_mounted(rec["mount"]):
            return proc.pid
        if proc.poll() is not None:
            raise HarnessError(
                f"lazyfs on {rec['mount']} exited {proc.returncode} before mounting; "
                f"see {rec['log']}.stderr"
            )
        time.sleep(0.1)
    raise HarnessError(f"lazyfs on {rec['mount']}: not mounted after {MOUNT_TIMEOUT_S:.0f}s")


def _mounts() -> list[tuple[str, str]]:
    """(mount point, fstype) of every mount this process sees."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        point = left.split()[4].encode().decode("unicode_escape")  # \040 for a space
        found.append((point, right.split()[0] if right else ""))
    return found


def is_mounted(path: str) -> bool:
    """Whether lazyfs is mounted at ``path`` (a dead one, whose process is gone, counts)."""
    return any(p == path.rstrip("/") and t == FSTYPE for p, t in _mounts())


def mounted_below(path: str) -> list[str]:
    """Every mount point at or below ``path``, deepest first."""
    root = path.rstrip("/")
    points = [p for p, _ in _mounts() if p == root or p.startswith(root + "/")]
    return sorted(set(points), key=lambda p: -p.count("/"))


def unmount_below(path: str) -> list[str]:
    """Unmount everything mounted below ``path`` (ours: the cluster's own directory).

    ``fusermount3 -u`` first; a busy or dead mount is detached lazily
    (``-z``), and ``umount -l`` is the last resort.  Returns what it unmounted.
    """
    done = []
    for point in mounted_below(path):
        for args in (["fusermount3", "-u", point], ["fusermount3", "-u", "-z", point],
                     ["umount", "-l", point]):  # fmt: skip
            try:
                ok = subprocess.run(args, capture_output=True, timeout=30).returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                ok = False
            if ok:
                done.append(f"mount {point}")
                break
        else:
            raise HarnessError(f"{point}: could not unmount (fusermount3 -u, -z, umount -l)")
    return done


def clear_cache_script(rec: dict[str, str], timeout_s: float = CLEAR_TIMEOUT_S) -> str:
    """Shell that drops the mount's unsynced writes and waits until lazyfs says it did.

    Exit 4: lazyfs never confirmed (its log has no new "cache is cleared").
    The FIFO write is bounded too: with lazyfs dead nobody reads it.
    """
    fifo, log = shlex.quote(rec["fifo"]), shlex.quote(rec["log"])
    tries = int(timeout_s / 0.1)
    return (
        f"n0=$(grep -c {shlex.quote(CLEARED_LINE)} {log} 2>/dev/null || true); "
        f"timeout {timeout_s:.0f} sh -c 'echo lazyfs::clear-cache > \"$1\"' _ {fifo} || exit 5; "
        f"for i in $(seq {tries}); do "
        f"n=$(grep -c {shlex.quote(CLEARED_LINE)} {log} 2>/dev/null || true); "
        '[ "${n:-0}" -gt "${n0:-0}" ] && exit 0; sleep 0.1; done; exit 4'
    )


def alive(rec: dict[str, str]) -> bool:
    """The lazyfs process of ``rec`` runs and its mount is there."""
    try:
        pid = int(Path(rec["pid_file"]).read_text().strip())
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return is_mounted(rec["mount"])
