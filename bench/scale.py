"""Costs that grow with scale: this broker next to RabbitMQ, in the same run.

Each scenario starts a fresh broker of each kind (so that resident memory
is the scenario's own), runs the same load on both with the lean raw-socket
client of ``bench/broker.py``, and stops them:

``queues``    N queues declared (non-durable, declares pipelined 500 at a
              time): the time, resident memory per idle queue, and the
              latency of a passive queue.declare among them (1,000, one at
              a time, of random queues).
``bindings``  a topic exchange with N bindings to one queue, half of them
              ``sNNN.*.kI`` and half ``#.kI``: the time to bind, then the
              routing rate of 16-byte messages whose keys each match one
              binding, delivered to a no-ack consumer.
``fanout``    one publisher to a fanout exchange with 100 queues, each with
              a no-ack consumer: deliveries per second.
``backlog``   N transient 16-byte messages queued with nobody consuming:
              resident memory per queued message beyond its body.
``large-1MiB``, ``large-16MiB``
              1 MiB and 16 MiB bodies, one publisher, one no-ack consumer:
              MB/s, the broker's CPU time per GB moved (user + system) and
              its peak resident memory (VmHWM).
``drained-16B``, ``drained-1KiB``
              a backlog of 500,000 messages (16 B or 1 KiB) drained by a
              consumer (prefetch 500, acks; ``bench/startup.py``'s, with its
              passive declares ten times a second): resident memory idle, full,
              and 5 s after the drain, as a ratio to idle.

Run::

    python bench/scale.py                              # every scenario, both brokers
    python bench/scale.py --scenario backlog --backlog 10000000 --only txamqp09
    python bench/scale.py --json                       # figures for bench/compare.py

Prints one line per figure with both brokers' values and the ratio
(greater than 1: this broker does better), then the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import selectors
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from broker import Connection, RabbitMQBroker, Txamqp09Broker, _counter, cpu_seconds, rss_kib
from startup import QUEUE as BACKLOG, drain

from txamqp09.testing.rabbitmq import rabbitmq_missing
from txamqp09.wire import _amqp0_9_1 as spec
from txamqp09.wire.frames import content_frames, method_frame

KiB, MiB = 1024, 1024 * 1024
#: Requests sent before their answers are read, where the order allows.
PIPELINE = 500
#: RabbitMQ's memory watermark in these runs: its default (40 % of the
#: machine) would let one run take more than its share of a shared machine.
RABBITMQ_WATERMARK = "3GiB"
#: This broker's limit of ready message bytes before publishers wait (far
#: above any run here: the backlog scenarios measure memory, not flow control).
HIGH_WATERMARK = str(1 << 40)


@dataclass
class Figure:
    """One measured quantity on each broker.

    :ivar higher_is_better: a rate (True) or a cost (False); the ratio is
        this broker's advantage either way.
    """

    scenario: str
    unit: str
    higher_is_better: bool
    command: str
    values: dict[str, float] = field(default_factory=dict)

    @property
    def ratio(self) -> Optional[float]:
        """This broker's advantage: > 1 when it does better."""
        ours, theirs = self.values.get("txamqp09"), self.values.get("rabbitmq")
        if not ours or not theirs:
            return None
        return ours / theirs if self.higher_is_better else theirs / ours


# -- brokers ---------------------------------------------------------------------


@contextmanager
def fresh_broker(name: str, base_dir: str) -> Iterator[Any]:
    """A new broker *name* (``txamqp09`` or ``rabbitmq``), stopped on exit."""
    run_dir = tempfile.mkdtemp(prefix=f"{name}-", dir=base_dir)
    broker: Any
    if name == "txamqp09":
        broker = Txamqp09Broker(None, ("--transient", "--high-watermark", HIGH_WATERMARK))
    else:
        broker = RabbitMQBroker(run_dir, {"vm_memory_high_watermark.absolute": RABBITMQ_WATERMARK})
    try:
        yield broker
    finally:
        broker.stop()


