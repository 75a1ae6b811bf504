"""What a queue history's lines show (``Declaration.shown``), for a history
checked without its config (checkers/history_workload.py).

Why here: the share consumers' ``share-*`` lines and plain polls are what the
queue workload's clients write (the mirror workload's clients too), so the
workloads that run them declare how their lines are recognised.
"""

from __future__ import annotations

from typing import Any

from kafka_chaos.workloads.declared_parts import RowsFacts, Shown


def _share_lines(facts: RowsFacts) -> bool:
    return any(f.startswith("share-") for f in facts.distinct("control", "f"))


def _share_mode(facts: RowsFacts, config: dict[str, Any]) -> None:
    config.setdefault("consumer", {})["mode"] = "share"


# A share-group history has ``share-*`` lines; a plain queue consumer polls
# outside any transaction and outside the final drain (so do most clients:
# only asked when a config says another workload's lines).
SHOWN = (
    Shown(
        "share",
        _share_lines,
        strength="mode",
        implies=_share_mode,
        said=lambda spec: spec.consumer.mode == "share",
    ),
    Shown("queue", lambda facts: facts.plain_polls(), strength="plain"),
)
