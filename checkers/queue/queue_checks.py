"""The queue family: what every workload's sends, polls and groups promise.

Its checks live beside their filters (send_checks, loss_checks,
poll_checks, group_checks); this module only groups them, in the order
results.json lists them, and turns acked-lost's tallies into its verdict.
"""

from __future__ import annotations

from typing import Any

from kafka_chaos.checkers.check import Context, Findings
from kafka_chaos.checkers.collect import Found
from kafka_chaos.checkers.frames import TP, anomalies
from kafka_chaos.checkers.queue.commit_checks import COMMIT_REGRESSION, commit_regression
from kafka_chaos.checkers.queue.group_checks import (
    GROUP_COMMIT_PAST_UNREAD,
    GROUP_DOUBLE_OWNERSHIP,
    GROUP_UNOWNED,
    group_checks,
)
from kafka_chaos.checkers.queue.loss_checks import (
    ACKED_LOST,
    absent_values,
    acked_lost,
    bounds,
    losses,
    with_status,
)
from kafka_chaos.checkers.queue.poll_checks import (
    NONMONOTONIC_POLL,
    POLL_SKIP,
    poll_checks,
    suspicious_pairs,
)
from kafka_chaos.checkers.queue.send_checks import (
    DUPLICATE,
    DUPLICATE_UNACKED,
    FAILED_WRITE_READ,
    INCONSISTENT_OFFSETS,
    LOST_WRITE,
    NONMONOTONIC_SEND,
    UNSEEN,
    send_checks,
    value_branches,
    value_rows,
)
from kafka_chaos.checkers.results import LossTally, acked_lost_result
from kafka_chaos.checkers.spec_view import CheckedSpec
from pyspark.sql import DataFrame
from pyspark.sql import functions as F


class QueueFamily:
    """Positions and reads: loss, duplicates, order, skips and group ownership."""

    name = "queue"
    checks = (
        LOST_WRITE,
        UNSEEN,
        ACKED_LOST,
        DUPLICATE,
        DUPLICATE_UNACKED,
        INCONSISTENT_OFFSETS,
        FAILED_WRITE_READ,
        NONMONOTONIC_SEND,
        NONMONOTONIC_POLL,
        POLL_SKIP,
        GROUP_DOUBLE_OWNERSHIP,
        GROUP_UNOWNED,
        GROUP_COMMIT_PAST_UNREAD,
        COMMIT_REGRESSION,
    )

    def applies(self, spec: CheckedSpec) -> bool:
        return True

    def frames(self, ctx: Context) -> list[DataFrame]:
        t, checker = ctx.t, ctx.spec.spec.checker
        pairs = suspicious_pairs(t)
        # Every check of a value is a filter of per_value: one pass for them all
        # (``tables.anomalies``), over the rows some of them may report.
        values = t.per_value.where(value_rows() | absent_values())
        values = with_status(values.join(F.broadcast(t.partitions), TP, "left"), bounds(ctx))
        return (
            [anomalies(values, *value_branches(), acked_lost())]
            + send_checks(t, pairs)
            + poll_checks(t, pairs)
            + group_checks(t, checker.ownership_grace_s, checker.unowned_threshold_s)
            + [commit_regression(t)]
        )

    def findings(self, ctx: Context, found: Found) -> Findings:
        """acked-lost's validity: unknown while values are missing where the drain
        proves nothing (``results.acked_lost_result``)."""
        fields: dict[int | None, dict[str, Any]] = {}
        tallies = losses(ctx)
        for hid, m in ctx.meta.items():
            result = {"count": found.get(hid, {}).get(ACKED_LOST.name, (0, []))[0]}
            acked_lost_result(result, tallies.get(hid) or LossTally(), bool(m["final"]))
            del result["count"]
            fields[hid] = {ACKED_LOST.name: result}
        return Findings(fields=fields)


QUEUE = QueueFamily()
