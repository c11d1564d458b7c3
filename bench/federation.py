"""Several brokers: what N brokers move together, and through a federated exchange.

For each number of brokers N (``--brokers``, default 1 2 3), two scenarios
of 16-byte transient messages, every consumer in no-ack mode:

``sharded``
    N brokers that share nothing, each with its own producer and consumer
    on a queue of its own: the aggregate rate of scaling out by vhost or by
    queue (docs/scaling.rst) on this machine.

``fan-in``
    N upstream brokers take the publishes (a producer each, 1/N of the
    messages each) on exchange ``events``; one downstream broker federates
    ``events`` from all of them (upstream set ``all``, ack mode
    ``--ack-mode``) and one consumer there takes every message: the rate
    delivered downstream, with the downstream's CPU per message.

``shovel``
    A queue on broker A holds N transient messages of 16 bytes, then of
    1 KiB (``--shovel-messages``); a dynamic shovel defined on A
    (``src-uri`` ``amqp://``, A itself; ``dest-uri`` broker B; ``ack-mode``
    ``on-confirm``; the default prefetch of 1000) moves them into a queue of
    B. The clock runs from the ``PUT /api/parameters/shovel/...`` until B's
    queue holds all N. The same definition JSON goes to two txamqp09
    brokers and, in the same run, to two private RabbitMQ 3.10 nodes (with
    ``rabbitmq_shovel`` on A), alternately; each size's fastest run counts.

The CPU column is the brokers' CPU time per message: all N brokers' for
``sharded``, the downstream's alone for ``fan-in``, A's (which runs the
shovel) for ``shovel``.

Run::

    python bench/federation.py
    python bench/federation.py --brokers 1 2 --messages 100000 --ack-mode on-publish
    python bench/federation.py --only shovel --shovel-messages 100000 --repeat 3

Each broker is ``twistd amqp09 --transient`` on a free loopback port (the
fan-in ones with the management API, through which the links are set up).
Each producer and consumer is a process of its own (the raw-socket client
of ``bench/broker.py``), so the load generator does not share one core.
The report gives the load average of the machine with the rates: on a
machine shared with other work they vary from run to run.
"""

from __future__ import annotations

import argparse
import base64
import json
import multiprocessing
import os
import selectors
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import quote

import pika

from broker import SCENARIOS, Connection, Txamqp09Broker, _counter, cpu_seconds, run_scenario

from txamqp09.testing.rabbitmq import RabbitMQ, free_port, rabbitmq_missing
from txamqp09.wire import _amqp0_9_1 as spec
from txamqp09.wire.frames import content_frames

_BODY = b"x" * 16
_BATCH = 100


