"""One clean-up step that must never stop the others."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("kafka_chaos.run")


def guarded(what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run one teardown step; a failure is logged and never stops the others."""
    try:
        return fn(*args, **kwargs)
    except Exception:
        log.exception("%s failed", what)
        return None
