"""Reading a run directory's JSON inputs without failing: a report renders what is there.

Every input may be absent or damaged (a run cut short, an older run); the
report then says what is missing instead of raising.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Input:
    """A loaded JSON input, or the reason it is not available."""

    data: Any = None
    missing: str | None = None


def load_json(path: Path) -> Input:
    if not path.exists():
        return Input(missing=f"{path.name} not available (file absent)")
    try:
        return Input(data=json.loads(path.read_text(encoding="utf-8")))
    except json.JSONDecodeError as e:
        return Input(missing=f"{path.name} not available: line {e.lineno}: invalid JSON")
    except (OSError, UnicodeDecodeError) as e:
        return Input(missing=f"{path.name} not available: {e}")


def as_dict(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def as_list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []
