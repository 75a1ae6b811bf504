"""One run option: a CLI flag and suite key, and where in the TestSpec it lands.

On the ground floor so that a workload's declaration (``workloads/registry.py``)
can bring options of its own, which ``kafka_chaos.options`` adds to the CLI
beside its table.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Option:
    flag: str
    path: str  # dotted path into TestSpec.to_dict()
    type: Any
    help: str
    choices: tuple[str, ...] | None = None
    also: tuple[str, ...] = ()  # more paths that take the same value (``--client``)
    bare: Any = None  # the value of the flag given without one (``--client-debug``)
    metavar: str | None = None


def parse_bool(text: str) -> bool:
    """A flag's true/false, in the spellings people type."""
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def parse_faults(text: str) -> list[str]:
    """A comma-separated list of fault kinds; ``none`` or nothing is no fault."""
    return [] if text in ("", "none") else [f.strip() for f in text.split(",") if f.strip()]
