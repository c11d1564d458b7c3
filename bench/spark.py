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
AMQP work). As the wall-clock rate depends on what else the machine runs,
each action's CPU time per message is reported too: the broker's, and
Spark's (its JVM and Python worker processes). The load average is printed
before and after.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

ROOT = str(Path(__file__).resolve().parents[1])
sys.path.insert(0, ROOT)  # this source tree, also in Spark's Python workers

from broker import Connection, cpu_seconds, running_brokers  # noqa: E402

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
        .config("spark.ui.showConsoleProgress", "false")
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


#: The actions, in the order they run and are printed.
ACTIONS = ("write", "read classic", "read stream")


@dataclass
class Cost:
    """One action's rate and CPU time per message."""

    rate: float
    broker_us: float
    spark_us: float


def spark_pid(spark: Any) -> int:
    """The process id of *spark*'s JVM (its Python workers are its descendants)."""
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def timed(action: Callable[[], Any], count: int, broker_pid: int, jvm_pid: int) -> Cost:
    """Run *action* (which moves *count* messages) and measure it."""
    broker, jvm = cpu_seconds(broker_pid), cpu_seconds(jvm_pid)
    started = time.perf_counter()
    action()
    elapsed = time.perf_counter() - started
    return Cost(
        count / elapsed,
        (cpu_seconds(broker_pid) - broker) / count * 1e6,
        (cpu_seconds(jvm_pid) - jvm) / count * 1e6,
    )


def measure(spark: Any, broker: Any, messages: int, body_size: int) -> dict[str, Cost]:
    """The cost of each action against *broker*."""
    port = broker.port
    url = f"amqp://guest:guest@127.0.0.1:{port}/"
    costs: dict[str, Cost] = {}
    jvm_pid = spark_pid(spark)

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
        costs["write"] = timed(lambda: write(count, "bench-classic"), count, broker.pid, jvm_pid)
        costs["read classic"] = timed(lambda: read("bench-classic", "classic", count), count, broker.pid, jvm_pid)
        write(count, "bench-stream")
        costs["read stream"] = timed(lambda: read("bench-stream", "stream", count), count, broker.pid, jvm_pid)
    return costs


def load() -> str:
    """The machine's load averages (1, 5 and 15 minutes)."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000, help="messages per action")
    parser.add_argument("--body-size", type=int, default=100, help="bytes per message body")
    parser.add_argument("--only", choices=("txamqp09", "rabbitmq"), help="benchmark one broker")
    options = parser.parse_args(argv)
    spark = session()
    before = load()
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as base_dir:
        with running_brokers(base_dir, options.only) as brokers:
            results = {broker.name: measure(spark, broker, options.messages, options.body_size)
                       for broker in brokers}
    print(f"{options.messages} messages of {options.body_size} B, local[2]; load average {before} before, "
          f"{load()} after")
    print("messages per second (CPU microseconds per message: broker / Spark's JVM and Python workers)")
    print(f"{'broker':<10}" + "".join(f"{action:>26}" for action in ACTIONS))
    for name, costs in results.items():
        cells = (f"{cost.rate:,.0f} ({cost.broker_us:.1f} / {cost.spark_us:.1f})"
                 for cost in (costs[action] for action in ACTIONS))
        print(f"{name:<10}" + "".join(f"{cell:>26}" for cell in cells))


if __name__ == "__main__":
    main()
