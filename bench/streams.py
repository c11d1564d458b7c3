"""Stream queues: appending and reading, this broker next to RabbitMQ's streams, in the same run.

For each broker, on loopback with the lean raw-socket client of
``bench/broker.py``:

``append``  a producer publishes N messages (256-byte bodies by default) to a
            new stream in confirm mode, at most ``--window`` unconfirmed; the
            phase ends when every message is confirmed (so it includes the
            disk writes both brokers make before confirming).
``read``    a new consumer reads the whole stream from ``x-stream-offset:
            first`` with prefetch ``--prefetch``, acknowledging every
            delivery; the phase ends when all N have arrived.

Both brokers keep their data on disk (this broker with its default SQLite
store). The report gives messages per second, the broker's CPU time per
message (user + system, from ``/proc``) and its resident memory after the
phase.

Run::

    python bench/streams.py                          # both brokers
    python bench/streams.py --messages 200000 --repeat 3
    python bench/streams.py --only txamqp09

Runs alternate between the brokers; ``--repeat N`` keeps the fastest of N
per broker and phase. With ``--threads`` each run of this broker also
prints (on stderr) the CPU time of each of its threads during the phase, in
milliseconds, the reactor's first (the store's writer and checkpointer
follow, in the order they started), and how many times each gave up the
processor while waiting (voluntary context switches: for the writer, its
waits for the disk, for the interpreter's lock and for work).
"""

from __future__ import annotations

import argparse
import os
import selectors
import sys
import tempfile
import time
import uuid
from typing import Any, Optional

from broker import _CLOCK_TICKS, Connection, Result, _counter, cpu_seconds, rss_kib, running_brokers
from durable import Confirms

from txamqp09.wire import _amqp0_9_1 as spec
from txamqp09.wire.frames import content_frames

PHASES = ("append", "read")


def append(port: int, stream: str, messages: int, body_size: int, window: int) -> float:
    """Publish *messages* to a new stream with confirms; the seconds until all are confirmed."""
    producer = Connection(port)
    producer.call(
        spec.QueueDeclare(queue=stream, durable=True, arguments={"x-queue-type": "stream"}),
        spec.QueueDeclareOk,
    )
    producer.call(spec.ConfirmSelect(), spec.ConfirmSelectOk)
    one = content_frames(
        1, spec.BasicPublish(exchange="", routing_key=stream), spec.BasicProperties(),
        b"x" * body_size, producer.frame_max,
    )
    producer.sock.setblocking(False)
    selector = selectors.DefaultSelector()
    selector.register(producer.sock, selectors.EVENT_READ)
    confirms = Confirms()
    published = 0
    outgoing = memoryview(b"")
    started = time.perf_counter()
    while confirms.count < messages:
        room = min(window - (published - confirms.count), messages - published)
        if not outgoing and room > 0:
            outgoing = memoryview(one * room)
            published += room
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if outgoing else 0)
        selector.modify(producer.sock, events)
        for _key, mask in selector.select(5):
            if mask & selectors.EVENT_READ:
                confirms.read(producer.sock)
            if mask & selectors.EVENT_WRITE and outgoing:
                outgoing = outgoing[producer.sock.send(outgoing):]
    elapsed = time.perf_counter() - started
    selector.close()
    producer.close()
    return elapsed


def read(port: int, stream: str, messages: int, prefetch: int) -> float:
    """Read *messages* from the start of *stream*, acking each; the seconds it took."""
    consumer = Connection(port)
    consumer.call(spec.BasicQos(prefetch_count=prefetch), spec.BasicQosOk)
    started = time.perf_counter()
    # Deliveries follow consume-ok at once: the counter reads everything
    # from here on (and skips consume-ok).
    consumer.send(
        1, spec.BasicConsume(queue=stream, consumer_tag="bench", arguments={"x-stream-offset": "first"})
    )
    consumer.sock.setblocking(False)
    selector = selectors.DefaultSelector()
    selector.register(consumer.sock, selectors.EVENT_READ)
    count = _counter(False, consumer.sock)
    received = 0
    while received < messages:
        if selector.select(5):
            received += count()
    elapsed = time.perf_counter() - started
    selector.close()
    consumer.close()
    return elapsed


