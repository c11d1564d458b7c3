"""Persistent messages with publisher confirms: this broker next to RabbitMQ, in the same run.

One producer and one consumer on loopback, each on its own connection, and a
durable queue. The producer publishes persistent (delivery-mode 2) 1 KiB
messages in confirm mode with at most 192 unconfirmed at any time; the
consumer acknowledges every message (one basic.ack per delivery, those of one
read sent together) with prefetch 200. A run ends when every message is both
confirmed and consumed.

For each broker the report gives messages per second, fsyncs per second (the
flush requests completed by the block device that holds the data, from
``/sys/block/DEV/stat``: every fsync or fdatasync that reaches the disk, from
any process on the machine while the run lasts), messages per fsync, the
broker's CPU time per message (user + system, from ``/proc``) and its
resident memory after the run. The load generator is the lean raw-socket
client of ``bench/broker.py``.

Run::

    python bench/durable.py                      # both brokers
    python bench/durable.py --messages 200000 --repeat 3
    python bench/durable.py --only txamqp09
    python bench/durable.py --store postgresql://postgres@127.0.0.1:5432/amqp   # this broker on PostgreSQL
    python bench/durable.py --only txamqp09 --standby --window 200 --ack-every 50

``--standby`` runs this broker on a private PostgreSQL primary with a
synchronous streaming standby, both started for the run on this machine
(txamqp09.testing.postgresql): a commit returns once the standby has it on
disk too. ``--ack-every N`` acknowledges every N-th delivery with
``multiple`` instead of each one.

Runs alternate between the brokers; ``--repeat N`` keeps the fastest of N.
"""

from __future__ import annotations

import argparse
import os
import selectors
import socket
import struct
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from broker import Connection, _counter, cpu_seconds, rss_kib, running_brokers

from txamqp09.testing.postgresql import PostgreSQL
from txamqp09.wire import _amqp0_9_1 as spec
from txamqp09.wire.frames import content_frames

QUEUE = "bench-durable"
_FRAME_HEADER = struct.Struct(">BHI")
_CONFIRM = struct.Struct(">HHQB")
_BASIC_ACK, _BASIC_NACK = (60, 80), (60, 120)


@dataclass
class Result:
    """What one run measured on one broker."""

    broker: str
    messages: int
    seconds: float
    flushes: int
    cpu_seconds: float
    rss_kib: int

    @property
    def rate(self) -> float:
        return self.messages / self.seconds


# -- fsyncs ---------------------------------------------------------------------


def block_device(path: str) -> str:
    """The name of the whole block device (e.g. ``vda``) that holds *path*."""
    device = os.stat(path).st_dev
    node = Path(f"/sys/dev/block/{os.major(device)}:{os.minor(device)}").resolve()
    if not (node / "device").exists() and (node.parent / "stat").exists():
        node = node.parent  # a partition: its disk has the flush counter
    return node.name


def flushes(device: str) -> int:
    """Flush requests the device has completed since boot (field 15 of its stat)."""
    fields = Path(f"/sys/block/{device}/stat").read_text().split()
    if len(fields) < 17:
        raise RuntimeError(f"/sys/block/{device}/stat has no flush counter (kernel older than 5.5)")
    return int(fields[15])


# -- the workload ---------------------------------------------------------------


class Confirms:
    """Publisher confirms received: acks with and without ``multiple``."""

    def __init__(self) -> None:
        self.up_to = 0
        self.single: set[int] = set()
        self.buffer = bytearray()

    @property
    def count(self) -> int:
        return self.up_to + len(self.single)

    def read(self, sock: socket.socket) -> None:
        """Take the confirms that arrived on *sock*."""
        try:
            data = sock.recv(1 << 16)
        except BlockingIOError:
            return
        if not data:
            raise RuntimeError("the broker closed the producer's connection")
        buffer = self.buffer
        buffer += data
        pos = 0
        while len(buffer) - pos >= 7:
            frame_type, _channel, length = _FRAME_HEADER.unpack_from(buffer, pos)
            end = pos + 8 + length
            if end > len(buffer):
                break
            if frame_type == 1:
                class_id, method_id, tag, bits = _CONFIRM.unpack_from(buffer, pos + 7)
                if (class_id, method_id) == _BASIC_NACK:
                    raise RuntimeError(f"the broker nacked message {tag}")
                if (class_id, method_id) == _BASIC_ACK:
                    self._ack(tag, bool(bits & 1))
            pos = end
        del buffer[:pos]

    def _ack(self, tag: int, multiple: bool) -> None:
        if multiple:
            self.up_to = tag
            self.single = {each for each in self.single if each > tag}
        elif tag > self.up_to:
            self.single.add(tag)


