"""Stream queues over the wire: this project's client and pika, against this
project's broker and against RabbitMQ (the same checks where they agree)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from tests.client.support import fails, inline
from txamqp09.client import Channel, ChannelClosed, ClientConnection, ConnectionClosed, Message, connect
from txamqp09.client.consumer import Consumer
from txamqp09.testing.broker import LoopbackBroker
from txamqp09.testing.rabbitmq import rabbitmq_missing, shared_rabbitmq

if TYPE_CHECKING:
    _TestCaseBase = TestCase
else:
    _TestCaseBase = object

try:
    import pika
except ImportError:  # pragma: no cover - pika is a test dependency
    pika = None

try:
    import aio_pika
except ImportError:  # pragma: no cover - aio-pika is a test dependency
    aio_pika = None

STREAM = {"x-queue-type": "stream"}


class StreamLiveTests(_TestCaseBase):
    """Cases that hold for this broker and RabbitMQ alike; subclasses give :meth:`url`."""

    timeout = 60

    def url(self) -> str:
        raise NotImplementedError

    @property
    def port(self) -> int:
        return int(self.url().rsplit(":", 1)[1].split("/")[0])

    async def connect(self) -> ClientConnection:
        connection = await connect(reactor, self.url())
        self.addCleanup(connection.disconnect)
        return connection

    async def stream(self, count: int = 0, **arguments: Any) -> tuple[Channel, str]:
        """A channel and a new stream holding messages m0..m<count-1>, each
        confirmed before the next is published (one chunk each in RabbitMQ)."""
        channel = await (await self.connect()).channel()
        name = f"stream-{uuid.uuid4()}"
        await channel.queue_declare(name, durable=True, arguments={**STREAM, **arguments})
        self.addCleanup(self.delete, name)
        await channel.confirm_select()
        for n in range(count):
            await self.publish(channel, name, b"m%d" % n)
        return channel, name

    async def publish(self, channel: Channel, name: str, body: bytes) -> None:
        confirmed = channel.basic_publish(body, routing_key=name)
        assert confirmed is not None
        await confirmed

    def delete(self, name: str) -> Deferred[None]:
        """Delete the stream *name* (a cleanup)."""

        async def delete() -> None:
            channel = await (await self.connect()).channel()
            await channel.queue_delete(queue=name)

        return Deferred.fromCoroutine(delete())

    async def subscribe(self, name: str, offset: Any, prefetch: int = 100) -> Consumer:
        """A new consumer of *name* starting at *offset*, once the broker confirmed it."""
        channel = await (await self.connect()).channel()
        await channel.basic_qos(prefetch)
        arguments = {} if offset is None else {"x-stream-offset": offset}
        consumer: Consumer = await channel.basic_consume(name, arguments=arguments)
        return consumer

    async def take(self, consumer: Consumer, count: int) -> list[Message]:
        """The next *count* messages *consumer* receives, each acked."""
        received = []
        async for message in consumer:
            received.append(message)
            message.ack()
            if len(received) == count:
                break
        return received

    async def read(self, name: str, offset: Any, count: int) -> list[Message]:
        """The first *count* messages a new consumer starting at *offset* receives."""
        consumer = await self.subscribe(name, offset)
        received = await self.take(consumer, count)
        await consumer.cancel()
        return received

    def offsets(self, messages: list[Message]) -> list[int]:
        return [message.headers["x-stream-offset"] for message in messages]

    # -- declaring ---------------------------------------------------------------

    @inline
    async def test_declare_refuses_what_a_stream_cannot_be(self) -> None:
        for flags, word in (
            ({"durable": False}, "non-durable"),
            ({"durable": True, "exclusive": True}, "exclusive-owner"),
            ({"durable": True, "auto_delete": True}, "auto-delete"),
        ):
            channel = await (await self.connect()).channel()
            closed = await fails(
                channel.queue_declare(f"refused-{uuid.uuid4()}", arguments=STREAM, **flags), ChannelClosed
            )
            self.assertEqual(closed.reply_code, 406)
            self.assertIn(f"invalid property '{word}'", closed.reply_text)

    @inline
    async def test_arguments_of_classic_queues_are_refused(self) -> None:
        channel = await (await self.connect()).channel()
        closed = await fails(
            channel.queue_declare(f"refused-{uuid.uuid4()}", durable=True, arguments={**STREAM, "x-max-length": 5}),
            ChannelClosed,
        )
        self.assertEqual(closed.reply_code, 406)
        self.assertIn("invalid arg 'x-max-length'", closed.reply_text)

    @inline
    async def test_redeclaring_as_a_classic_queue_is_refused(self) -> None:
        _, name = await self.stream()
        channel = await (await self.connect()).channel()
        closed = await fails(channel.queue_declare(name, durable=True), ChannelClosed)
        self.assertEqual(closed.reply_code, 406)
        self.assertIn("inequivalent arg 'x-queue-type'", closed.reply_text)

    # -- reading -----------------------------------------------------------------

    @inline
    async def test_every_delivery_carries_its_offset(self) -> None:
        _, name = await self.stream(5)
        messages = await self.read(name, "first", 5)
        self.assertEqual([m.body for m in messages], [b"m0", b"m1", b"m2", b"m3", b"m4"])
        self.assertEqual(self.offsets(messages), [0, 1, 2, 3, 4])
        self.assertEqual([m.redelivered for m in messages], [False] * 5)
        again = await self.read(name, "first", 5)
        self.assertEqual(self.offsets(again), [0, 1, 2, 3, 4])

    @inline
    async def test_starting_points(self) -> None:
        _, name = await self.stream(5)
        self.assertEqual(self.offsets(await self.read(name, 2, 3)), [2, 3, 4])
        self.assertEqual(self.offsets(await self.read(name, "last", 1)), [4])
        hour_ago = datetime.now(timezone.utc) - timedelta(hours=1)
        self.assertEqual(self.offsets(await self.read(name, hour_ago, 5)), [0, 1, 2, 3, 4])
        self.assertEqual(self.offsets(await self.read(name, "1h", 2)), [0, 1])

    @inline
    async def test_next_and_future_timestamps_wait_for_new_messages(self) -> None:
        channel, name = await self.stream(3)
        for start in ("next", None, datetime.now(timezone.utc) + timedelta(seconds=1)):
            consumer = await self.subscribe(name, start)
            await self.publish(channel, name, b"new")
            received = await self.take(consumer, 1)
            self.assertEqual([m.body for m in received], [b"new"])

    # -- refusals ----------------------------------------------------------------

    @inline
    async def test_basic_get_is_not_implemented(self) -> None:
        channel, name = await self.stream(1)
        closed = await fails(channel.basic_get(name), ConnectionClosed)
        self.assertEqual(closed.reply_code, 540)
        self.assertIn("basic.get", closed.reply_text)

    @inline
    async def test_consumers_need_prefetch_and_manual_acks(self) -> None:
        _, name = await self.stream(1)
        channel = await (await self.connect()).channel()
        closed = await fails(channel.basic_consume(name), ChannelClosed)
        self.assertEqual(closed.reply_code, 406)
        self.assertIn("prefetch count is not set", closed.reply_text)
        channel = await (await self.connect()).channel()
        await channel.basic_qos(10)
        closed = await fails(channel.basic_consume(name, no_ack=True), ConnectionClosed)
        self.assertEqual(closed.reply_code, 540)
        self.assertIn("automatic acknowledgement", closed.reply_text)

    @inline
    async def test_reject_is_not_implemented(self) -> None:
        _, name = await self.stream(1)
        connection = await self.connect()
        channel = await connection.channel()
        await channel.basic_qos(10)
        consumer = await channel.basic_consume(name, arguments={"x-stream-offset": "first"})
        message = await consumer.__anext__()
        message.reject(requeue=False)
        closed = await fails(channel.basic_qos(10), ConnectionClosed)
        self.assertEqual(closed.reply_code, 540)
        self.assertIn("basic.nack and basic.reject", closed.reply_text)

    # -- pika ----------------------------------------------------------------------

    def pika_session(self, name: str) -> dict[str, Any]:
        """In a thread: pika declares *name* as a stream, publishes three
        messages with confirms, reads them from offset 1 and checks a bad offset."""
        connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", self.port))
        try:
            channel = connection.channel()
            channel.queue_declare(name, durable=True, arguments=STREAM)
            channel.confirm_delivery()
            for n in range(3):
                channel.basic_publish("", name, b"p%d" % n)
            channel.basic_qos(prefetch_count=10)
            received: list[tuple[Any, bytes]] = []

            def take(channel: Any, method: Any, properties: Any, body: bytes) -> None:
                received.append((properties.headers["x-stream-offset"], body))
                channel.basic_ack(method.delivery_tag)
                if len(received) == 2:
                    channel.stop_consuming()

            channel.basic_consume(name, take, arguments={"x-stream-offset": 1})
            channel.start_consuming()
            channel = connection.channel()
            channel.basic_qos(prefetch_count=10)
            try:
                channel.basic_consume(name, take, arguments={"x-stream-offset": "bogus"})
                channel.start_consuming()
                refused: Any = None
            except pika.exceptions.AMQPError as error:
                refused = error
            return {"received": received, "refused": refused}
        finally:
            if connection.is_open:
                connection.close()

    @inline
    async def test_pika_reads_from_an_offset(self) -> None:
        if pika is None:
            raise self.skipTest("pika is not installed")
        name = f"stream-{uuid.uuid4()}"
        self.addCleanup(self.delete, name)
        outcome = await deferToThread(self.pika_session, name)
        self.assertEqual(outcome["received"], [(1, b"p1"), (2, b"p2")])
        self.assertIsNotNone(outcome["refused"], "a bad x-stream-offset is refused")


    # -- aio-pika ------------------------------------------------------------------

    async def aio_pika_session(self, name: str) -> list[tuple[int, bytes]]:
        """Declare *name* as a stream, publish three messages, read them from the
        timestamp of an hour ago (an asyncio program, run in a thread)."""
        connection = await aio_pika.connect(self.url())
        async with connection:
            channel = await connection.channel(publisher_confirms=True)
            queue = await channel.declare_queue(name, durable=True, arguments=STREAM)
            for n in range(3):
                await channel.default_exchange.publish(aio_pika.Message(b"a%d" % n), routing_key=name)
            await channel.set_qos(prefetch_count=10)
            start = datetime.now(timezone.utc) - timedelta(hours=1)
            received = []
            async with queue.iterator(arguments={"x-stream-offset": start}) as messages:
                async for message in messages:
                    received.append((message.headers["x-stream-offset"], message.body))
                    await message.ack()
                    if len(received) == 3:
                        break
            return received

    @inline
    async def test_aio_pika_reads_from_a_timestamp(self) -> None:
        if aio_pika is None:
            raise self.skipTest("aio-pika is not installed")
        import asyncio

        name = f"stream-{uuid.uuid4()}"
        self.addCleanup(self.delete, name)
        received = await deferToThread(asyncio.run, self.aio_pika_session(name))
        self.assertEqual(received, [(0, b"a0"), (1, b"a1"), (2, b"a2")])


class OwnBrokerStreamTests(StreamLiveTests, TestCase):
    """Against this project's broker in this process (no store: logs in memory)."""

    def setUp(self) -> None:
        self.broker = LoopbackBroker()
        self.broker.start()
        self.addCleanup(self.broker.stop)

    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.broker.port}/"

    @inline
    async def test_declare_ok_reports_the_end_of_the_log(self) -> None:
        channel, name = await self.stream(4)
        declared = await channel.queue_declare(name, passive=True)
        self.assertEqual(declared.message_count, 4)
        messages = await self.read(name, declared.message_count - 1, 1)
        self.assertEqual(self.offsets(messages), [3])

    @inline
    async def test_prefetch_is_exact_and_acks_give_credit_back(self) -> None:
        _, name = await self.stream(5)
        channel = await (await self.connect()).channel()
        await channel.basic_qos(2)
        consumer = await channel.basic_consume(name, arguments={"x-stream-offset": "first"})
        first = [await consumer.__anext__(), await consumer.__anext__()]
        declared = await channel.queue_declare(name, passive=True)
        self.assertEqual(consumer.backlog, 0, "nothing beyond the prefetch count arrived")
        self.assertEqual(declared.message_count, 5, "acks remove nothing")
        first[1].ack(multiple=True)
        rest = await self.take(consumer, 3)
        self.assertEqual(self.offsets(first + rest), [0, 1, 2, 3, 4])

    @inline
    async def test_bad_offsets_are_406(self) -> None:
        _, name = await self.stream(1)
        for bad in (-1, "bogus", 1.5):
            channel = await (await self.connect()).channel()
            await channel.basic_qos(1)
            closed = await fails(
                channel.basic_consume(name, arguments={"x-stream-offset": bad}), ChannelClosed
            )
            self.assertEqual(closed.reply_code, 406)
            self.assertIn("invalid x-stream-offset", closed.reply_text)


class RabbitMQStreamTests(StreamLiveTests, TestCase):
    """Against a private RabbitMQ node."""

    skip = rabbitmq_missing()

    def setUp(self) -> None:
        self.node = shared_rabbitmq()

    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.node.port}/"