def peak_rss_kib(pid: int) -> int:
    """The highest resident memory *pid* has had (VmHWM), in KiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmHWM for process {pid}")


def settled_rss_kib(pid: int, seconds: float = 2.0) -> int:
    """Resident memory once it stopped changing for a second (at most *seconds* of looking)."""
    deadline = time.monotonic() + seconds
    last = rss_kib(pid)
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = rss_kib(pid)
        if now == last:
            break
        last = now
    return last


# -- the load -------------------------------------------------------------------


def pipelined(connection: Connection, methods: list[Any], answer: type) -> None:
    """Send *methods* on channel 1, :data:`PIPELINE` at a time, reading their answers."""
    for start in range(0, len(methods), PIPELINE):
        batch = methods[start : start + PIPELINE]
        connection.sock.sendall(b"".join(method_frame(1, method) for method in batch))
        for _ in batch:
            connection.expect(answer, 1)


def message_frames(connection: Connection, exchange: str, routing_key: str, body: bytes) -> bytes:
    """One transient basic.publish with *body*, encoded."""
    return content_frames(
        1, spec.BasicPublish(exchange=exchange, routing_key=routing_key), spec.BasicProperties(), body,
        connection.frame_max,
    )


def consume(connection: Connection, queues: list[str], prefetch: int = 0) -> None:
    """Start a consumer on each of *queues* (no-ack unless *prefetch*)."""
    if prefetch:
        connection.call(spec.BasicQos(prefetch_count=prefetch), spec.BasicQosOk)
    for number, queue in enumerate(queues):
        connection.call(
            spec.BasicConsume(queue=queue, consumer_tag=f"c{number}", no_ack=not prefetch), spec.BasicConsumeOk
        )


def pump(
    publisher: Connection, consumer: Connection, messages: Callable[[int], bytes], count: int,
    fan_out: int = 1, window: int = 5000, no_ack: bool = True,
) -> float:
    """Publish *count* messages (``messages(i)`` gives the frames of the
    i-th) while *consumer* receives ``count * fan_out`` deliveries; at most
    *window* messages in flight. The seconds it took."""
    for sock in (publisher.sock, consumer.sock):
        sock.setblocking(False)
    selector = selectors.DefaultSelector()
    selector.register(consumer.sock, selectors.EVENT_READ, "consumer")
    selector.register(publisher.sock, selectors.EVENT_READ, "publisher")
    received = published = 0
    expected = count * fan_out
    deliveries = _counter(no_ack, consumer.sock)
    outgoing = memoryview(b"")
    started = time.perf_counter()
    while received < expected:
        if not outgoing and published < count and published - received // fan_out < window:
            outgoing = memoryview(messages(published))
            published += 1
        selector.modify(publisher.sock, selectors.EVENT_WRITE if outgoing else selectors.EVENT_READ, "publisher")
        for key, _events in selector.select(1):
            if key.data == "consumer":
                received += deliveries()
            elif outgoing:
                outgoing = outgoing[publisher.sock.send(outgoing):]
    elapsed = time.perf_counter() - started
    selector.close()
    for sock in (publisher.sock, consumer.sock):
        sock.setblocking(True)
    return elapsed


def fill(port: int, queue: str, count: int, body: bytes) -> None:
    """Publish *count* transient messages to *queue* and wait until all are queued."""
    publisher = Connection(port)
    burst = message_frames(publisher, "", queue, body) * 1000
    for _ in range(count // 1000):
        publisher.sock.sendall(burst)
    publisher.sock.sendall(message_frames(publisher, "", queue, body) * (count % 1000))
    wait_for_count(publisher, queue, count)
    publisher.close()


def wait_for_count(connection: Connection, queue: str, count: int, timeout: float = 600.0) -> None:
    """Wait until *queue* holds *count* ready messages (RabbitMQ's channel
    hands messages to the queue's process asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        found = connection.call(spec.QueueDeclare(queue=queue, passive=True), spec.QueueDeclareOk).message_count
        if found == count:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{queue} holds {found} messages, not {count}, after {timeout} s")
        time.sleep(0.2)


# -- the scenarios ---------------------------------------------------------------


def queues_scenario(broker: Any, count: int) -> dict[str, float]:
    """Declare *count* queues; time, memory per queue, passive declare latency."""
    connection = Connection(broker.port)
    idle = settled_rss_kib(broker.pid)
    started = time.perf_counter()
    pipelined(connection, [spec.QueueDeclare(queue=f"q{i}") for i in range(count)], spec.QueueDeclareOk)
    seconds = time.perf_counter() - started
    full = settled_rss_kib(broker.pid, 10.0)
    chosen = random.Random(9).sample(range(count), min(count, 1000))
    latencies = []
    for i in chosen:
        asked = time.perf_counter()
        connection.call(spec.QueueDeclare(queue=f"q{i}", passive=True), spec.QueueDeclareOk)
        latencies.append(time.perf_counter() - asked)
    connection.close()
    latencies.sort()
    return {
        "declare": count / seconds,
        "memory": (full - idle) * KiB / count,
        "passive": statistics.median(latencies) * 1e6,
        "passive99": latencies[int(len(latencies) * 0.99)] * 1e6,
    }


def binding_key(index: int) -> str:
    """The *index*-th binding pattern: ``sNNN.*.kI`` or ``#.kI``."""
    return f"s{index % 1000}.*.k{index}" if index % 2 == 0 else f"#.k{index}"


def routed_key(index: int) -> str:
    """A routing key that matches binding *index* and no other."""
    return f"s{index % 1000}.x.k{index}" if index % 2 == 0 else f"a.b.k{index}"


def bindings_scenario(broker: Any, count: int, messages: int) -> dict[str, float]:
    """Bind a topic exchange *count* times, then route *messages* through it."""
    publisher, consumer = Connection(broker.port), Connection(broker.port)
    publisher.call(spec.ExchangeDeclare(exchange="topics", type="topic"), spec.ExchangeDeclareOk)
    publisher.call(spec.QueueDeclare(queue="sink"), spec.QueueDeclareOk)
    started = time.perf_counter()
    pipelined(
        publisher,
        [spec.QueueBind(queue="sink", exchange="topics", routing_key=binding_key(i)) for i in range(count)],
        spec.QueueBindOk,
    )
    bind_seconds = time.perf_counter() - started
    consume(consumer, ["sink"])
    body = b"x" * 16
    keys = random.Random(7).choices(range(count), k=1000)
    frames = [message_frames(publisher, "topics", routed_key(key), body) for key in keys]
    batch = 100
    batches = [b"".join(frames[i : i + batch]) for i in range(0, len(frames), batch)]
    seconds = pump(
        publisher, consumer, lambda i: batches[i % len(batches)], messages // batch, fan_out=batch, window=50
    )
    publisher.close()
    consumer.close()
    return {"bind": count / bind_seconds, "route": messages / seconds}


def fanout_scenario(broker: Any, queues: int, messages: int) -> dict[str, float]:
    """One publisher, a fanout exchange to *queues* queues with a consumer each."""
    publisher, consumer = Connection(broker.port), Connection(broker.port)
    publisher.call(spec.ExchangeDeclare(exchange="fan", type="fanout"), spec.ExchangeDeclareOk)
    names = [f"fan{i}" for i in range(queues)]
    for name in names:
        publisher.call(spec.QueueDeclare(queue=name), spec.QueueDeclareOk)
        publisher.call(spec.QueueBind(queue=name, exchange="fan"), spec.QueueBindOk)
    consume(consumer, names)
    batch = message_frames(publisher, "fan", "", b"x" * 16) * 10
    seconds = pump(publisher, consumer, lambda i: batch, messages // 10, fan_out=10 * queues, window=50)
    publisher.close()
    consumer.close()
    return {"deliveries": messages * queues / seconds}


def backlog_scenario(broker: Any, count: int) -> dict[str, float]:
    """Queue *count* 16-byte messages; memory per message beyond the body."""
    connection = Connection(broker.port)
    connection.call(spec.QueueDeclare(queue=BACKLOG), spec.QueueDeclareOk)
    idle = settled_rss_kib(broker.pid)
    started = time.perf_counter()
    fill(broker.port, BACKLOG, count, b"x" * 16)
    seconds = time.perf_counter() - started
    full = settled_rss_kib(broker.pid, 10.0)
    connection.close()
    return {"bytes": (full - idle) * KiB / count - 16, "rss": full / KiB, "publish": count / seconds}


def large_scenario(broker: Any, size: int, total: int) -> dict[str, float]:
    """Move *total* bytes in messages of *size* from one publisher to one no-ack consumer."""
    publisher, consumer = Connection(broker.port), Connection(broker.port)
    consumer.call(spec.QueueDeclare(queue="large"), spec.QueueDeclareOk)
    consume(consumer, ["large"])
    frames = message_frames(publisher, "", "large", os.urandom(size))
    count = max(4, total // size)
    cpu = cpu_seconds(broker.pid)
    seconds = pump(publisher, consumer, lambda i: frames, count, window=max(2, 16 * MiB // size))
    cpu = cpu_seconds(broker.pid) - cpu
    publisher.close()
    consumer.close()
    return {
        "rate": count * size / seconds / 1e6, "cpu": cpu * 1e9 / (count * size), "peak": peak_rss_kib(broker.pid) / KiB,
    }


def drained_scenario(broker: Any, count: int, body_size: int) -> dict[str, float]:
    """Queue *count* messages of *body_size*, drain them; memory idle, full and after."""
    connection = Connection(broker.port)
    connection.call(spec.QueueDeclare(queue=BACKLOG), spec.QueueDeclareOk)
    idle = settled_rss_kib(broker.pid)
    fill(broker.port, BACKLOG, count, b"x" * body_size)
    full = rss_kib(broker.pid)
    drain(broker.port, count)
    time.sleep(5.0)
    after = rss_kib(broker.pid)
    connection.close()
    return {"idle": idle / KiB, "full": full / KiB, "after": after / KiB, "ratio": after / idle}


# -- the matrix -----------------------------------------------------------------


@dataclass
class Options:
    """The sizes of the scenarios."""

    queues: int = 100_000
    bindings: int = 100_000
    routed: int = 200_000
    fanout_messages: int = 20_000
    backlog: int = 2_000_000
    large_bytes: int = 512 * MiB
    drained: int = 500_000


Scenario = Callable[[Any, Options], list[tuple[str, str, bool, float]]]


def _queues(broker: Any, options: Options) -> list[tuple[str, str, bool, float]]:
    found = queues_scenario(broker, options.queues)
    label = f"queues: {options.queues:,} declared"
    return [
        (f"{label}, declares/s", "1/s", True, found["declare"]),
        (f"{label}, bytes per idle queue", "B", False, found["memory"]),
        (f"{label}, passive declare median", "us", False, found["passive"]),
        (f"{label}, passive declare p99", "us", False, found["passive99"]),
    ]


def _bindings(broker: Any, options: Options) -> list[tuple[str, str, bool, float]]:
    found = bindings_scenario(broker, options.bindings, options.routed)
    label = f"topic: {options.bindings:,} bindings"
    return [
        (f"{label}, binds/s", "1/s", True, found["bind"]),
        (f"{label}, 16 B routed msg/s", "msg/s", True, found["route"]),
    ]


def _fanout(broker: Any, options: Options) -> list[tuple[str, str, bool, float]]:
    found = fanout_scenario(broker, 100, options.fanout_messages)
    return [("fanout: 1 publisher, 100 queues+consumers, deliveries/s", "1/s", True, found["deliveries"])]


def _backlog(broker: Any, options: Options) -> list[tuple[str, str, bool, float]]:
    found = backlog_scenario(broker, options.backlog)
    label = f"backlog: {options.backlog:,} x 16 B queued"
    return [
        (f"{label}, bytes per message beyond body", "B", False, found["bytes"]),
        (f"{label}, RSS MiB", "MiB", False, found["rss"]),
        (f"{label}, publish msg/s", "msg/s", True, found["publish"]),
    ]


def _large(size: int) -> Scenario:
    def scenario(broker: Any, options: Options) -> list[tuple[str, str, bool, float]]:
        found = large_scenario(broker, size, options.large_bytes)
        label = f"large: {size // MiB} MiB bodies 1p1c"
        return [
            (f"{label}, MB/s", "MB/s", True, found["rate"]),
            (f"{label}, broker CPU s per GB", "s", False, found["cpu"]),
            (f"{label}, peak RSS MiB", "MiB", False, found["peak"]),
        ]

    return scenario


def _drained(size: int) -> Scenario:
    def scenario(broker: Any, options: Options) -> list[tuple[str, str, bool, float]]:
        found = drained_scenario(broker, options.drained, size)
        label = f"drained: {options.drained:,} x {size} B"
        return [
            (f"{label}, RSS MiB idle", "MiB", False, found["idle"]),
            (f"{label}, RSS MiB full", "MiB", False, found["full"]),
            (f"{label}, RSS MiB 5 s after drain", "MiB", False, found["after"]),
            (f"{label}, after / idle", "x", False, found["ratio"]),
        ]

    return scenario


#: Each runs on fresh brokers.
SCENARIOS: dict[str, Scenario] = {
    "queues": _queues,
    "bindings": _bindings,
    "fanout": _fanout,
    "backlog": _backlog,
    "large-1MiB": _large(MiB),
    "large-16MiB": _large(16 * MiB),
    "drained-16B": _drained(16),
    "drained-1KiB": _drained(1024),
}


def brokers(only: Optional[str]) -> list[str]:
    """The brokers to run: both, or the one named (RabbitMQ only when installed)."""
    names = [] if only == "rabbitmq" else ["txamqp09"]
    if only != "txamqp09":
        missing = rabbitmq_missing()
        if missing:
            print(f"RabbitMQ skipped: {missing}", file=sys.stderr)
        else:
            names.append("rabbitmq")
    return names


def run(names: list[str], scenarios: list[str], options: Options, command: str) -> list[Figure]:
    """Every scenario on every broker (each on fresh brokers, one at a time)."""
    figures: dict[str, Figure] = {}
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as base_dir:
        for scenario in scenarios:
            for name in names:
                with fresh_broker(name, base_dir) as broker:
                    for label, unit, higher, value in SCENARIOS[scenario](broker, options):
                        figure = figures.setdefault(label, Figure(label, unit, higher, f"{command} --scenario {scenario}"))
                        figure.values[name] = value
                        print(f"{label}: {name} {value:,.2f} {unit} (load {load()})", file=sys.stderr, flush=True)
    return list(figures.values())


def load() -> str:
    """The load average (1, 5 and 15 minutes)."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def report(figures: list[Figure]) -> str:
    """One line per figure: both values and the ratio."""
    lines = [f"{'scenario':<70} {'txamqp09':>12} {'rabbitmq':>12} {'ratio':>6}"]
    for figure in figures:
        ours, theirs = figure.values.get("txamqp09"), figure.values.get("rabbitmq")
        ratio = figure.ratio
        lines.append(
            f"{figure.scenario:<70} {'' if ours is None else f'{ours:,.1f}':>12} "
            f"{'' if theirs is None else f'{theirs:,.1f}':>12} {'' if ratio is None else f'{ratio:.2f}x':>6}"
        )
    lines.append(f"ratio > 1: txamqp09 does better; load average {load()}")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults = Options()
    parser.add_argument("--scenario", choices=tuple(SCENARIOS), action="append", help="run this one (repeatable)")
    parser.add_argument("--only", choices=("txamqp09", "rabbitmq"), help="benchmark one broker")
    parser.add_argument("--queues", type=int, default=defaults.queues, help="queues declared")
    parser.add_argument("--bindings", type=int, default=defaults.bindings, help="topic bindings")
    parser.add_argument("--routed", type=int, default=defaults.routed, help="messages routed through them")
    parser.add_argument("--fanout-messages", type=int, default=defaults.fanout_messages, help="messages fanned out")
    parser.add_argument("--backlog", type=int, default=defaults.backlog, help="16-byte messages queued")
    parser.add_argument("--large-bytes", type=int, default=defaults.large_bytes, help="bytes moved per body size")
    parser.add_argument("--drained", type=int, default=defaults.drained, help="messages queued, then drained")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    arguments = parser.parse_args(argv)
    options = Options(
        arguments.queues, arguments.bindings, arguments.routed, arguments.fanout_messages, arguments.backlog,
        arguments.large_bytes, arguments.drained,
    )
    command = "python bench/scale.py" + "".join(
        f" --{name.replace('_', '-')} {value}" for name, value in asdict(options).items()
        if value != getattr(defaults, name)
    )
    figures = run(brokers(arguments.only), arguments.scenario or list(SCENARIOS), options, command)
    if arguments.json:
        print(json.dumps([{**asdict(figure), "ratio": figure.ratio} for figure in figures]))
    else:
        print(report(figures))


if __name__ == "__main__":
    main()
