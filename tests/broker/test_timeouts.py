"""The consumer timeout, the handshake timeout and the connection limit."""

from __future__ import annotations

from typing import Any

import uuid

import pika
import pika.exceptions
from twisted.internet import defer
from twisted.internet.threads import deferToThread
from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.logger import formatEvent, globalLogPublisher
from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.testing.scripted import ScriptedClient, server_factory
from tests.broker.support import LoopbackTestCase
from tests.test_tap import build
from txamqp09.broker.timeouts import DEFAULT_CONSUMER_TIMEOUT
from txamqp09.tap import Options
from txamqp09.testing.rabbitmq import RabbitMQ, rabbitmq_missing, shared_rabbitmq

TIMED_OUT = (
    "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value "
    "used: 10000 ms. This timeout value can be configured, see consumers doc guide to learn more"
)


def timed_out(milliseconds: int) -> str:
    """RabbitMQ 3.10's reply text for a delivery on channel 1 unacknowledged
    for longer than *milliseconds*."""
    return TIMED_OUT.replace("10000 ms", f"{milliseconds} ms")


def logged(test: SynchronousTestCase) -> list[str]:
    """The log lines emitted while *test* runs (formatted)."""
    lines: list[str] = []

    def observe(event: dict[str, Any]) -> None:
        lines.append(formatEvent(event))

    globalLogPublisher.addObserver(observe)
    test.addCleanup(globalLogPublisher.removeObserver, observe)
    return lines


class ConsumerTimeoutTests(SynchronousTestCase):
    """A delivery unacknowledged for longer than the timeout closes its channel."""

    def setUp(self) -> None:
        self.clock = Clock()
        self.factory = server_factory(self.clock, consumer_timeout=10.0)
        self.factory.startFactory()
        self.addCleanup(self.factory.stopFactory)
        self.peer = ScriptedClient(self.factory)
        self.spec = self.peer.spec
        self.peer.send(1, self.spec.QueueDeclare(queue="q"))
        self.peer.expect(1, "queue.declare-ok")
        self.queue = self.factory.broker.vhosts["/"].queues["q"]
        self.interval = self.factory.ack_timeouts.interval

    def wait(self, seconds: float) -> None:
        """Let *seconds* pass, one look of the timeout at a time."""
        steps = round(seconds / self.interval)
        self.clock.pump([self.interval] * steps)

    def consume(self, no_ack: bool = False) -> None:
        self.peer.send(1, self.spec.BasicConsume(queue="q", consumer_tag="c", no_ack=no_ack))
        self.peer.expect(1, "basic.consume-ok")

    def publish(self, body: bytes) -> None:
        self.peer.publish(1, "q", body)

    def closed(self) -> Any:
        """The channel.close the server sent, or None."""
        for channel, method in self.peer.methods():
            if method.NAME == "channel.close":
                self.assertEqual(channel, 1)
                return method
        return None

    def test_channel_closed_and_messages_requeued(self) -> None:
        lines = logged(self)
        self.consume()
        self.publish(b"one")
        self.publish(b"two")
        self.wait(10.0 - self.interval)
        self.assertIsNone(self.closed())
        self.wait(self.interval * 2)
        close = self.closed()
        self.assertEqual(
            (close.reply_code, close.reply_text, close.class_id, close.method_id),
            (406, TIMED_OUT, 0, 0),
        )
        self.assertEqual(self.queue.message_count, 2)
        self.assertTrue(any("--consumer-timeout" in line and "channel 1" in line for line in lines))

    def test_the_oldest_delivery_counts(self) -> None:
        self.consume()
        self.publish(b"one")
        self.wait(8.0)
        self.peer.frames()
        self.peer.send(1, self.spec.BasicAck(delivery_tag=1))
        self.publish(b"two")
        self.wait(8.0)
        self.assertIsNone(self.closed())
        self.wait(2.0 + self.interval * 2)
        self.assertEqual(self.closed().reply_code, 406)

    def test_basic_get_counts_too(self) -> None:
        self.publish(b"one")
        self.peer.send(1, self.spec.BasicGet(queue="q"))
        self.wait(10.0 + self.interval * 2)
        self.assertEqual(self.closed().reply_code, 406)
        self.assertEqual(self.queue.message_count, 1)

    def test_no_ack_deliveries_never_time_out(self) -> None:
        self.consume(no_ack=True)
        self.publish(b"one")
        self.wait(100.0)
        self.assertIsNone(self.closed())

    def test_zero_turns_it_off(self) -> None:
        quiet = server_factory(self.clock, consumer_timeout=0)
        quiet.startFactory()
        self.addCleanup(quiet.stopFactory)
        peer = ScriptedClient(quiet)
        peer.send(1, peer.spec.QueueDeclare(queue="q"))
        peer.publish(1, "q", b"one")
        peer.send(1, peer.spec.BasicGet(queue="q"))
        self.clock.advance(100000.0)
        self.assertNotIn("channel.close", peer.names())


