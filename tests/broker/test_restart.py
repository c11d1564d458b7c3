"""The broker in a child process, stopped cleanly and started again on the same data."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import Deferred, gatherResults, inlineCallbacks
from twisted.trial.unittest import TestCase

from tests.broker.process import BrokerProcess
from txamqp09.client import Channel, ChannelClosed, ClientConnection, Message, connect
from txamqp09.wire import _amqp0_9_1 as spec


def properties(n: int) -> dict[str, Any]:
    """Persistent message properties that differ from message to message."""
    return {
        "delivery_mode": 2, "content_type": "text/plain", "priority": n % 10,
        "headers": {"n": n, "raw": b"\x00\xff", "list": [1, "two"]},
        "message_id": f"m{n}", "correlation_id": f"c{n}", "timestamp": 1700000000 + n,
    }


class BrokerProcessTestCase(TestCase):
    """Starts brokers in child processes, killed at the end of the test if still running."""

    timeout = 30

    @inlineCallbacks
    def started(self, data_dir: str, *extra: str) -> Any:
        """A running broker on *data_dir*."""
        broker = BrokerProcess(data_dir, *extra)
        self.addCleanup(broker.kill)
        yield broker.start(reactor)
        return broker

    @inlineCallbacks
    def connected(self, broker: BrokerProcess) -> Any:
        """A client connection to *broker*, dropped at the end of the test."""
        connection: ClientConnection = yield connect(reactor, broker.url)
        self.addCleanup(connection.dropConnection)
        return connection

    @inlineCallbacks
    def channel(self, broker: BrokerProcess) -> Any:
        """A channel on a new connection to *broker*."""
        connection = yield self.connected(broker)
        channel: Channel = yield connection.channel()
        return channel

    @inlineCallbacks
    def restarted_contents(self, data_dir: str, *extra: str) -> Any:
        """Start a broker on *data_dir* and take every message of queue ``q``, in order."""
        broker = yield self.started(data_dir, *extra)
        channel = yield self.channel(broker)
        messages: list[Message] = []
        while (message := (yield channel.basic_get("q", no_ack=True))) is not None:
            messages.append(message)
        return messages


class RestartTests(BrokerProcessTestCase):
    @inlineCallbacks
    def test_durable_topology_survives_and_transient_does_not(self) -> Any:
        data_dir = self.mktemp()
        broker = yield self.started(data_dir)
        connection = yield self.connected(broker)
        channel = yield connection.channel()
        yield channel.exchange_declare("events", "topic", durable=True)
        yield channel.exchange_declare("scratch", "fanout")
        yield channel.queue_declare("kept", durable=True, arguments={"x-max-length": 100})
        yield channel.queue_declare("lost")
        yield channel.queue_declare("mine", durable=True, exclusive=True)
        for queue, exchange, key in [
            ("kept", "events", "a.*"), ("lost", "events", "a.*"), ("kept", "scratch", ""),
            ("kept", "amq.direct", "k"), ("mine", "amq.direct", "k"),
        ]:
            yield channel.request("queue.bind", queue=queue, exchange=exchange, routing_key=key)
        yield connection.disconnect()
        yield broker.stop()

        broker = yield self.started(data_dir)
        connection = yield self.connected(broker)
        found = {}
        for method, name in [
            ("exchange.declare", "events"), ("exchange.declare", "scratch"),
            ("queue.declare", "kept"), ("queue.declare", "lost"), ("queue.declare", "mine"),
        ]:
            channel = yield connection.channel()
            try:
                yield channel.request(method, passive=True, **{method.split(".")[0]: name})
                found[name] = 200
            except ChannelClosed as closed:
                found[name] = closed.reply_code
        self.assertEqual(found, {"events": 200, "scratch": 404, "kept": 200, "lost": 404, "mine": 404})
        channel = yield connection.channel()
        with self.assertRaises(ChannelClosed) as refused:
            yield channel.queue_declare("kept", durable=True, arguments={"x-max-length": 5})
        self.assertEqual(refused.exception.reply_code, 406)
        channel = yield connection.channel()
        yield channel.confirm_select()
        yield gatherResults([
            channel.basic_publish(b"1", "events", "a.b", properties={"delivery_mode": 2}),
            channel.basic_publish(b"2", "events", "b.c", properties={"delivery_mode": 2}),
            channel.basic_publish(b"3", "amq.direct", "k", properties={"delivery_mode": 2}),
        ])
        declared = yield channel.queue_declare("kept", passive=True)
        self.assertEqual(declared.message_count, 2)

    @inlineCallbacks
    def test_persistent_messages_survive_in_order_with_properties_and_redelivered(self) -> Any:
        data_dir = self.mktemp()
        broker = yield self.started(data_dir)
        connection = yield self.connected(broker)
        publisher = yield connection.channel()
        yield publisher.queue_declare("q", durable=True)
        yield publisher.confirm_select()
        large = bytes(range(256)) * 4096
        confirms = []
        for n in range(20):
            body = large if n == 7 else b"body %d" % n
            confirms.append(publisher.basic_publish(body, routing_key="q", properties=properties(n)))
            publisher.basic_publish(b"transient", routing_key="q", properties={"delivery_mode": 1})
        yield gatherResults(confirms)
        consumer = yield connection.channel()
        got: list[Message] = []
        while len(got) < 10:
            message = yield consumer.basic_get("q")
            if message.body != b"transient":
                got.append(message)
            else:
                message.ack()
        for message in got[:3]:
            message.ack()
        yield consumer.queue_declare("q", passive=True)  # the acks are handled before this answer
        yield broker.stop()

        recovered = yield self.restarted_contents(data_dir)
        self.assertEqual(
            [m.body for m in recovered],
            [large if n == 7 else b"body %d" % n for n in range(3, 20)],
        )
        self.assertTrue(all(m.redelivered for m in recovered))
        for n, message in zip(range(3, 20), recovered):
            self.assertEqual(message.properties.encode(), spec.BasicProperties(**properties(n)).encode())

    @inlineCallbacks
    def test_clean_shutdown_writes_everything_the_broker_took(self) -> Any:
        data_dir = self.mktemp()
        broker = yield self.started(data_dir)
        channel = yield self.channel(broker)
        yield channel.queue_declare("q", durable=True)
        for n in range(2000):
            channel.basic_publish(b"%d" % n, routing_key="q", properties={"delivery_mode": 2})
        yield channel.queue_declare("q", passive=True)  # every publish is handled before this answer
        yield broker.stop()

        recovered = yield self.restarted_contents(data_dir)
        self.assertEqual([int(m.body) for m in recovered], list(range(2000)))

    @inlineCallbacks
    def test_bodies_beyond_the_memory_budget_are_paged_out_and_read_back(self) -> Any:
        data_dir = self.mktemp()
        budget = ("--memory-budget", str(64 * 1024))
        broker = yield self.started(data_dir, *budget)
        channel = yield self.channel(broker)
        yield channel.queue_declare("q", durable=True)
        yield channel.confirm_select()
        bodies = [b"%05d" % n + b"x" * 1019 for n in range(2000)]
        yield gatherResults(
            [channel.basic_publish(b, routing_key="q", properties={"delivery_mode": 2}) for b in bodies]
        )
        consumed: list[bytes] = []
        enough: Deferred[None] = Deferred()

        def take(message: Message) -> None:
            if len(consumed) < 1000:
                consumed.append(message.body)
                message.ack()
                if len(consumed) == 1000:
                    enough.callback(None)

        yield channel.basic_qos(50)
        yield channel.basic_consume("q", take)
        yield enough
        yield channel.queue_declare("q", passive=True)  # the acks are handled before this answer
        yield broker.stop()
        self.assertEqual(consumed, bodies[:1000])

        recovered = yield self.restarted_contents(data_dir, *budget)
        self.assertEqual([m.body for m in recovered], bodies[1000:])

    @inlineCallbacks
    def test_bodies_also_on_a_queue_that_is_not_durable_are_spilled_until_consumed(self) -> Any:
        data_dir = self.mktemp()
        budget = ("--memory-budget", str(64 * 1024))
        broker = yield self.started(data_dir, *budget)
        channel = yield self.channel(broker)
        yield channel.queue_declare("q", durable=True)
        yield channel.queue_declare("memory")
        for queue in ("q", "memory"):
            yield channel.queue_bind(queue=queue, exchange="amq.fanout")
        yield channel.confirm_select()
        bodies = [b"%05d" % n + b"y" * 1019 for n in range(1000)]
        yield gatherResults(
            [channel.basic_publish(b, exchange="amq.fanout", properties={"delivery_mode": 2}) for b in bodies]
        )
        self.assertGreater(spilled_rows(data_dir), 900)
        yield channel.queue_purge(queue="q")
        consumed = []
        while (message := (yield channel.basic_get("memory"))) is not None:
            consumed.append(message.body)
            if len(consumed) % 100 == 0:
                message.ack(multiple=True)
        self.assertEqual(consumed, bodies)
        yield channel.queue_declare("memory", passive=True)  # the acks are handled before this answer
        yield broker.stop()
        self.assertEqual(spilled_rows(data_dir), 0)


def spilled_rows(data_dir: str) -> int:
    """How many spilled bodies the store of the broker on *data_dir* holds."""
    path = Path(data_dir) / "store.db"
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        return int(db.execute("SELECT count(*) FROM spilled").fetchone()[0])
