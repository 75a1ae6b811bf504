"""Time one `kafka-chaos check` in a fresh process, as a user's cold check runs.

Its own module because every check benchmark (check_scale, check_reference,
check_stages, check_ab, txn_check_scale) times checks the same way; living in
check_scale, it tied check_scale and check_reference into an import loop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def timed_check(
    history: Path, master: str | None = None, spark_conf: str = "", config: Path | None = None
) -> tuple[float, dict]:
    """Wall time and results of one `kafka-chaos check` in a fresh process.

    ``spark_conf`` ("key=value,...") goes to checkers/session.py through KC_SPARK_CONF;
    ``config``: the run config to judge under (default: the CLI's).
    """
    cmd = [sys.executable, "-m", "kafka_chaos.cli", "check", str(history), "--json"]
    if config:
        cmd += ["--config", str(config)]
    if master:
        cmd += ["--spark-master", master]
    env = {**os.environ, "KC_SPARK_CONF": spark_conf}
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=env)
    took = time.monotonic() - t0
    if proc.returncode not in (0, 1, 2):
        raise SystemExit(f"check failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return took, json.loads(proc.stdout)
