"""Why lazyfs cannot run here, for the tests that mount it to say why they skip."""

from __future__ import annotations

import os

from kafka_chaos.harness import lazyfs_build
from kafka_chaos.harness.errors import HarnessError


def lazyfs_missing() -> str:
    """'' when lazyfs can run; else why not. setup.sh builds it only where its source is
    at hand (../shared/sources, a checkout, the cache or GitHub) and only warns
    otherwise, so its tests skip with the reason instead of failing on a missing binary."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is absent"
    try:
        lazyfs_build.binary()
    except HarnessError as e:
        return str(e)
    return ""