class ManagedBroker(Txamqp09Broker):
    """A transient broker with its management API (to set up federation)."""

    def __init__(self) -> None:
        self.http_port = free_port()
        super().__init__(None, ("--transient", "--management", f"tcp:{self.http_port}:interface=127.0.0.1"))

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """One management API request as guest; the decoded answer."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://127.0.0.1:{self.http_port}{path}", data=data, method=method)
        request.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
        request.add_header("Content-Type", "application/json")
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:
                    raw = answer.read()
                return json.loads(raw) if raw else None
            except ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


def _sharded_worker(port: int, messages: int, window: int, start: Any, seconds: Any, index: int) -> None:
    start.wait()
    seconds[index] = run_scenario(port, SCENARIOS["autoack"], messages, window)


def sharded(count: int, messages: int, window: int) -> tuple[float, float]:
    """N brokers, a producer-consumer pair each: (aggregate msg/s, broker CPU µs/msg)."""
    brokers = [Txamqp09Broker(None, ("--transient",)) for _ in range(count)]
    try:
        start = multiprocessing.Barrier(count)
        seconds = multiprocessing.Array("d", count)
        cpu_before = sum(cpu_seconds(broker.pid) for broker in brokers)
        workers = [multiprocessing.Process(target=_sharded_worker,
                                           args=(broker.port, messages, window, start, seconds, index))
                   for index, broker in enumerate(brokers)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        cpu = sum(cpu_seconds(broker.pid) for broker in brokers) - cpu_before
        return count * messages / max(seconds), cpu / (count * messages) * 1e6
    finally:
        for broker in brokers:
            broker.stop()


def _publisher(port: int, messages: int, window: int, start: Any, published: Any, received: Any, index: int) -> None:
    """Publish *messages* to ``events``, keeping at most *window* in flight overall."""
    connection = Connection(port)
    burst = content_frames(1, spec.BasicPublish(exchange="events", routing_key=""), spec.BasicProperties(),
                           _BODY, connection.frame_max) * _BATCH
    start.wait()
    sent = 0
    while sent < messages:
        if sum(published[:]) - received.value + _BATCH > window:
            time.sleep(0.0005)
            continue
        connection.sock.sendall(burst)
        sent += _BATCH
        published[index] = sent
    connection.close()


def fan_in(count: int, messages: int, window: int, ack_mode: str) -> tuple[float, float]:
    """N upstream brokers federated into one: (msg/s downstream, downstream CPU µs/msg)."""
    upstreams = [ManagedBroker() for _ in range(count)]
    downstream = ManagedBroker()
    brokers = [*upstreams, downstream]
    try:
        for number, broker in enumerate(upstreams):
            broker.api("PUT", "/api/global-parameters/cluster_name", {"value": f"upstream-{number}"})
        downstream.api("PUT", "/api/global-parameters/cluster_name", {"value": "downstream"})
        consumer = Connection(downstream.port)
        consumer.call(spec.ExchangeDeclare(exchange="events", type="fanout"), spec.ExchangeDeclareOk)
        consumer.call(spec.QueueDeclare(queue="sink"), spec.QueueDeclareOk)
        consumer.call(spec.QueueBind(queue="sink", exchange="events"), spec.QueueBindOk)
        for number, broker in enumerate(upstreams):
            downstream.api("PUT", f"/api/parameters/federation-upstream/%2F/upstream-{number}", {"value": {
                "uri": f"amqp://guest:guest@127.0.0.1:{broker.port}", "ack-mode": ack_mode}})
        downstream.api("PUT", "/api/policies/%2F/events", {
            "pattern": "^events$", "apply-to": "exchanges", "definition": {"federation-upstream-set": "all"}})
        _wait(lambda: len([link for link in downstream.api("GET", "/api/federation-links")
                           if link["status"] == "running"]) == count, "every link runs")
        for broker in upstreams:
            _wait(lambda: len(broker.api("GET", f"/api/exchanges/%2F/{quote('events')}/bindings/source")) == 1,
                  "the downstream's binding reaches its upstream")
        consumer.call(spec.BasicConsume(queue="sink", consumer_tag="bench", no_ack=True), spec.BasicConsumeOk)
        consumer.sock.setblocking(False)
        count_deliveries = _counter(True, consumer.sock)
        start = multiprocessing.Barrier(count + 1)
        published = multiprocessing.Array("q", count)
        received = multiprocessing.Value("q", 0, lock=False)
        share = messages // count // _BATCH * _BATCH
        total = share * count
        workers = [multiprocessing.Process(target=_publisher,
                                           args=(broker.port, share, window, start, published, received, index))
                   for index, broker in enumerate(upstreams)]
        for worker in workers:
            worker.start()
        selector = selectors.DefaultSelector()
        selector.register(consumer.sock, selectors.EVENT_READ)
        cpu_before = cpu_seconds(downstream.pid)
        start.wait()
        began = time.perf_counter()
        got = 0
        while got < total:
            if selector.select(5):
                got += count_deliveries()
                received.value = got
            elif not any(worker.is_alive() for worker in workers) and got < total:
                raise RuntimeError(f"only {got} of {total} messages arrived downstream")
        elapsed = time.perf_counter() - began
        cpu = cpu_seconds(downstream.pid) - cpu_before
        for worker in workers:
            worker.join()
        consumer.close()
        return total / elapsed, cpu / total * 1e6
    finally:
        for broker in brokers:
            broker.stop()


#: The shovel scenario's message sizes.
SHOVEL_SIZES = {"16B": 16, "1KiB": 1024}


@dataclass
class ShovelPair:
    """Two brokers of one kind: A runs the shovel and holds the source queue."""

    name: str
    a_port: int
    b_port: int
    api: str
    a_pid: int


def _api_call(base: str, method: str, path: str, body: Any = None) -> None:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data, method=method)
    request.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    request.add_header("Content-Type", "application/json")
    urllib.request.urlopen(request, timeout=30).read()


def _pika_channel(port: int) -> Any:
    return pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port, heartbeat=0)).channel()


def _fill(port: int, queue: str, messages: int, size: int) -> None:
    """*messages* transient messages of *size* bytes in *queue* (declared durable, emptied first)."""
    channel = _pika_channel(port)
    channel.queue_declare(queue, durable=True)
    channel.queue_purge(queue)
    body = b"x" * size
    for _ in range(messages):
        channel.basic_publish("", queue, body)
    _wait(lambda: channel.queue_declare(queue, passive=True).method.message_count >= messages, "the queue filled")
    channel.connection.close()


def shovel_run(pair: ShovelPair, size: int, messages: int) -> tuple[float, float]:
    """Move *messages* of *size* bytes through an on-confirm shovel on *pair*:
    (msg/s, A's CPU µs/msg)."""
    source, target = f"bench.shovel.{size}.src", f"bench.shovel.{size}.dest"
    watcher = _pika_channel(pair.b_port)
    watcher.queue_declare(target, durable=True)
    watcher.queue_purge(target)
    _fill(pair.a_port, source, messages, size)
    definition = {"src-uri": "amqp://", "src-queue": source, "ack-mode": "on-confirm",
                  "dest-uri": f"amqp://guest:guest@127.0.0.1:{pair.b_port}", "dest-queue": target}
    cpu_before = cpu_seconds(pair.a_pid)
    began = time.perf_counter()
    _api_call(pair.api, "PUT", "/api/parameters/shovel/%2F/bench", {"value": definition})
    while watcher.queue_declare(target, passive=True).method.message_count < messages:
        time.sleep(0.01)
    elapsed = time.perf_counter() - began
    cpu = cpu_seconds(pair.a_pid) - cpu_before
    _api_call(pair.api, "DELETE", "/api/parameters/shovel/%2F/bench")
    watcher.queue_delete(target)
    watcher.connection.close()
    return messages / elapsed, cpu / messages * 1e6


@contextmanager
def txamqp09_shovel_pair() -> Iterator[ShovelPair]:
    """Two txamqp09 brokers; A with its management API."""
    a, b = ManagedBroker(), Txamqp09Broker(None, ("--transient",))
    try:
        yield ShovelPair("txamqp09", a.port, b.port, f"http://127.0.0.1:{a.http_port}", a.pid)
    finally:
        a.stop()
        b.stop()


@contextmanager
def rabbitmq_shovel_pair(base_dir: str) -> Iterator[ShovelPair]:
    """Two private RabbitMQ nodes; A with the management and shovel plugins."""
    a = RabbitMQ(os.path.join(base_dir, "a"), management=True, more_plugins=("rabbitmq_shovel",))
    b = RabbitMQ(os.path.join(base_dir, "b"))
    with ExitStack() as stack:
        for node in (a, b):
            node.start()
            stack.callback(node.stop)
        pid = int(a.evaluate("list_to_integer(os:getpid()).").strip())
        yield ShovelPair("rabbitmq", a.port, b.port, f"http://127.0.0.1:{a.management_port}", pid)


def shovels(messages: int, repeat: int) -> None:
    """The shovel scenario on both kinds of broker, alternately; print the fastest runs."""
    best: dict[tuple[str, str], tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-shovel-") as base_dir, ExitStack() as stack:
        pairs = [stack.enter_context(txamqp09_shovel_pair())]
        missing = rabbitmq_missing()
        if missing:
            print(f"RabbitMQ skipped: {missing}", file=sys.stderr)
        else:
            pairs.append(stack.enter_context(rabbitmq_shovel_pair(base_dir)))
        for _ in range(repeat):
            for label, size in SHOVEL_SIZES.items():
                for pair in pairs:
                    rate, cpu = shovel_run(pair, size, messages)
                    if rate > best.get((label, pair.name), (0.0, 0.0))[0]:
                        best[label, pair.name] = (rate, cpu)
    print(f"{'shovel':<8} {'broker':>9} {'msg/s':>9} {'CPU us/msg':>10} {'load avg':>9}")
    for (label, name), (rate, cpu) in sorted(best.items()):
        print(f"{label:<8} {name:>9} {rate:>9,.0f} {cpu:>10.2f} {os.getloadavg()[0]:>9.2f}")
    for label in SHOVEL_SIZES:
        if (label, "txamqp09") in best and (label, "rabbitmq") in best:
            ratio = best[label, "txamqp09"][0] / best[label, "rabbitmq"][0]
            print(f"shovel {label}: txamqp09 / rabbitmq = {ratio:.2f}x")


def _wait(condition: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout} s")
        time.sleep(0.1)


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, nargs="+", default=[1, 2, 3], help="numbers of brokers to run")
    parser.add_argument("--messages", type=int, default=200_000, help="messages per broker (sharded) or in all (fan-in)")
    parser.add_argument("--window", type=int, default=5000, help="messages in flight at most")
    parser.add_argument("--ack-mode", default="on-confirm", choices=("on-confirm", "on-publish", "no-ack"),
                        help="the federation links' ack mode")
    parser.add_argument("--only", choices=("sharded", "fan-in", "shovel"), help="run one scenario")
    parser.add_argument("--shovel-messages", type=int, default=100_000, help="messages per shovel run")
    parser.add_argument("--repeat", type=int, default=1, help="shovel runs per size; the fastest counts")
    options = parser.parse_args(argv)
    if options.only in (None, "shovel"):
        shovels(options.shovel_messages, options.repeat)
    if options.only == "shovel":
        return
    print(f"{'scenario':<8} {'brokers':>7} {'msg/s':>9} {'CPU us/msg':>10} {'load avg':>9}")
    for count in options.brokers:
        runs = []
        if options.only in (None, "sharded"):
            runs.append(("sharded", lambda: sharded(count, options.messages, options.window)))
        if options.only in (None, "fan-in"):
            runs.append(("fan-in", lambda: fan_in(count, options.messages, options.window, options.ack_mode)))
        for name, run in runs:
            rate, cpu = run()
            print(f"{name:<8} {count:>7} {rate:>9,.0f} {cpu:>10.2f} {os.getloadavg()[0]:>9.2f}", flush=True)


if __name__ == "__main__":
    main()
