"""Docs tables written from code: update the file, or (``--check``) say it is stale.

Used by the generators of docs/results.md (checkers/catalog.py) and
docs/java-client.md (workloads/java/errors.py); their tests run ``--check``,
so a table can never drift from what the code does.
"""

from __future__ import annotations

import sys
from pathlib import Path


def write_or_check(path: Path, fresh: str, check: bool, how: str) -> int:
    """Write ``fresh`` to ``path``; with ``check``, only compare (1 when stale).

    ``how`` names the command that regenerates the file, for the stale message.
    """
    if check:
        if fresh != path.read_text():
            print(f"{path}: its generated tables are stale; run {how}", file=sys.stderr)
            return 1
        return 0
    path.write_text(fresh)
    return 0
