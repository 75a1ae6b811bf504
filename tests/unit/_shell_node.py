"""A node whose commands run in this machine's shell: a service's real processes, no SSH."""

from __future__ import annotations

import subprocess

from kafka_chaos.harness.node import Node, RunResult


class ShellNode(Node):
    """A node whose commands run in this machine's shell instead of over SSH."""

    def run(self, command, timeout=60, check=True, idempotent=True):  # type: ignore[override]
        proc = subprocess.run(
            ["sh", "-c", command], capture_output=True, text=True, timeout=timeout
        )
        return RunResult(proc.returncode, proc.stdout, proc.stderr)
