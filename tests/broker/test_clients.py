"""kombu / py-amqp and aio-pika (0-9-1) against the broker over loopback."""

from __future__ import annotations

import asyncio
from typing import Any

import aio_pika
import amqp
import kombu
from twisted.internet import defer

from tests.broker.support import LoopbackTestCase


class PyAmqpTests(LoopbackTestCase):
    """py-amqp, the transport under kombu, used directly."""

    def connect(self) -> amqp.Connection:
        connection = amqp.Connection(f"127.0.0.1:{self.port}", confirm_publish=True)
        connection.connect()
        return connection

    @defer.inlineCallbacks
    def test_publish_confirmed_get_and_ack(self) -> Any:
        def scenario() -> Any:
            with self.connect() as connection:
                channel = connection.channel()
                channel.queue_declare("py", auto_delete=False)
                channel.basic_publish(amqp.Message(b"hello", application_headers={"k": "v"}), "", "py")
                got = channel.basic_get("py")
                channel.basic_ack(got.delivery_tag)
                return got.body, got.headers, channel.queue_declare("py", passive=True).message_count

        body, headers, remaining = yield self.in_thread(scenario)
        self.assertEqual((body, headers, remaining), (b"hello", {"k": "v"}, 0))

    @defer.inlineCallbacks
    def test_channel_error_code(self) -> Any:
        def scenario() -> Any:
            with self.connect() as connection:
                channel = connection.channel()
                try:
                    channel.exchange_declare("amq.mine", "direct")
                except amqp.exceptions.AccessRefused as error:
                    return error.reply_code
                return None

        self.assertEqual((yield self.in_thread(scenario)), 403)


    @defer.inlineCallbacks
    def test_nowait_declarations_and_no_local(self) -> Any:
        """nowait declarations take effect; a no-local consumer skips its own messages."""

        def scenario() -> Any:
            with self.connect() as mine, self.connect() as other:
                channel = mine.channel()
                channel.exchange_declare("fan", "fanout", nowait=True)
                channel.queue_declare("local", nowait=True)
                channel.queue_bind("local", "fan", nowait=True)
                received: list[bytes] = []
                channel.basic_consume("local", no_local=True, no_ack=True,
                                      callback=lambda message: received.append(message.body))
                channel.basic_publish(amqp.Message(b"own"), "fan")
                other.channel().basic_publish(amqp.Message(b"theirs"), "fan")
                while not received:
                    mine.drain_events(timeout=5)
                return received, channel.queue_declare("local", passive=True).message_count

        self.assertEqual((yield self.in_thread(scenario)), ([b"theirs"], 1))

    @defer.inlineCallbacks
    def test_prefetch_size_and_recover_to_same_consumer(self) -> Any:
        """prefetch-size holds back a second message; recover without requeue resends it."""

        def scenario() -> Any:
            with self.connect() as connection:
                channel = connection.channel()
                channel.queue_declare("sized")
                for body in (b"a" * 100, b"b" * 100):
                    channel.basic_publish(amqp.Message(body), "", "sized")
                channel.basic_qos(prefetch_size=150, prefetch_count=0, a_global=False)
                received: list[tuple[bytes, bool]] = []
                channel.basic_consume("sized", callback=lambda message: received.append(
                    (message.body[:1], message.delivery_info["redelivered"])))
                connection.drain_events(timeout=5)
                waiting = channel.queue_declare("sized", passive=True).message_count
                channel.basic_recover(requeue=False)
                connection.drain_events(timeout=5)
                return received, waiting

        received, waiting = yield self.in_thread(scenario)
        self.assertEqual(received, [(b"a", False), (b"a", True)])
        self.assertEqual(waiting, 1)


class KombuTests(LoopbackTestCase):
    @defer.inlineCallbacks
    def test_simple_queue(self) -> Any:
        def scenario() -> Any:
            with kombu.Connection(self.server.url) as connection:
                queue = connection.SimpleQueue("simple")
                queue.put({"n": 1}, serializer="json")
                queue.put({"n": 2}, serializer="json")
                first = queue.get(timeout=5)
                first.ack()
                second = queue.get(timeout=5)
                second.reject(requeue=True)
                again = queue.get(timeout=5)
                again.ack()
                queue.close()
                return first.payload, second.payload, again.payload, again.delivery_info["redelivered"]

        self.assertEqual((yield self.in_thread(scenario)), ({"n": 1}, {"n": 2}, {"n": 2}, True))

    @defer.inlineCallbacks
    def test_topic_exchange_consumer(self) -> Any:
        def scenario() -> Any:
            exchange = kombu.Exchange("logs", "topic")
            queue = kombu.Queue("errors", exchange, routing_key="*.error")
            received: list[Any] = []
            with kombu.Connection(self.server.url) as connection, connection.Consumer(
                queue, callbacks=[lambda body, message: (received.append(body), message.ack())]
            ):
                producer = connection.Producer()
                for key in ("app.error", "app.info", "db.error"):
                    producer.publish({"key": key}, exchange=exchange, routing_key=key, declare=[queue])
                while len(received) < 2:
                    connection.drain_events(timeout=5)
            return received

        self.assertEqual((yield self.in_thread(scenario)), [{"key": "app.error"}, {"key": "db.error"}])


class AioPikaTests(LoopbackTestCase):
    """aio-pika, on an asyncio loop in a thread."""

    def run_async(self, coroutine: Any) -> defer.Deferred[Any]:
        return self.in_thread(asyncio.run, coroutine)

    @defer.inlineCallbacks
    def test_consume_iterator_and_confirms(self) -> Any:
        async def scenario() -> Any:
            connection = await aio_pika.connect(self.server.url)
            async with connection:
                channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
                queue = await channel.declare_queue("aio", durable=True)
                for number in range(3):
                    await channel.default_exchange.publish(
                        aio_pika.Message(str(number).encode(), headers={"n": number}), routing_key="aio"
                    )
                bodies = []
                async with queue.iterator() as messages:
                    async for message in messages:
                        async with message.process():
                            bodies.append((message.body, message.headers["n"]))
                        if len(bodies) == 3:
                            break
                try:
                    await channel.default_exchange.publish(
                        aio_pika.Message(b"lost"), routing_key="nowhere", mandatory=True
                    )
                    returned = False
                except aio_pika.exceptions.DeliveryError:
                    returned = True
                return bodies, returned

        bodies, returned = yield self.run_async(scenario())
        self.assertEqual(bodies, [(b"0", 0), (b"1", 1), (b"2", 2)])
        self.assertTrue(returned)
        self.assertEqual(self.queue("aio").message_count, 0)

    @defer.inlineCallbacks
    def test_exchange_binding_and_qos(self) -> Any:
        async def scenario() -> Any:
            connection = await aio_pika.connect(self.server.url)
            async with connection:
                channel = await connection.channel()
                await channel.set_qos(prefetch_count=1)
                source = await channel.declare_exchange("src", aio_pika.ExchangeType.FANOUT)
                target = await channel.declare_exchange("dst", aio_pika.ExchangeType.DIRECT)
                await target.bind(source)
                queue = await channel.declare_queue("", exclusive=True)
                await queue.bind(target, routing_key="k")
                await source.publish(aio_pika.Message(b"through"), routing_key="k")
                message = await queue.get(timeout=5)
                await message.ack()
                return message.body

        self.assertEqual((yield self.run_async(scenario())), b"through")