def run(
    port: int, messages: int, body_size: int, window: int, prefetch: int,
    ack_every: int = 1, arguments: Optional[dict[str, Any]] = None,
) -> float:
    """Move *messages* persistent messages through a durable queue; the seconds it took.

    :param ack_every: the consumer acknowledges each delivery, or every
        *ack_every*-th one with ``multiple``.
    :param arguments: the queue's arguments (``x-queue-type``...).
    """
    producer, consumer = Connection(port), Connection(port)
    producer.call(spec.QueueDeclare(queue=QUEUE, durable=True, arguments=arguments or {}), spec.QueueDeclareOk)
    producer.call(spec.QueuePurge(queue=QUEUE), spec.QueuePurgeOk)
    producer.call(spec.ConfirmSelect(), spec.ConfirmSelectOk)
    consumer.call(spec.BasicQos(prefetch_count=prefetch), spec.BasicQosOk)
    consumer.call(spec.BasicConsume(queue=QUEUE, consumer_tag="bench"), spec.BasicConsumeOk)
    one = content_frames(
        1, spec.BasicPublish(exchange="", routing_key=QUEUE),
        spec.BasicProperties(delivery_mode=2), b"x" * body_size, producer.frame_max,
    )
    for sock in (producer.sock, consumer.sock):
        sock.setblocking(False)
    selector = selectors.DefaultSelector()
    selector.register(consumer.sock, selectors.EVENT_READ, "consumer")
    selector.register(producer.sock, selectors.EVENT_READ, "producer")
    confirms = Confirms()
    count = _counter(False, consumer.sock, ack_every)
    received = published = 0
    outgoing = memoryview(b"")
    started = time.perf_counter()
    while received < messages or confirms.count < messages:
        room = min(window - (published - confirms.count), messages - published)
        if not outgoing and room > 0:
            outgoing = memoryview(one * room)
            published += room
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if outgoing else 0)
        selector.modify(producer.sock, events, "producer")
        for key, mask in selector.select(5):
            if key.data == "consumer":
                received += count()
            else:
                if mask & selectors.EVENT_READ:
                    confirms.read(producer.sock)
                if mask & selectors.EVENT_WRITE and outgoing:
                    outgoing = outgoing[producer.sock.send(outgoing):]
    elapsed = time.perf_counter() - started
    selector.close()
    consumer.close()
    producer.sock.setblocking(True)
    producer.call(spec.QueueDelete(queue=QUEUE), spec.QueueDeleteOk)
    producer.close()
    return elapsed


def measure(broker: Any, device: str, messages: int, options: argparse.Namespace) -> Result:
    """One run on *broker*, with its fsyncs, CPU time and memory."""
    cpu_before, flushes_before = cpu_seconds(broker.pid), flushes(device)
    seconds = run(broker.port, messages, options.body_size, options.window, options.prefetch, options.ack_every)
    return Result(
        broker.name, messages, seconds, flushes(device) - flushes_before,
        cpu_seconds(broker.pid) - cpu_before, rss_kib(broker.pid),
    )


def report(results: list[Result]) -> str:
    """A table of the results, with the ratio of the two brokers' rates."""
    lines = [
        f"{'broker':<9} {'msg/s':>8} {'fsync/s':>8} {'msg/fsync':>9} {'CPU us/msg':>10} {'RSS MiB':>8}"
    ]
    for r in results:
        lines.append(
            f"{r.broker:<9} {r.rate:>8,.0f} {r.flushes / r.seconds:>8,.0f} "
            f"{r.messages / max(r.flushes, 1):>9.1f} {r.cpu_seconds * 1e6 / r.messages:>10.2f} "
            f"{r.rss_kib / 1024:>8.1f}"
        )
    rates = {r.broker: r.rate for r in results}
    if len(rates) == 2:
        lines.append(f"txamqp09 / rabbitmq = {rates['txamqp09'] / rates['rabbitmq']:.2f}x")
    return "\n".join(lines)


def synchronous_pair(stack: ExitStack) -> str:
    """Start a PostgreSQL primary and its synchronous streaming standby,
    each in a directory of its own (removed when *stack* closes); the URL
    of a new database on the primary."""
    primary = PostgreSQL(tempfile.mkdtemp(prefix="bench-durable-primary-"))
    stack.callback(primary.remove)
    primary.start()
    standby = primary.add_standby(tempfile.mkdtemp(prefix="bench-durable-standby-"))
    stack.callback(standby.remove)
    primary.make_synchronous()
    return primary.new_database()


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000, help="messages per run")
    parser.add_argument("--body-size", type=int, default=1024, help="bytes per message body")
    parser.add_argument("--window", type=int, default=192, help="unconfirmed messages at most")
    parser.add_argument("--prefetch", type=int, default=200, help="the consumer's prefetch count")
    parser.add_argument("--ack-every", type=int, default=1,
                        help="acknowledge every N-th delivery with multiple (default: each one)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per broker; the fastest counts")
    parser.add_argument("--only", choices=("txamqp09", "rabbitmq"), help="benchmark one broker")
    store_choice = parser.add_mutually_exclusive_group()
    store_choice.add_argument("--store", help="this broker's store URL (default: SQLite in the run's directory)")
    store_choice.add_argument("--standby", action="store_true",
                              help="this broker on a PostgreSQL primary with a synchronous standby, started for the run")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-durable-") as base_dir, ExitStack() as servers:
        device = block_device(base_dir)
        url = synchronous_pair(servers) if options.standby else options.store
        store = ("--store", url) if url else ()
        with running_brokers(base_dir, options.only, store) as brokers:
            for broker in brokers:  # warm-up
                run(broker.port, min(options.messages // 10, 10000), options.body_size,
                    options.window, options.prefetch, options.ack_every)
            best: dict[str, Result] = {}
            for _ in range(options.repeat):
                for broker in brokers:
                    result = measure(broker, device, options.messages, options)
                    print(report([result]).splitlines()[1], file=sys.stderr)
                    if broker.name not in best or result.seconds < best[broker.name].seconds:
                        best[broker.name] = result
    print(report([best[broker.name] for broker in brokers]))


if __name__ == "__main__":
    main()
