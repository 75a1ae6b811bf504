"""One SparkSession factory, so every caller gets the same quiet, small-footprint setup.

The machine is shared: a 2g driver, few shuffle partitions (adaptive) and WARN
logging keep Spark from crowding out the Kafka brokers under test.
"""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"


def get_spark(master: str | None = None) -> SparkSession:
    """Return the process-wide session, creating it for ``master`` on first use.

    Spark allows one active session per JVM; a later call with another master
    gets the existing session (the CLI runs in its own process, so this only
    matters inside tests).
    """
    os.environ.setdefault("PYSPARK_PYTHON", "python3")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # never bind beyond this machine
    builder = (
        SparkSession.builder.master(master or DEFAULT_MASTER)
        .appName("kafka-chaos-check")
        .config("spark.driver.memory", "2g")
        .config("spark.executor.memory", "1g")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.parquet.compression.codec", "snappy")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