class OptionsTests(SynchronousTestCase):
    def test_defaults_are_rabbitmqs(self) -> None:
        (service,) = build("--port", "5999")
        factory = service.factory
        self.assertEqual(DEFAULT_CONSUMER_TIMEOUT, 1800.0)
        self.assertEqual(factory.ack_timeouts.timeout, 1800.0)
        self.assertEqual(factory.options["negotiation_timeout"], 10.0)
        self.assertIsNone(factory.connection_max)

    def test_options(self) -> None:
        (service,) = build(
            "--port", "5999", "--consumer-timeout", "5000", "--handshake-timeout", "2500",
            "--connection-max", "3",
        )
        factory = service.factory
        self.assertEqual(
            (factory.ack_timeouts.timeout, factory.options["negotiation_timeout"], factory.connection_max),
            (5.0, 2.5, 3),
        )

    def test_bad_values(self) -> None:
        for argv in (
            ["--consumer-timeout", "-1"],
            ["--handshake-timeout", "0"],
            ["--connection-max", "0"],
        ):
            self.assertRaises(usage.UsageError, Options().parseOptions, argv)

    def test_handshake_timeout(self) -> None:
        """A client that has not opened its connection within the timeout is dropped."""
        (service,) = build("--port", "5999", "--handshake-timeout", "2500")
        peer = ScriptedClient(service.factory, handshake=False)
        peer.feed(peer.version.header)
        service.factory.clock.advance(2.4)
        self.assertFalse(peer.disconnected)
        service.factory.clock.advance(0.1)
        self.assertTrue(peer.disconnected)


class ConnectionMaxTests(SynchronousTestCase):
    def test_refused_beyond_the_limit_with_a_log_line(self) -> None:
        lines = logged(self)
        limited = server_factory(Clock(), connection_max=2)
        first, _second = ScriptedClient(limited), ScriptedClient(limited)
        address = IPv4Address("TCP", "127.0.0.1", 40001)
        self.assertIsNone(limited.buildProtocol(address))
        self.assertTrue(
            any("127.0.0.1:40001 refused" in line and "--connection-max" in line for line in lines)
        )
        first.server.connectionLost(None)
        self.assertIsNotNone(limited.buildProtocol(address))


class ConnectionMaxLiveTests(LoopbackTestCase):
    broker_options = {"connection_max": 1}

    @defer.inlineCallbacks
    def test_pika_refused_then_accepted(self) -> Any:
        def scenario() -> Any:
            parameters = pika.ConnectionParameters("127.0.0.1", self.port)
            first = pika.BlockingConnection(parameters)
            try:
                pika.BlockingConnection(parameters).close()
                refused = False
            except pika.exceptions.AMQPConnectionError:
                refused = True
            first.close()
            return refused

        self.assertTrue((yield self.in_thread(scenario)))


def slow_consumer(port: int, queue: str) -> tuple[Any, int]:
    """With pika: consume one message from *queue* and never acknowledge it.

    The queue is looked at over a second connection: RabbitMQ may send the
    timed-out channel's channel.close twice (its channel looks at the
    timeout again before the close-ok arrives), and pika gives a channel
    opened just after the first one the same number, so the second close
    would close it.

    :return: the channel's closing by the broker (reply code and text, None
        if it stayed open for 20 s), and the messages the queue holds after.
    """
    parameters = pika.ConnectionParameters("127.0.0.1", port)
    connection = pika.BlockingConnection(parameters)
    try:
        channel = connection.channel()
        channel.queue_declare(queue)
        channel.basic_publish("", queue, b"slow")
        channel.basic_consume(queue, lambda *delivery: None)
        connection.call_later(20.0, channel.stop_consuming)
        try:
            channel.start_consuming()
            closing: Any = None
        except pika.exceptions.ChannelClosedByBroker as closed:
            closing = (closed.reply_code, closed.reply_text)
        observer = pika.BlockingConnection(parameters)
        try:
            after = observer.channel()
            count = after.queue_declare(queue, passive=True).method.message_count
            after.queue_delete(queue)
        finally:
            observer.close()
        return closing, count
    finally:
        connection.close()


class ConsumerTimeoutLiveTests(LoopbackTestCase):
    """pika's slow consumer on this broker: the channel closed with RabbitMQ's
    code and text, the message back in the queue."""

    broker_options = {"consumer_timeout": 1.0}

    @defer.inlineCallbacks
    def test_pika(self) -> Any:
        closing, count = yield deferToThread(slow_consumer, self.port, "slow")
        self.assertEqual((closing, count), ((406, timed_out(1000)), 1))


#: RabbitMQ 3.10's own ``consumer_timeout`` and ``channel_tick_interval`` (ms).
RABBITMQ_DEFAULTS = (1800000, 60000)


class ConsumerTimeoutRabbitMQTests(SynchronousTestCase):
    """The same slow consumer on a private RabbitMQ 3.10 node whose
    ``consumer_timeout`` is 1000 ms: what this broker says is what it says."""

    def setUp(self) -> None:
        missing = rabbitmq_missing()
        if missing:
            raise self.skipTest(missing)
        self.node = shared_rabbitmq()

    def configure(self, node: RabbitMQ, consumer_timeout: int, tick: int) -> None:
        """Set the node's ``consumer_timeout`` and how often its channels
        look at it (``channel_tick_interval``), both in ms, for channels
        opened from now on."""
        node.evaluate(
            f"application:set_env(rabbit, consumer_timeout, {consumer_timeout}), "
            f"application:set_env(rabbit, channel_tick_interval, {tick})."
        )

    def test_pika(self) -> None:
        self.configure(self.node, 1000, 200)
        self.addCleanup(self.configure, self.node, *RABBITMQ_DEFAULTS)
        closing, count = slow_consumer(self.node.port, f"slow-{uuid.uuid4().hex[:10]}")
        self.assertEqual((closing, count), ((406, timed_out(1000)), 1))
