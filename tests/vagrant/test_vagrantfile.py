"""The Vagrantfile validates, and rejects a node count it cannot serve."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

VAGRANT_DIR = Path(__file__).resolve().parents[2] / "vagrant"


@pytest.mark.parametrize(("nodes", "ok"), [("3", True), ("5", True), ("0", False)])
def test_vagrantfile_validates(nodes: str, ok: bool) -> None:
    out = subprocess.run(
        ["vagrant", "validate"],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "VAGRANT_CWD": str(VAGRANT_DIR), "KC_NODES": nodes},
    )
    if ok:
        assert out.returncode == 0 and "validated successfully" in out.stdout, out.stderr
    else:
        assert out.returncode != 0
        assert "KC_NODES must be between 1 and 9, got 0" in out.stdout + out.stderr
