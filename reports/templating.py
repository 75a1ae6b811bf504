"""The report's Jinja environment and the filters its templates share.

Apart from ``reports/render.py`` so that a section drawn by a module of its own
(``reports/mirror.py``, declared by its workload) renders with the same
escaping and number formats as the page around it, without importing the page.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import jinja2

TEMPLATES = Path(__file__).parent / "templates"


def environment() -> jinja2.Environment:
    """Autoescaping everywhere: Kafka data and history text must stay inert."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = fmt_num
    env.filters["show"] = show_value
    return env


def fmt_num(v: Any, digits: int = 1) -> str:
    if isinstance(v, bool) or v is None:
        return "—" if v is None else str(v).lower()
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if math.isnan(v):
            return "—"
        return f"{v:,.{digits}f}" if abs(v) < 1e6 else f"{v:,.0f}"
    return str(v)


def show_value(v: Any) -> str:
    """Compact text for any JSON value (the template escapes it)."""
    if isinstance(v, str):
        return v
    if isinstance(v, (int, float, bool)) or v is None:
        return fmt_num(v) if not isinstance(v, int) or isinstance(v, bool) else str(v)
    return json.dumps(v, separators=(", ", ": "), ensure_ascii=False, default=str)
