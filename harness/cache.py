"""The one directory every download and build of kafka-chaos is kept in.

Why a module: Kafka's jars, Elle's classpath, lazyfs and Tansu are each
fetched or built once and found again by later runs, and a user moves all
of them together with one variable, ``KAFKA_CHAOS_CACHE``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from kafka_chaos.harness.errors import HarnessError


def cache_root(kind: str) -> Path:
    """``${KAFKA_CHAOS_CACHE:-~/.cache/kafka-chaos}/<kind>``."""
    base = os.environ.get("KAFKA_CHAOS_CACHE") or str(Path.home() / ".cache" / "kafka-chaos")
    return Path(base) / kind


def replace_whole(staged: Path, out: Path) -> None:
    """Put a finished build at ``out`` by one rename: a half-built cache is never "cached"."""
    if out.exists():
        shutil.rmtree(out)
    staged.rename(out)


def run_step(
    args: list[str],
    cwd: Path,
    what: str,
    log: Path | None = None,
    timeout_s: float = 1200.0,
    env: dict[str, str] | None = None,
) -> None:
    """One step of a build, its output appended to ``log``; a HarnessError in one line."""
    out = open(log, "a") if log else subprocess.DEVNULL  # noqa: SIM115 - closed below
    try:
        res = subprocess.run(
            args, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout_s, env=env
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise HarnessError(f"{what}: {e}") from e
    finally:
        if log:
            out.close()
    if res.returncode != 0:
        where = f"; see {log}" if log else ""
        raise HarnessError(f"{what}: `{' '.join(args[:3])} ...` exited {res.returncode}{where}")
