"""A check from outside the product, in one file: acknowledgements that took too long.

``test_new_check.py`` adds it to the catalog and sees it everywhere a
check appears; no product file knows of it.  It is a real check of the
history's per-value table, not a stand-in: an ack more than ``LIMIT_S``
after its send was invoked.
"""

from __future__ import annotations

from kafka_chaos.checkers.check import Check, Context, always
from kafka_chaos.checkers.frames import anomaly
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

NAME = "slow-ack"
LIMIT_S = 5.0


def slow_acks(ctx: Context) -> list[DataFrame]:
    values = ctx.t.per_value.where(F.col("ack_time").isNotNull())
    waited = (F.col("ack_time") - F.col("invoke_time")) / F.lit(1e9)
    slow = values.where(waited > LIMIT_S).withColumn("waited_s", F.round(waited, 3))
    return [
        anomaly(
            slow,
            NAME,
            F.col("ack_index"),
            F.col("val").alias("value"),
            "waited_s",
            F.array("invoke_index", "ack_index").alias("indices"),
        )
    ]


SLOW_ACK = Check(
    name=NAME,
    family="queue",
    title="Slow acknowledgement",
    explanation=f"A send was acknowledged more than {LIMIT_S} s after it was invoked.",
    finds=f"an ack more than {LIMIT_S} s after its send's invoke",
    severity_doc="warning",
    meaning="The broker took long to acknowledge this message.",
    causes="A leader election, or a broker paused or cut off while the send waited.",
    severity=always("warning"),
    frames=slow_acks,
)
