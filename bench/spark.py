"""Messages per second into and out of Spark through the amqp09 data source.

A local Spark session (``local[2]``: two executor threads, each task in a
Python worker process) and the broker on loopback. Three timed actions per
broker, each over ``--messages`` messages with ``--body-size``-byte bodies:

``write``
    a batch write of a DataFrame to a durable classic queue: persistent
    messages, publisher confirms, two tasks;
``read classic``
    a batch read (the bounded drain) of that queue, two tasks, collected
    as a count;
``read stream``
    a batch read of a stream queue holding the same number of messages
    (published by a batch write first), from offset 0 to the tail, two tasks.

Each action runs once untimed at a tenth of the size first, so that Spark's
Python workers are started and warm. The time is the wall-clock time of the
Spark action, as a user sees it (planning, tasks, and the Python workers'
AMQP work).

Run::

    python bench/spark.py                          # both brokers
    python bench/spark.py --messages 200000 --only txamqp09
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

ROOT = str(Path(__file__).resolve().parents[1])
sys.path.insert(0, ROOT)  # this source tree, also in Spark's Python workers

from broker import Connection, running_brokers  # noqa: E402

from txamqp09.wire import _amqp0_9_1 as spec  # noqa: E402


def session() -> Any:
    """A local[2] Spark session on loopback with format "amqp09" registered."""
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from txamqp09.spark import register

    spark = (
        SparkSession.builder.master("local[2]").appName("txamqp09-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.executorEnv.PYTHONPATH", ROOT)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def declare(port: int, queue: str, queue_type: str) -> None:
    """Declare a durable queue of *queue_type* (after deleting an earlier one)."""
    connection = Connection(port)
    connection.call(spec.QueueDelete(queue=queue), spec.QueueDeleteOk)
    connection.call(
        spec.QueueDeclare(queue=queue, durable=True, arguments={"x-queue-type": queue_type}),
        spec.QueueDeclareOk,
    )
    connection.close()


def timed(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def measure(spark: Any, port: int, messages: int, body_size: int) -> dict[str, float]:
    """Messages per second of each action against the broker on *port*."""
    url = f"amqp://guest:guest@127.0.0.1:{port}/"
    rates: dict[str, float] = {}

    def frame(count: int) -> Any:
        return spark.range(count, numPartitions=2).selectExpr(
            f"cast(rpad(cast(id as string), {body_size}, '.') as binary) as body"
        )

    def write(count: int, queue: str) -> None:
        frame(count).write.format("amqp09").option("url", url).option("routingKey", queue).mode("append").save()

    def read(queue: str, queue_type: str, count: int) -> None:
        found = (spark.read.format("amqp09").option("url", url).option("queue", queue)
                 .option("queueType", queue_type).load().count())
        if found != count:
            raise RuntimeError(f"read {found} messages from {queue}, not {count}")

    for count in (max(1, messages // 10), messages):
        declare(port, "bench-classic", "classic")
        declare(port, "bench-stream", "stream")
        rates["write"] = count / timed(lambda: write(count, "bench-classic"))
        rates["read classic"] = count / timed(lambda: read("bench-classic", "classic", count))
        write(count, "bench-stream")
        rates["read stream"] = count / timed(lambda: read("bench-stream", "stream", count))
    return rates


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000, help="messages per action")
    parser.add_argument("--body-size", type=int, default=100, help="bytes per message body")
    parser.add_argument("--only", choices=("txamqp09", "rabbitmq"), help="benchmark one broker")
    options = parser.parse_args(argv)
    spark = session()
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as base_dir:
        with running_brokers(base_dir, options.only) as brokers:
            results = {broker.name: measure(spark, broker.port, options.messages, options.body_size)
                       for broker in brokers}
    print(f"{options.messages} messages of {options.body_size} B, local[2]; messages per second")
    print(f"{'broker':<10} {'write':>10} {'read classic':>13} {'read stream':>12}")
    for name, rates in results.items():
        print(f"{name:<10} {rates['write']:>10,.0f} {rates['read classic']:>13,.0f} {rates['read stream']:>12,.0f}")


if __name__ == "__main__":
    main()
