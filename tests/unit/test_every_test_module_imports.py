"""Every test module imports, the cluster tiers' too, in the fast tier.

Why: an integration module that imports a moved name fails only when the full
suite collects it (at 19b74d1, 25 minutes in).  Collecting every tier here,
without running any of it, finds that in seconds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_tier_collects_without_an_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "error" not in done.stdout.splitlines()[-1].lower()
