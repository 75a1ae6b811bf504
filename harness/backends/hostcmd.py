"""Bounded commands on the harness host itself (ip, iptables, ssh-keygen).

Backends build and tear down node plumbing with host tools; every call has a
timeout so a wedged kernel call or tool can never hang ``cluster up``/``down``.
"""

from __future__ import annotations

import logging
import subprocess

from kafka_chaos.harness.errors import HarnessError

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 20.0


def host_run(
    args: list[str],
    timeout: float = DEFAULT_TIMEOUT_S,
    check: bool = True,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``args`` on the host; raise ``HarnessError`` on timeout or, if ``check``, failure."""
    log.debug("host: %s", " ".join(args))
    try:
        proc = subprocess.run(
            args,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    except subprocess.TimeoutExpired as e:
        raise HarnessError(f"`{' '.join(args)}` timed out after {timeout}s") from e
    except FileNotFoundError as e:
        raise HarnessError(f"`{args[0]}` is not installed (needed for `{' '.join(args)}`)") from e
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        raise HarnessError(f"`{' '.join(args)}` exited {proc.returncode}: {detail}")
    return proc


def host_ok(args: list[str], timeout: float = DEFAULT_TIMEOUT_S) -> bool:
    """True when ``args`` exits 0 (used for existence probes)."""
    try:
        return host_run(args, timeout=timeout, check=False).returncode == 0
    except HarnessError:
        return False
