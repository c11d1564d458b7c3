"""Client throughput against RabbitMQ: this client next to pika, aio-pika and txAMQP.

Each client, in a fresh process of its own, publishes N 16-byte transient
messages to a new queue through the default exchange, then consumes them
(prefetch 1000, one basic.ack per message). The report gives messages per
second each way:

``publish``  from the first publish until RabbitMQ holds all N messages (a
             passive queue.declare on the same channel reports the count).
``consume``  from basic.consume until the N-th message was handed to the
             application and acknowledged.

The clients: ``txamqp09`` (this one), ``pika-blocking`` (pika's
BlockingConnection), ``pika-twisted`` (pika's Twisted adapter), ``aio-pika``
and ``txamqp``. A private RabbitMQ node is started on loopback unless
``--port`` names a running one. The broker shares the machine, so every
client runs ``--rounds`` times, in a rotated order each round, and the best
rate of each direction is reported.

Run::

    python bench/client.py                      # 100,000 messages, every client, 3 rounds
    python bench/client.py --messages 20000 --rounds 1 --only txamqp09 pika-blocking
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any, Awaitable, Callable

BODY = b"0123456789abcdef"
PREFETCH = 1000
HOST = "127.0.0.1"
SPEC_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "spec", "amqp0-9-1-rabbitmq.xml")

#: (publish seconds, consume seconds) measured by a client run.
Timings = tuple[float, float]


# -- one runner per client -----------------------------------------------------------


async def run_txamqp09(reactor: Any, port: int, messages: int, queue: str) -> Timings:
    from twisted.internet.defer import Deferred

    from txamqp09.client import connect

    connection = await connect(reactor, f"amqp://guest:guest@{HOST}:{port}/")
    channel = await connection.channel()
    await channel.queue_declare(queue)
    started = time.perf_counter()
    publish = channel.basic_publish
    for _ in range(messages):
        publish(BODY, "", queue)
    while (await channel.queue_declare(queue, passive=True)).message_count < messages:
        pass
    published = time.perf_counter()
    done: Deferred[None] = Deferred()
    received = 0

    def handle(message: Any) -> None:
        nonlocal received
        message.ack()
        received += 1
        if received == messages:
            done.callback(None)

    await channel.basic_qos(PREFETCH)
    await channel.basic_consume(queue, handle)
    await done
    consumed = time.perf_counter()
    await channel.queue_delete(queue=queue)
    await connection.disconnect()
    return published - started, consumed - published


async def run_pika_twisted(reactor: Any, port: int, messages: int, queue: str) -> Timings:
    import pika
    from pika.adapters.twisted_connection import TwistedProtocolConnection
    from twisted.internet.protocol import ClientCreator

    parameters = pika.ConnectionParameters(HOST, port)
    protocol = await ClientCreator(reactor, TwistedProtocolConnection, parameters).connectTCP(HOST, port)
    await protocol.ready
    channel = await protocol.channel()
    await channel.queue_declare(queue)
    started = time.perf_counter()
    for _ in range(messages):
        channel.basic_publish("", queue, BODY)
    while (await channel.queue_declare(queue, passive=True)).method.message_count < messages:
        pass
    published = time.perf_counter()
    await channel.basic_qos(prefetch_count=PREFETCH)
    deliveries, _ = await channel.basic_consume(queue=queue)
    for _ in range(messages):
        _channel, method, _properties, _body = await deliveries.get()
        channel.basic_ack(method.delivery_tag)
    consumed = time.perf_counter()
    await channel.queue_delete(queue)
    protocol.close()
    return published - started, consumed - published


async def run_txamqp(reactor: Any, port: int, messages: int, queue: str) -> Timings:
    import txamqp.spec
    from twisted.internet.protocol import ClientCreator
    from txamqp.client import TwistedDelegate
    from txamqp.content import Content
    from txamqp.protocol import AMQClient

    spec = txamqp.spec.load(SPEC_FILE)
    client = await ClientCreator(reactor, AMQClient, TwistedDelegate(), "/", spec).connectTCP(HOST, port)
    await client.authenticate("guest", "guest")
    channel = await client.channel(1)
    await channel.channel_open()
    await channel.queue_declare(queue=queue)
    started = time.perf_counter()
    for _ in range(messages):
        channel.basic_publish(exchange="", routing_key=queue, content=Content(BODY))
    while (await channel.queue_declare(queue=queue, passive=True)).message_count < messages:
        pass
    published = time.perf_counter()
    await channel.basic_qos(prefetch_count=PREFETCH)
    reply = await channel.basic_consume(queue=queue)
    deliveries = await client.queue(reply.consumer_tag)
    for _ in range(messages):
        message = await deliveries.get()
        channel.basic_ack(delivery_tag=message.delivery_tag)
    consumed = time.perf_counter()
    await channel.queue_delete(queue=queue)
    await channel.channel_close()
    client.transport.loseConnection()
    return published - started, consumed - published


def run_pika_blocking(port: int, messages: int, queue: str) -> Timings:
    import pika

    connection = pika.BlockingConnection(pika.ConnectionParameters(HOST, port))
    channel = connection.channel()
    channel.queue_declare(queue)
    started = time.perf_counter()
    for _ in range(messages):
        channel.basic_publish("", queue, BODY)
    while channel.queue_declare(queue, passive=True).method.message_count < messages:
        pass
    published = time.perf_counter()
    channel.basic_qos(prefetch_count=PREFETCH)
    received = 0

    def handle(channel: Any, method: Any, properties: Any, body: bytes) -> None:
        nonlocal received
        channel.basic_ack(method.delivery_tag)
        received += 1
        if received == messages:
            channel.stop_consuming()

    channel.basic_consume(queue, handle)
    channel.start_consuming()
    consumed = time.perf_counter()
    channel.queue_delete(queue)
    connection.close()
    return published - started, consumed - published


async def run_aio_pika(port: int, messages: int, queue: str) -> Timings:
    import aio_pika

    connection = await aio_pika.connect(f"amqp://guest:guest@{HOST}:{port}/")
    channel = await connection.channel(publisher_confirms=False)
    declared = await channel.declare_queue(queue)
    exchange = channel.default_exchange
    started = time.perf_counter()
    for _ in range(messages):
        await exchange.publish(aio_pika.Message(BODY), routing_key=queue)
    while ((await channel.declare_queue(queue, passive=True)).declaration_result.message_count or 0) < messages:
        pass
    published = time.perf_counter()
    await channel.set_qos(prefetch_count=PREFETCH)
    received = 0
    async with declared.iterator() as iterator:
        async for message in iterator:
            await message.ack()
            received += 1
            if received == messages:
                break
    consumed = time.perf_counter()
    await declared.delete()
    await connection.close()
    return published - started, consumed - published


def _twisted(runner: Callable[..., Awaitable[Timings]]) -> Callable[[int, int, str], Timings]:
    def run(port: int, messages: int, queue: str) -> Timings:
        from twisted.internet import defer, reactor

        result: list[Any] = []

        async def main() -> None:
            result.append(await runner(reactor, port, messages, queue))

        def start() -> None:
            finished = defer.ensureDeferred(main())
            finished.addErrback(result.append)
            finished.addBoth(lambda _: reactor.stop())

        reactor.callWhenRunning(start)
        reactor.run()
        if not isinstance(result[0], tuple):
            result[0].raiseException()
        return result[0]  # type: ignore[no-any-return]

    return run


def _asyncio(runner: Callable[..., Awaitable[Timings]]) -> Callable[[int, int, str], Timings]:
    return lambda port, messages, queue: asyncio.run(runner(port, messages, queue))  # type: ignore[arg-type]


CLIENTS: dict[str, Callable[[int, int, str], Timings]] = {
    "txamqp09": _twisted(run_txamqp09),
    "pika-blocking": run_pika_blocking,
    "pika-twisted": _twisted(run_pika_twisted),
    "aio-pika": _asyncio(run_aio_pika),
    "txamqp": _twisted(run_txamqp),
}


# -- the driver ----------------------------------------------------------------------


def measure(client: str, port: int, messages: int) -> dict[str, Any]:
    """Run *client* in a fresh process; its rates, or why it failed."""
    command = [sys.executable, os.path.abspath(__file__), "--worker", client, "--port", str(port), "--messages", str(messages)]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if finished.returncode:
        return {"client": client, "error": (finished.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(finished.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def worker(client: str, port: int, messages: int) -> None:
    publish, consume = CLIENTS[client](port, messages, f"bench-{client}-{uuid.uuid4()}")
    print(json.dumps({"client": client, "publish": messages / publish, "consume": messages / consume}))


def measure_rounds(clients: list[str], port: int, messages: int, rounds: int) -> list[dict[str, Any]]:
    """Every client *rounds* times, rotating the order; the best rate each way."""
    best: dict[str, dict[str, Any]] = {}
    for number in range(rounds):
        shift = number % len(clients)
        for client in clients[shift:] + clients[:shift]:
            result = measure(client, port, messages)
            kept = best.get(client)
            if kept is None or "error" in kept:
                best[client] = result
            elif "error" not in result:
                for direction in ("publish", "consume"):
                    kept[direction] = max(kept[direction], result[direction])
    return [best[client] for client in clients]


def table(results: list[dict[str, Any]], messages: int, rounds: int) -> str:
    lines = [
        f"{messages:,} messages of {len(BODY)} bytes, RabbitMQ on loopback, prefetch {PREFETCH}, "
        f"ack per message; best of {rounds} rounds",
        "",
        f"{'client':<15} {'publish msg/s':>14} {'consume msg/s':>14}",
        f"{'-' * 15} {'-' * 14} {'-' * 14}",
    ]
    for result in sorted(results, key=lambda r: -r.get("publish", 0)):
        if "error" in result:
            lines.append(f"{result['client']:<15} failed: {result['error']}")
        else:
            lines.append(f"{result['client']:<15} {result['publish']:>14,.0f} {result['consume']:>14,.0f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3, help="runs per client; the best counts")
    parser.add_argument("--only", nargs="+", choices=sorted(CLIENTS), help="run only these clients")
    parser.add_argument("--port", type=int, help="a running RabbitMQ on 127.0.0.1 (guest/guest)")
    parser.add_argument("--worker", choices=sorted(CLIENTS), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.worker:
        worker(arguments.worker, arguments.port, arguments.messages)
        return
    clients = arguments.only or list(CLIENTS)
    if arguments.port:
        results = measure_rounds(clients, arguments.port, arguments.messages, arguments.rounds)
    else:
        from txamqp09.testing.rabbitmq import RabbitMQ, rabbitmq_missing

        missing = rabbitmq_missing()
        if missing:
            sys.exit(missing)
        with tempfile.TemporaryDirectory(prefix="txamqp09-bench-") as directory:
            node = RabbitMQ(directory)
            node.start()
            try:
                results = measure_rounds(clients, node.port, arguments.messages, arguments.rounds)
            finally:
                node.stop()
    print(table(results, arguments.messages, arguments.rounds))


if __name__ == "__main__":
    main()
