"""Reading JSON files a user or an earlier run gave us, with errors that name the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kafka_chaos.harness.errors import ConfigError


def load_json(path: Path | str, what: str) -> Any:
    """Parse ``path``; a missing file or bad JSON is a ConfigError naming file and line."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError as e:
        raise ConfigError(f"{path}: no such {what} file") from e
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: line {e.lineno}: not valid JSON: {e.msg}") from e
