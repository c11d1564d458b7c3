"""The client against real brokers over loopback: this project's broker and RabbitMQ.

:class:`LiveTests` holds the cases; :class:`OwnBrokerTests` runs them against
:class:`~txamqp09.testing.broker.LoopbackBroker` in this process and
:class:`RabbitMQTests` against the private RabbitMQ node of
:mod:`txamqp09.testing.rabbitmq` (skipped when RabbitMQ is not installed).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, cast

from twisted.internet import reactor
from twisted.internet.defer import (
    Deferred,
    gatherResults,
    inlineCallbacks,
    maybeDeferred,
)
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

if TYPE_CHECKING:
    _TestCaseBase = TestCase
else:
    _TestCaseBase = object

from tests.client.support import OwnBroker, RabbitMQNode, fails, inline
from txamqp09.client import (
    Channel,
    ChannelClosed,
    ClientConnection,
    ConnectionClosed,
    Message,
    ReconnectingClient,
    connect,
)
from txamqp09.testing.broker import LoopbackBroker
from txamqp09.testing.waiting import eventually
from txamqp09.wire.errors import NotFound


class LiveTests(_TestCaseBase):
    """Cases that need a broker; a subclass provides :meth:`url`."""

    timeout = 30

    def url(self) -> str:
        raise NotImplementedError

    async def connect(self, **changes: Any) -> ClientConnection:
        connection = await connect(reactor, self.url(), **changes)
        self.addCleanup(connection.disconnect)
        return connection

    async def channel(self, **changes: Any) -> Channel:
        return await (await self.connect(**changes)).channel()

    async def get_message(self, channel: Channel, queue: str, no_ack: bool = False) -> Message:
        """basic.get that must find a message."""
        message = await channel.basic_get(queue, no_ack=no_ack)
        assert message is not None, f"{queue} is empty"
        return message

    async def private_queue(self, channel: Channel) -> str:
        """A server-named exclusive queue, gone with the connection."""
        declared = await channel.queue_declare("", exclusive=True)
        return declared.queue

    # -- connections -----------------------------------------------------------

    @inline
    async def test_every_version_publishes_and_gets(self) -> None:
        for version in ("0-9-1", "0-9", "0-8"):
            channel = await self.channel(version=version)
            queue = await self.private_queue(channel)
            channel.basic_publish(version.encode(), routing_key=queue)
            message = await self.get_message(channel, queue)
            self.assertEqual(message.body, version.encode())
            message.ack()

    @inline
    async def test_access_request_of_zero_eight_and_zero_nine(self) -> None:
        for version in ("0-9", "0-8"):
            channel = await self.channel(version=version)
            granted = await channel.access_request(realm="/data", active=True, read=True, write=True)
            self.assertEqual(granted.NAME, "access.request-ok")
            declared = await channel.queue_declare("", exclusive=True)
            channel.basic_publish(b"with ticket", routing_key=declared.queue)
            self.assertEqual((await self.get_message(channel, declared.queue, no_ack=True)).body, b"with ticket")

    @inlineCallbacks
    def test_inline_callbacks_style(self) -> Any:
        connection = yield connect(reactor, self.url())
        channel = yield connection.channel()
        declared = yield channel.queue_declare("", exclusive=True)
        channel.basic_publish(b"yielded", routing_key=declared.queue)
        message = yield channel.basic_get(declared.queue, no_ack=True)
        self.assertEqual(message.body, b"yielded")
        yield connection.disconnect()

    @inline
    async def test_negotiated_limits_and_no_nagle(self) -> None:
        connection = await self.connect(heartbeat=7, frame_max=8192)
        self.assertEqual((connection.negotiated_heartbeat, connection.frame_max), (7, 8192))
        self.assertTrue(connection.transport.getTcpNoDelay())  # type: ignore[union-attr]

    @inline
    async def test_wrong_password_fails(self) -> None:
        for mechanism in ("PLAIN", "AMQPLAIN"):
            refused = connect(reactor, self.url(), password="wrong", mechanism=mechanism)
            closed = await fails(refused, ConnectionClosed)
            self.assertEqual(closed.reply_code, 403, str(closed))

    @inline
    async def test_unknown_virtual_host_fails(self) -> None:
        refused = connect(reactor, self.url(), virtual_host="no-such-vhost")
        closed = await fails(refused, ConnectionClosed)
        self.assertIn("no-such-vhost", closed.reply_text)

    @inline
    async def test_disconnect_is_clean(self) -> None:
        connection = await self.connect()
        channel = await connection.channel()
        ended = await connection.disconnect()
        self.assertEqual(ended.reply_code, 200)
        self.assertIsInstance(channel.closed_by, ConnectionClosed)

    # -- channels ----------------------------------------------------------------

    @inline
    async def test_channel_error_fails_pending_and_later_calls(self) -> None:
        connection = await self.connect()
        channel = await connection.channel()
        missing = f"missing-{uuid.uuid4()}"
        closed = await fails(channel.queue_declare(missing, passive=True), ChannelClosed)
        self.assertEqual((closed.reply_code, closed.method_name), (404, "queue.declare"))
        self.assertIsInstance(closed.error, NotFound)
        self.assertIn(missing, closed.reply_text)
        await fails(channel.queue_declare("x"), ChannelClosed)
        # The connection goes on.
        other = await connection.channel()
        await other.queue_declare("", exclusive=True)

    @inline
    async def test_close_channel(self) -> None:
        connection = await self.connect()
        channel = await connection.channel()
        await channel.close()
        self.assertNotIn(channel.number, connection.channels)
        await (await connection.channel()).queue_declare("", exclusive=True)

    # -- content -----------------------------------------------------------------

    @inline
    async def test_properties_and_body_round_trip(self) -> None:
        channel = await self.channel()
        queue = await self.private_queue(channel)
        sent = {
            "content_type": "application/json",
            "content_encoding": "utf-8",
            "headers": {"int": 1, "text": "é", "flag": True, "nested": {"list": [1, "two"]}},
            "delivery_mode": 2,
            "priority": 5,
            "correlation_id": "corr",
            "reply_to": "back",
            "expiration": "60000",
            "message_id": "id-1",
            "timestamp": datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc),
            "type": "kind",
            "app_id": "tests",
        }
        body = bytes(range(256))
        channel.basic_publish(body, routing_key=queue, properties=sent)
        message = await self.get_message(channel, queue, no_ack=True)
        self.assertEqual(message.body, body)
        received = message.properties.fields()
        sent["headers"] = {"int": 1, "text": "é".encode(), "flag": True, "nested": {"list": [1, b"two"]}}
        self.assertEqual({name: received[name] for name in sent}, sent)

    @inline
    async def test_publishing_loop_waits_for_the_write_buffer(self) -> None:
        connection = await self.connect()
        channel = await connection.channel()
        queue = await self.private_queue(channel)
        waits = 0
        for number in range(20000):
            if not connection.writable:
                waits += 1
                await connection.whenWritable()
            channel.basic_publish(b"%d" % number, routing_key=queue)
        self.assertGreater(waits, 0)
        while (await channel.queue_declare(queue, passive=True)).message_count < 20000:
            pass

    @inline
    async def test_large_bodies_are_split_to_frame_max(self) -> None:
        channel = await self.channel(frame_max=4096)
        queue = await self.private_queue(channel)
        body = uuid.uuid4().bytes * 20000
        channel.basic_publish(body, routing_key=queue)
        message = await self.get_message(channel, queue, no_ack=True)
        self.assertEqual(message.body, body)

    @inline
    async def test_topic_routing(self) -> None:
        channel = await self.channel()
        exchange = f"topic-{uuid.uuid4()}"
        await channel.exchange_declare(exchange, "topic", auto_delete=True)
        queue = await self.private_queue(channel)
        await channel.queue_bind(queue=queue, exchange=exchange, routing_key="a.*")
        channel.basic_publish(b"yes", exchange, "a.b")
        channel.basic_publish(b"no", exchange, "b.a")
        first = await self.get_message(channel, queue, no_ack=True)
        self.assertEqual((first.body, first.routing_key), (b"yes", "a.b"))
        self.assertIsNone(await channel.basic_get(queue))
        await channel.exchange_delete(exchange=exchange)

    @inline
    async def test_reject_and_nack(self) -> None:
        channel = await self.channel()
        queue = await self.private_queue(channel)
        for body in (b"1", b"2"):
            channel.basic_publish(body, routing_key=queue)
        first = await self.get_message(channel, queue)
        first.reject(requeue=True)
        again = await self.get_message(channel, queue)
        self.assertEqual((again.body, again.redelivered), (b"1", True))
        again.nack(requeue=False)
        second = await self.get_message(channel, queue)
        second.reject(requeue=False)
        self.assertIsNone(await channel.basic_get(queue))

    @inline
    async def test_mandatory_unroutable_is_returned(self) -> None:
        channel = await self.channel()
        returned: Deferred[Message] = Deferred()
        channel.return_handler = returned.callback
        channel.basic_publish(b"lost", routing_key=f"nobody-{uuid.uuid4()}", mandatory=True)
        message = await returned
        self.assertEqual((message.body, message.method.reply_code), (b"lost", 312))

    # -- consumers ---------------------------------------------------------------

    @inline
    async def test_async_iterator_consumes_and_acks(self) -> None:
        channel = await self.channel()
        queue = await self.private_queue(channel)
        consumer = await channel.basic_consume(queue)
        for number in range(20):
            channel.basic_publish(b"%d" % number, routing_key=queue)
        bodies = []
        async for message in consumer:
            bodies.append(message.body)
            message.ack()
            if len(bodies) == 20:
                await consumer.cancel()
        self.assertEqual(bodies, [b"%d" % number for number in range(20)])
        self.assertEqual((await channel.queue_declare(queue, passive=True)).message_count, 0)

    @inline
    async def test_prefetch_limits_unacknowledged(self) -> None:
        channel = await self.channel()
        queue = await self.private_queue(channel)
        for number in range(6):
            channel.basic_publish(b"%d" % number, routing_key=queue)
        await channel.basic_qos(2)
        held: list[Message] = []
        arrived: dict[int, Deferred[None]] = {2: Deferred(), 4: Deferred()}

        def hold(message: Message) -> None:
            held.append(message)
            if len(held) in arrived:
                arrived[len(held)].callback(None)

        await channel.basic_consume(queue, hold)
        await arrived[2]
        # The broker keeps the rest ready while two are unacknowledged.
        self.assertEqual((await channel.queue_declare(queue, passive=True)).message_count, 4)
        held[1].ack(multiple=True)
        await arrived[4]
        self.assertEqual((await channel.queue_declare(queue, passive=True)).message_count, 2)
        self.assertEqual([message.body for message in held], [b"0", b"1", b"2", b"3"])

    @inline
    async def test_slow_consumer_pauses_reading(self) -> None:
        connection = await self.connect()
        channel = await connection.channel()
        queue = await self.private_queue(channel)
        consumer = await channel.basic_consume(queue, no_ack=True, max_backlog=10)
        for number in range(100):
            channel.basic_publish(b"%d" % number, routing_key=queue)
        await eventually(lambda: connection.reading_paused, reactor)
        self.assertGreaterEqual(consumer.backlog, 10)
        bodies = [(await consumer.__anext__()).body for _ in range(100)]
        self.assertEqual(bodies, [b"%d" % number for number in range(100)])
        self.assertFalse(connection.reading_paused)

    @inline
    async def test_deleted_queue_cancels_its_consumer(self) -> None:
        connection = await self.connect()
        channel = await connection.channel()
        queue = await self.private_queue(channel)
        consumer = await channel.basic_consume(queue)
        cancelled: Deferred[Any] = Deferred()
        consumer.onCancel(cancelled.callback)
        await (await connection.channel()).queue_delete(queue=queue)
        self.assertIs(await cancelled, consumer)
        self.assertTrue(consumer.cancelled_by_server)
        await fails(Deferred.fromCoroutine(consumer.__anext__()), StopAsyncIteration)

    @inline
    async def test_rpc_with_a_reply_queue(self) -> None:
        connection = await self.connect()
        server_channel = await connection.channel()
        requests = await self.private_queue(server_channel)

        def answer(request: Message) -> None:
            number = int(request.body)
            server_channel.basic_publish(
                b"%d" % (number * number),
                routing_key=request.properties.reply_to,
                properties={"correlation_id": request.properties.correlation_id},
            )
            request.ack()

        await server_channel.basic_consume(requests, answer)
        client_channel = await connection.channel()
        replies = await self.private_queue(client_channel)
        waiting: dict[str, Deferred[Message]] = {}
        await client_channel.basic_consume(
            replies, lambda reply: waiting.pop(reply.properties.correlation_id).callback(reply), no_ack=True
        )
        calls = []
        for number in range(5):
            correlation = str(uuid.uuid4())
            waiting[correlation] = Deferred()
            calls.append(waiting[correlation])
            client_channel.basic_publish(
                b"%d" % number, routing_key=requests, properties={"reply_to": replies, "correlation_id": correlation}
            )
        answers = await gatherResults(calls)
        self.assertEqual([reply.body for reply in answers], [b"0", b"1", b"4", b"9", b"16"])

    # -- confirms and transactions -----------------------------------------------

    @inline
    async def test_publisher_confirms(self) -> None:
        channel = await self.channel()
        queue = await self.private_queue(channel)
        await channel.confirm_select()
        confirmed = await gatherResults([cast(Deferred[int], channel.basic_publish(b"x", routing_key=queue)) for _ in range(200)])
        self.assertEqual(confirmed, list(range(1, 201)))
        self.assertEqual(channel.unconfirmed, 0)
        self.assertEqual((await channel.queue_declare(queue, passive=True)).message_count, 200)

    @inline
    async def test_transactions(self) -> None:
        connection = await self.connect()
        channel = await connection.channel()
        queue = await self.private_queue(channel)
        observer = await connection.channel()
        await channel.tx_select()
        channel.basic_publish(b"rolled back", routing_key=queue)
        await channel.tx_rollback()
        channel.basic_publish(b"committed", routing_key=queue)
        self.assertEqual((await observer.queue_declare(queue, passive=True)).message_count, 0)
        await channel.tx_commit()
        message = await self.get_message(observer, queue, no_ack=True)
        self.assertEqual(message.body, b"committed")


    # -- reconnection ------------------------------------------------------------

    def drop_connections(self) -> Any:
        """Make the broker drop every client connection (may return a Deferred)."""
        raise NotImplementedError

    @inline
    async def test_reconnection_redeclares_and_resumes_consuming(self) -> None:
        queue = f"reconnect-{uuid.uuid4()}"
        received: list[bytes] = []
        arrived: list[Deferred[None]] = [Deferred(), Deferred()]

        def handle(message: Message) -> None:
            received.append(message.body)
            message.ack()
            arrived[len(received) - 1].callback(None)

        client = ReconnectingClient(reactor, self.url(), retry_policy=lambda failures: 0.05, confirms=True)
        client.declare_queue(queue, auto_delete=True)
        client.consume(queue, handle, prefetch_count=10)
        client.startService()
        self.addCleanup(client.stopService)
        first = await client.whenConnected()
        await client.publish(b"before", routing_key=queue)
        await arrived[0]
        await maybeDeferred(self.drop_connections)
        await first.whenClosed()
        await client.publish(b"after", routing_key=queue)
        await arrived[1]
        self.assertEqual(received, [b"before", b"after"])
        self.assertEqual(client.connections_made, 2)
        self.assertIsNot(await client.whenConnected(), first)


class OwnBrokerTests(OwnBroker, LiveTests, TestCase):
    """Against this project's broker, in this process."""

    def drop_connections(self) -> None:
        for connection in list(self.broker.factory.connections):
            connection.dropConnection()


    async def fill_beyond_the_watermark(self, version: str) -> tuple[Channel, str, Channel]:
        """A publishing channel that filled a queue past the broker's watermark, and a draining one."""
        throttled = LoopbackBroker(high_watermark=2000)
        throttled.start()
        self.addCleanup(throttled.stop)
        publishing = await connect(reactor, throttled.url, version=version)
        draining = await connect(reactor, throttled.url, version=version)
        for connection in (publishing, draining):
            self.addCleanup(connection.disconnect)
        channel = await publishing.channel()
        queue = (await channel.queue_declare("", exclusive=False, auto_delete=True)).queue
        for _ in range(50):
            channel.basic_publish(b"x" * 100, routing_key=queue)
        return channel, queue, await draining.channel()

    async def drain(self, channel: Channel, queue: str) -> list[bytes]:
        bodies = []
        while (message := await channel.basic_get(queue, no_ack=True)) is not None:
            bodies.append(message.body)
        return bodies

    @inline
    async def test_channel_flow_holds_publishing(self) -> None:
        channel, queue, draining = await self.fill_beyond_the_watermark("0-9")
        await eventually(lambda: not channel.flow_active, reactor)
        channel.basic_publish(b"held", routing_key=queue)
        bodies = await self.drain(draining, queue)
        await eventually(lambda: channel.flow_active, reactor)
        bodies += await self.drain(draining, queue)
        while b"held" not in bodies:
            bodies += await self.drain(draining, queue)
        self.assertEqual(len(bodies), 51)

    @inline
    async def test_connection_blocked_is_reported(self) -> None:
        channel, queue, draining = await self.fill_beyond_the_watermark("0-9-1")
        changes: list[Any] = []
        channel.connection.addBlockedListener(changes.append)
        await eventually(lambda: channel.connection.blocked is not None, reactor)
        self.assertIn("high watermark", channel.connection.blocked)
        await self.drain(draining, queue)
        await eventually(lambda: changes[-1:] == [None], reactor)


class RabbitMQTests(RabbitMQNode, LiveTests, TestCase):
    """Against a private RabbitMQ node."""

    def drop_connections(self) -> Deferred[str]:
        # What ``rabbitmqctl close_all_connections test`` calls.
        return deferToThread(
            self.node.evaluate,
            'rabbit_connection_tracking_handler:close_connections('
            'rabbit_connection_tracking:list(<<"/">>), <<"test">>, 0).',
        )

    @inline
    async def test_blocked_and_unblocked(self) -> None:
        connection = await self.connect()
        changes: list[Any] = []
        changed: list[Deferred[None]] = [Deferred(), Deferred()]
        def note(reason: Any) -> None:
            changes.append(reason)
            changed[len(changes) - 1].callback(None)

        connection.addBlockedListener(note)
        channel = await connection.channel()
        await channel.queue_declare("", exclusive=True)
        self.node.evaluate("vm_memory_monitor:set_vm_memory_high_watermark(0.0).")
        try:
            channel.basic_publish(b"x", routing_key="nowhere")
            await changed[0]
        finally:
            self.node.evaluate("vm_memory_monitor:set_vm_memory_high_watermark(0.4).")
        await changed[1]
        self.assertEqual(changes[1], None)
        self.assertIn("memory", changes[0])
