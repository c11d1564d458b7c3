"""A PySpark data source (Spark 4) for AMQP brokers, format ``"amqp09"``.

Needs the ``spark`` extra (``pip install 'txamqp09[spark]'``: pyspark and
pyarrow)::

    from pyspark.sql import SparkSession
    from txamqp09.spark import register

    spark = SparkSession.builder.getOrCreate()
    register(spark)
    events = (spark.read.format("amqp09")
              .option("url", "amqp://guest:guest@localhost:5672/")
              .option("queue", "events").option("queueType", "stream")
              .load())

See docs/pipeline.rst for the options, the schema and the guarantees.
"""

from __future__ import annotations

from typing import Any

from txamqp09.spark.source import AMQPDataSource

__all__ = ["AMQPDataSource", "register"]


def register(spark: Any) -> None:
    """Make format ``"amqp09"`` available to *spark* (a ``SparkSession``)."""
    spark.dataSource.register(AMQPDataSource)
