"""Reading a finished run's JSON Lines files without the history writer's module.

The after-the-run accounts (the disk faults, the lost values' provenance)
only read lines; a partial last line (a SIGKILLed writer) is skipped, as the
history contract says a reader must.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

NEMESIS = "nemesis"


def read_lines(path: Path) -> Iterator[dict[str, Any]]:
    """Each JSON object line of ``path``; nothing when it is missing."""
    if not Path(path).is_file():
        return
    with open(path, "rb") as lines:
        for raw in lines:
            try:
                op = json.loads(raw)
            except ValueError:
                continue  # a line cut short by a kill
            if isinstance(op, dict):
                yield op
