"""The queue family: what every workload's sends, polls and groups promise.

Its checks live beside their filters (send_checks, loss_checks,
poll_checks, group_checks); this module only groups them, in the order
results.json lists them, and turns acked-lost's tallies into its verdict.
"""

from __future__ import annotations

from typing import Any

from kafka_chaos.checkers.check import Context, Findings
from kafka_chaos.checkers.collect import Found
from kafka_chaos.checkers.queue.commit_checks import COMMIT_REGRESSION, commit_regression
from kafka_chaos.checkers.queue.group_checks import (
    GROUP_COMMIT_PAST_UNREAD,
    GROUP_DOUBLE_OWNERSHIP,
    GROUP_UNOWNED,
    group_checks,
)
from kafka_chaos.checkers.queue.loss_checks import ACKED_LOST, absent, acked_lost, losses
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
)
from kafka_chaos.checkers.results import LossTally, acked_lost_result
from kafka_chaos.checkers.spec_view import CheckedSpec
from pyspark.sql import DataFrame


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
        return (
            send_checks(t, pairs)
            + poll_checks(t, pairs)
            + group_checks(t, checker.ownership_grace_s, checker.unowned_threshold_s)
            + [acked_lost(absent(ctx)), commit_regression(t)]
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
