"""What a shrunk run's report and the store index say of its shrinking (shrink.json).

``kafka-chaos shrink`` copies its log beside the smallest failing run's report:
that run then says what was cut, from which run, and how often it failed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kafka_chaos.harness.rates import rate_text

LOG = "shrink.json"


def shrink_view(run_dir: Path, base: Path | None = None) -> dict[str, Any] | None:
    """The shrink of which ``run_dir`` is the result, or None; links relative to ``base``."""
    try:
        log = json.loads((run_dir / LOG).read_text())
    except (OSError, ValueError):
        return None
    steps = [s for s in log.get("steps", []) if isinstance(s, dict)]
    kept = [s for s in steps if s.get("kept")]
    # The confirming runs, when there are any: the search's own runs of the kept
    # candidate stop at its first failure and overstate the rate.
    confirm = (log.get("confirm") or {}).get("runs") or []
    runs = confirm or (kept[-1].get("runs", []) if kept else [])
    source = Path(str(log.get("source", "")))
    link = None
    if log.get("source") and (source / "report.html").exists():
        link = os.path.relpath(source / "report.html", base or run_dir)
    return {
        "source": str(source) if log.get("source") else None,
        "source_href": link,
        "start": (log.get("start") or {}).get("size", {}),
        "result": (log.get("result") or {}).get("size", {}),
        "cuts": [s.get("what", "?") for s in kept],
        "rate_from": "confirming runs" if confirm else "the search's runs",
        "rate": rate_text(sum(bool(r.get("failed")) for r in runs), len(runs)) if runs else None,
        "runs": sum(len(s.get("runs", [])) for s in steps),
        "stop_reason": log.get("stop_reason", ""),
        "anomaly": log.get("anomaly", []),
    }