def delete(port: int, stream: str) -> None:
    connection = Connection(port)
    connection.call(spec.QueueDelete(queue=stream), spec.QueueDeleteOk)
    connection.close()


def thread_times(pid: int) -> dict[int, tuple[int, int]]:
    """CPU time (clock ticks) and voluntary context switches of each thread of *pid*."""
    times = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/task/{task}/status") as status:
                waits = int(status.read().split("\nvoluntary_ctxt_switches:")[1].split()[0])
        except OSError:
            continue
        times[int(task)] = (int(fields[11]) + int(fields[12]), waits)
    return times


def thread_report(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]]) -> str:
    """What each thread that ran used between *before* and *after*, in the order the threads started."""
    used = []
    for task in sorted(after):
        ticks, waits = (a - b for a, b in zip(after[task], before.get(task, (0, 0))))
        if ticks or waits:
            used.append(f"{ticks * 1000 // _CLOCK_TICKS} ms / {waits} waits")
    return "threads: " + ", ".join(used)


def measure(broker: Any, options: argparse.Namespace) -> list[Result]:
    """Append to a new stream, then read it; one result per phase."""
    stream = f"bench-stream-{uuid.uuid4()}"
    results = []
    threads = options.threads and broker.name == "txamqp09"
    for phase in PHASES:
        cpu_before = cpu_seconds(broker.pid)
        threads_before = thread_times(broker.pid) if threads else {}
        if phase == "append":
            seconds = append(broker.port, stream, options.messages, options.body_size, options.window)
        else:
            seconds = read(broker.port, stream, options.messages, options.prefetch)
        if threads:
            print(f"{phase} {thread_report(threads_before, thread_times(broker.pid))}", file=sys.stderr)
        results.append(Result(
            broker.name, phase, options.messages, seconds, cpu_seconds(broker.pid) - cpu_before,
            rss_kib(broker.pid),
        ))
    delete(broker.port, stream)
    return results


def report(results: list[Result]) -> str:
    """A table of the results, with the ratio of the two brokers' rates per phase."""
    lines = [f"{'phase':<7} {'broker':<9} {'msg/s':>9} {'CPU us/msg':>10} {'RSS MiB':>8}"]
    for r in results:
        lines.append(
            f"{r.scenario:<7} {r.broker:<9} {r.rate:>9,.0f} {r.cpu_us_per_message:>10.2f} "
            f"{r.rss_kib / 1024:>8.1f}"
        )
    rates = {(r.scenario, r.broker): r.rate for r in results}
    for phase in PHASES:
        ours, theirs = rates.get((phase, "txamqp09")), rates.get((phase, "rabbitmq"))
        if ours and theirs:
            lines.append(f"{phase}: txamqp09 / rabbitmq = {ours / theirs:.2f}x")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000, help="messages per run")
    parser.add_argument("--body-size", type=int, default=256, help="bytes per message body")
    parser.add_argument("--window", type=int, default=1000, help="unconfirmed messages at most")
    parser.add_argument("--prefetch", type=int, default=1000, help="the reader's prefetch count")
    parser.add_argument("--repeat", type=int, default=1, help="runs per broker; the fastest counts")
    parser.add_argument("--only", choices=("txamqp09", "rabbitmq"), help="benchmark one broker")
    parser.add_argument("--threads", action="store_true", help="print this broker's CPU per thread")
    options = parser.parse_args(argv)
    best: dict[tuple[str, str], Result] = {}
    with tempfile.TemporaryDirectory(prefix="bench-streams-") as base_dir:
        with running_brokers(base_dir, options.only) as brokers:
            for _ in range(options.repeat):
                for broker in brokers:
                    for result in measure(broker, options):
                        print(report([result]).splitlines()[1], file=sys.stderr)
                        key = (result.scenario, result.broker)
                        if key not in best or result.seconds < best[key].seconds:
                            best[key] = result
    print(report([best[(phase, broker.name)] for phase in PHASES for broker in brokers]))


if __name__ == "__main__":
    main()
