"""The streaming query of the restart tests: a queue into parquet, with a
checkpoint, optionally holding still inside one batch so that a test can
kill it between the batch's offsets and its commit.

``python -m tests.spark.query URL HOLD_PORT QUEUE,TYPE,CHECKPOINT,OUTPUT...``
runs one such query per queue in a Spark session of its own; in each, the
batch that reads the message :data:`HOLD` connects to 127.0.0.1:HOLD_PORT,
says ``held`` and waits there until the process is killed.
"""

from __future__ import annotations

import socket
import sys
from typing import Any

__all__ = ["HOLD", "MESSAGES_PER_BATCH", "start_query", "main"]

#: The body of the message whose batch holds still.
HOLD = b"hold"
#: maxMessagesPerTrigger of the query.
MESSAGES_PER_BATCH = 4


def hold(body: bytes, port: int) -> bytes:
    """*body*; when it is :data:`HOLD` and *port* is set, first tell the test
    on *port* and wait until killed."""
    if port and body == HOLD:
        with socket.create_connection(("127.0.0.1", port)) as connection:
            connection.sendall(b"held\n")
            connection.recv(1)
        raise RuntimeError("the test that held this batch went away")
    return body


def start_query(
    spark: Any, url: str, queue: str, queue_type: str, checkpoint: str, output: str, hold_port: int
) -> Any:
    """Start the query (Trigger.AvailableNow) and return it."""
    from pyspark.sql import functions
    from pyspark.sql.types import BinaryType

    held = functions.udf(lambda body, port: hold(body, port), BinaryType(), useArrow=False)
    source = (
        spark.readStream.format("amqp09")
        .option("url", url)
        .option("queue", queue)
        .option("queueType", queue_type)
        .option("startingOffset", "first")
        .option("maxMessagesPerTrigger", str(MESSAGES_PER_BATCH))
        .load()
    )
    return (
        source.select(
            held(source.body, functions.lit(hold_port)).alias("body"),
            "offset",
            "redelivered",
            functions.col("properties")["message_id"].alias("message_id"),
        )
        .writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )


def main(arguments: list[str]) -> None:
    """Run the queries in a new local Spark session until they end."""
    from pyspark.sql import SparkSession

    from tests.spark.session import configure
    from txamqp09.spark import register

    url, hold_port, *queries = arguments
    spark = configure(SparkSession.builder.appName("txamqp09-restart")).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    started = [start_query(spark, url, *query.split(","), int(hold_port)) for query in queries]
    for query in started:
        query.awaitTermination()


if __name__ == "__main__":
    main(sys.argv[1:])
