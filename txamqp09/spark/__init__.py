"""A PySpark data source (Spark 4) for AMQP brokers, format ``"amqp09"``.

Needs the ``spark`` extra (``pip install '.[spark]'`` from a clone:
pyspark and pyarrow)::

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

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from txamqp09.spark.source import AMQPDataSource

__all__ = ["AMQPDataSource", "register"]


def __getattr__(name: str) -> Any:
    """``AMQPDataSource``, imported on first use: the package's modules that
    do not need pyspark (options, rows) import without the ``spark`` extra."""
    if name == "AMQPDataSource":
        from txamqp09.spark.source import AMQPDataSource

        return AMQPDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register(spark: Any) -> None:
    """Make format ``"amqp09"`` available to *spark* (a ``SparkSession``)."""
    from txamqp09.spark.source import AMQPDataSource

    spark.dataSource.register(AMQPDataSource)
