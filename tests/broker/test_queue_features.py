"""The queue features through real clients (pika, kombu, aio-pika), against
this project's broker and, with the same cases, a private RabbitMQ node.

:class:`FeatureCases` holds the cases. :class:`OwnBrokerTests` runs them
against :class:`~txamqp09.testing.broker.LoopbackBroker` whose model runs
on a :class:`~twisted.internet.task.Clock`, so TTLs and queue expiry take no
real time; :class:`RabbitMQTests` runs them against
:mod:`txamqp09.testing.rabbitmq`'s node (skipped when RabbitMQ is absent),
where the same TTLs, kept short, pass in real time.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar

import aio_pika
import kombu
import pika
from pika.exceptions import ChannelClosedByBroker, NackError
from twisted.internet import reactor
from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.internet.task import Clock
from twisted.internet.threads import blockingCallFromThread, deferToThread
from twisted.trial.unittest import TestCase

from tests.broker.support import wait_on_node_clock
from txamqp09.broker.model import Broker
from txamqp09.testing.broker import LoopbackBroker
from txamqp09.testing.rabbitmq import rabbitmq_missing, shared_rabbitmq

if TYPE_CHECKING:
    _Base = TestCase
else:
    _Base = object

T = TypeVar("T")
#: How long a real broker gets to do what the test waits for.
_PATIENCE = 10.0


class FeatureCases(_Base):
    """Cases that need a broker; subclasses provide :attr:`port` and :meth:`elapse`."""

    timeout = 60
    port: int

    def elapse(self, seconds: float) -> None:
        """Let *seconds* pass for the broker (called from the client's thread)."""
        raise NotImplementedError

    def name(self, prefix: str) -> str:
        """A name no other test uses (the RabbitMQ node is shared)."""
        return f"{prefix}-{uuid.uuid4().hex[:10]}"

    def perform(self, scenario: Callable[[pika.adapters.blocking_connection.BlockingChannel], T]) -> Deferred[T]:
        """Run *scenario* with a pika channel in a thread."""

        def in_thread() -> T:
            connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", self.port))
            try:
                return scenario(connection.channel())
            finally:
                if connection.is_open:
                    connection.close()

        return deferToThread(in_thread)

    def until(self, attempt: Callable[[], Optional[T]]) -> T:
        """The first result of *attempt* that is not None (a real broker may take a moment)."""
        give_up = time.monotonic() + _PATIENCE
        while True:
            result = attempt()
            if result is not None or time.monotonic() > give_up:
                assert result is not None, "the broker did not get there in time"
                return result
            time.sleep(0.01)

    def dead_letter_queue(self, channel: Any, exchange_type: str = "fanout", key: str = "") -> tuple[str, str]:
        """A dead-letter exchange and a queue bound to it: (exchange, queue)."""
        exchange, queue = self.name("dlx"), self.name("dead")
        channel.exchange_declare(exchange, exchange_type, auto_delete=True)
        channel.queue_declare(queue, exclusive=True)
        channel.queue_bind(queue, exchange, key)
        return exchange, queue

    def published(self, channel: Any, queue: str) -> None:
        """Wait until the broker has handled what *channel* published (one round trip)."""
        channel.queue_declare(queue, passive=True)

    def get(self, channel: Any, queue: str, auto_ack: bool = True) -> Optional[tuple[Any, Any, bytes]]:
        """basic.get: (method, properties, body), or None when the queue is empty."""
        method, properties, body = channel.basic_get(queue, auto_ack=auto_ack)
        return None if method is None else (method, properties, body)

    def assertDeath(self, death: dict[str, Any], **expected: Any) -> None:
        """*death* is an x-death entry with RabbitMQ's fields and *expected* values."""
        self.assertTrue(
            {"count", "reason", "queue", "time", "exchange", "routing-keys"} <= set(death), death
        )
        self.assertIsInstance(death["time"], datetime)
        for key, value in expected.items():
            self.assertEqual(death[key.replace("_", "-")], value, key)

    # -- TTL and dead-lettering --------------------------------------------------

    @inlineCallbacks
    def test_expired_messages_are_dead_lettered_with_x_death(self) -> Any:
        def scenario(channel: Any) -> Any:
            exchange, dead = self.dead_letter_queue(channel)
            queue = self.name("ttl")
            channel.queue_declare(
                queue, exclusive=True,
                arguments={"x-message-ttl": 200, "x-dead-letter-exchange": exchange},
            )
            channel.basic_publish("", queue, b"queue-ttl", pika.BasicProperties(headers={"app": "x"}))
            channel.basic_publish("", queue, b"own-ttl", pika.BasicProperties(expiration="100"))
            self.published(channel, queue)
            self.elapse(0.25)
            first = self.until(lambda: self.get(channel, dead))
            second = self.until(lambda: self.get(channel, dead))
            return queue, exchange, first, second, channel.queue_declare(queue, passive=True).method

        queue, exchange, first, second, declared = yield self.perform(scenario)
        self.assertEqual(declared.message_count, 0)
        self.assertEqual([first[2], second[2]], [b"queue-ttl", b"own-ttl"])
        method, properties, _ = first
        self.assertEqual((method.exchange, method.routing_key), (exchange, queue))
        self.assertEqual(properties.headers["app"], "x")
        self.assertEqual(properties.headers["x-first-death-reason"], "expired")
        self.assertEqual(properties.headers["x-first-death-queue"], queue)
        [death] = properties.headers["x-death"]
        self.assertDeath(death, count=1, reason="expired", queue=queue, exchange="", routing_keys=[queue])
        self.assertNotIn("original-expiration", death)
        [death] = second[1].headers["x-death"]
        self.assertDeath(death, reason="expired", original_expiration="100")
        self.assertIsNone(second[1].expiration)

    @inlineCallbacks
    def test_rejected_and_nacked_messages_with_a_dead_letter_routing_key(self) -> Any:
        def scenario(channel: Any) -> Any:
            exchange, dead = self.dead_letter_queue(channel, "direct", "failed")
            queue = self.name("work")
            channel.queue_declare(
                queue, exclusive=True,
                arguments={"x-dead-letter-exchange": exchange, "x-dead-letter-routing-key": "failed"},
            )
            for body in (b"one", b"two", b"three"):
                channel.basic_publish("", queue, body, pika.BasicProperties(priority=4))
            tags = [channel.basic_get(queue)[0].delivery_tag for _ in range(3)]
            channel.basic_reject(tags[0], requeue=False)
            channel.basic_nack(tags[2], multiple=True, requeue=False)
            return queue, [self.until(lambda: self.get(channel, dead)) for _ in range(3)]

        queue, dead = yield self.perform(scenario)
        self.assertEqual([body for _, _, body in dead], [b"one", b"two", b"three"])
        for method, properties, _ in dead:
            self.assertEqual(method.routing_key, "failed")
            self.assertEqual(properties.priority, 4)
            [death] = properties.headers["x-death"]
            self.assertDeath(death, count=1, reason="rejected", queue=queue, routing_keys=[queue])

    @inlineCallbacks
    def test_dead_letter_cycles(self) -> Any:
        """Expiring back into the same queue is a cycle and drops the message;
        a client's rejection breaks the cycle and counts up."""

        def scenario(channel: Any) -> Any:
            looping = self.name("looping")
            channel.queue_declare(
                looping, exclusive=True,
                arguments={"x-message-ttl": 50, "x-dead-letter-exchange": ""},
            )
            channel.basic_publish("", looping, b"gone")
            self.published(channel, looping)
            self.elapse(0.1)
            self.until(lambda: channel.queue_declare(looping, passive=True).method.message_count == 0 or None)
            retried = self.name("retried")
            channel.queue_declare(retried, exclusive=True, arguments={"x-dead-letter-exchange": ""})
            channel.basic_publish("", retried, b"again")
            for _ in range(3):
                method, _, _ = self.until(lambda: self.get(channel, retried, auto_ack=False))
                channel.basic_reject(method.delivery_tag, requeue=False)
            _, properties, _ = self.until(lambda: self.get(channel, retried))
            looping_left = channel.queue_declare(looping, passive=True).method.message_count
            return properties.headers["x-death"][0]["count"], looping_left

        count, looping_left = yield self.perform(scenario)
        self.assertEqual((count, looping_left), (3, 0))

    # -- length limits ---------------------------------------------------------------

    @inlineCallbacks
    def test_length_limits_and_overflow(self) -> Any:
        def scenario(channel: Any) -> Any:
            exchange, dead = self.dead_letter_queue(channel)
            dropping, rejecting, rejecting_dlx = self.name("drop"), self.name("reject"), self.name("reject-dlx")
            channel.queue_declare(dropping, exclusive=True, arguments={
                "x-max-length": 2, "x-dead-letter-exchange": exchange})
            channel.queue_declare(rejecting, exclusive=True, arguments={
                "x-max-length-bytes": 5, "x-overflow": "reject-publish"})
            channel.queue_declare(rejecting_dlx, exclusive=True, arguments={
                "x-max-length": 1, "x-overflow": "reject-publish-dlx", "x-dead-letter-exchange": exchange})
            channel.confirm_delivery()
            for body in (b"a", b"b", b"c"):
                channel.basic_publish("", dropping, body)
            channel.basic_publish("", rejecting, b"12345")
            nacked = []
            for queue, body in ((rejecting, b"6"), (rejecting_dlx, b"kept"), (rejecting_dlx, b"refused")):
                try:
                    channel.basic_publish("", queue, body)
                except NackError:
                    nacked.append(body)
            dead_bodies = sorted(self.until(lambda: self.get(channel, dead))[2] for _ in range(2))
            ready = [
                [self.get(channel, queue)[2] for _ in range(channel.queue_declare(queue, passive=True).method.message_count)]
                for queue in (dropping, rejecting, rejecting_dlx)
            ]
            return nacked, dead_bodies, ready

        nacked, dead_bodies, ready = yield self.perform(scenario)
        self.assertEqual(nacked, [b"6", b"refused"])
        self.assertEqual(dead_bodies, [b"a", b"refused"])
        self.assertEqual(ready, [[b"b", b"c"], [b"12345"], [b"kept"]])

    # -- priorities ------------------------------------------------------------------

    @inlineCallbacks
    def test_priority_queue(self) -> Any:
        def scenario(channel: Any) -> Any:
            queue = self.name("prio")
            channel.queue_declare(queue, exclusive=True, arguments={"x-max-priority": 5})
            for body, priority in ((b"a", None), (b"b", 9), (b"c", 1), (b"d", 5), (b"e", 1)):
                channel.basic_publish("", queue, body, pika.BasicProperties(priority=priority))
            return [self.get(channel, queue)[2] for _ in range(5)]

        self.assertEqual((yield self.perform(scenario)), [b"b", b"d", b"c", b"e", b"a"])

    @inlineCallbacks
    def test_consumer_priorities_with_prefetch(self) -> Any:
        def scenario(channel: Any) -> Any:
            queue = self.name("consumers")
            channel.queue_declare(queue, exclusive=True)
            channel.basic_qos(prefetch_count=2)
            received: list[str] = []
            for tag, priority in (("low-a", -1), ("high-a", 10), ("high-b", 10), ("low-b", -1)):
                channel.basic_consume(
                    queue, lambda ch, method, properties, body: received.append(method.consumer_tag),
                    consumer_tag=tag, arguments={"x-priority": priority},
                )
            for _ in range(6):
                channel.basic_publish("", queue, b"m")
            give_up = time.monotonic() + _PATIENCE
            while len(received) < 6 and time.monotonic() < give_up:
                channel.connection.process_data_events(0.05)
            return received

        self.assertEqual(
            (yield self.perform(scenario)), ["high-a", "high-b", "high-a", "high-b", "low-a", "low-b"]
        )

    # -- alternate exchanges, single active consumer ----------------------------------

    @inlineCallbacks
    def test_alternate_exchange_takes_unroutable_messages(self) -> Any:
        def scenario(channel: Any) -> Any:
            alternate, main, unrouted = self.name("ae"), self.name("main"), self.name("unrouted")
            channel.exchange_declare(alternate, "fanout", auto_delete=True)
            channel.queue_declare(unrouted, exclusive=True)
            channel.queue_bind(unrouted, alternate)
            channel.exchange_declare(main, "direct", auto_delete=True, arguments={"alternate-exchange": alternate})
            channel.queue_bind(unrouted, main, "bound-to-keep-it")
            channel.confirm_delivery()
            channel.basic_publish(main, "nowhere", b"x", mandatory=True)  # no return: the AE took it
            got = self.get(channel, unrouted)
            try:
                channel.exchange_declare(main, "direct", auto_delete=True)
            except ChannelClosedByBroker as error:
                return got[2] if got else None, error.reply_code, error.reply_text
            return got, None, None

        body, code, text = yield self.perform(scenario)
        self.assertEqual((body, code), (b"x", 406))
        self.assertIn("inequivalent arg 'alternate-exchange'", text)

    @inlineCallbacks
    def test_single_active_consumer(self) -> Any:
        def scenario(channel: Any) -> Any:
            queue = self.name("sac")
            channel.queue_declare(queue, exclusive=True, arguments={"x-single-active-consumer": True})
            received: list[tuple[str, bytes]] = []

            def on_message(ch: Any, method: Any, properties: Any, body: bytes) -> None:
                received.append((method.consumer_tag, body))
                ch.basic_ack(method.delivery_tag)

            for tag, priority in (("first", 0), ("second", 0), ("third", 5)):
                channel.basic_consume(queue, on_message, consumer_tag=tag, arguments={"x-priority": priority})

            def publish_and_wait(body: bytes) -> None:
                channel.basic_publish("", queue, body)
                give_up = time.monotonic() + _PATIENCE
                while not any(got == body for _, got in received) and time.monotonic() < give_up:
                    channel.connection.process_data_events(0.05)

            for body in (b"1", b"2"):
                publish_and_wait(body)
            channel.basic_cancel("first")
            publish_and_wait(b"3")
            return received

        self.assertEqual(
            (yield self.perform(scenario)), [("first", b"1"), ("first", b"2"), ("third", b"3")]
        )

    # -- queue expiry, arguments -------------------------------------------------------

    @inlineCallbacks
    def test_unused_queue_expires(self) -> Any:
        def scenario(channel: Any) -> Any:
            queue = self.name("expiring")
            channel.queue_declare(queue, arguments={"x-expires": 100})
            self.elapse(0.15)

            def gone() -> Optional[int]:
                probe = channel.connection.channel()
                try:
                    probe.queue_declare(queue, passive=True)
                except ChannelClosedByBroker as error:
                    return error.reply_code
                probe.close()
                return None

            return self.until(gone)

        self.assertEqual((yield self.perform(scenario)), 404)

    @inlineCallbacks
    def test_invalid_and_inequivalent_arguments(self) -> Any:
        def scenario(channel: Any) -> Any:
            connection = channel.connection
            queue = self.name("args")
            errors = []
            for arguments in (
                {"x-message-ttl": -1},
                {"x-message-ttl": "10"},
                {"x-overflow": "sometimes"},
                {"x-max-priority": 256},
                {"x-dead-letter-routing-key": "k"},
            ):
                try:
                    connection.channel().queue_declare(queue, arguments=arguments)
                except ChannelClosedByBroker as error:
                    errors.append((error.reply_code, error.reply_text))
            channel.queue_declare(queue, exclusive=True, arguments={"x-message-ttl": 1000})
            try:
                connection.channel().queue_declare(queue, exclusive=True, arguments={"x-message-ttl": 2000})
            except ChannelClosedByBroker as error:
                errors.append((error.reply_code, error.reply_text))
            return queue, errors

        queue, errors = yield self.perform(scenario)
        self.assertEqual([code for code, _ in errors], [406] * 6)
        for (_, text), argument in zip(errors, ("x-message-ttl", "x-message-ttl", "x-overflow",
                                                "x-max-priority", "x-dead-letter-routing-key")):
            self.assertIn(f"invalid arg {argument!r} for queue {queue!r} in vhost '/'", text)
        self.assertIn(f"inequivalent arg 'x-message-ttl' for queue {queue!r} in vhost '/'", errors[-1][1])

    # -- kombu and aio-pika --------------------------------------------------------------

    @inlineCallbacks
    def test_kombu_priority_queue_with_ttl(self) -> Any:
        """kombu's Queue(max_priority, message_ttl) and a celery-style task flow:
        urgent tasks first, a failed task dead-lettered, a stale one expired."""

        def scenario() -> Any:
            name = self.name("tasks")
            tasks = kombu.Exchange(name, "direct", durable=False, auto_delete=True)
            failed_exchange = kombu.Exchange(name + ".failed", "fanout", durable=False, auto_delete=True)
            queue = kombu.Queue(
                name, tasks, routing_key=name, max_priority=10, message_ttl=5.0, durable=False,
                queue_arguments={"x-dead-letter-exchange": failed_exchange.name}, auto_delete=True,
            )
            failed = kombu.Queue(name + ".failed", failed_exchange, durable=False, auto_delete=True)
            with kombu.Connection(f"amqp://guest:guest@127.0.0.1:{self.port}//") as connection:
                producer = connection.Producer(serializer="json")
                for task, priority in (("report", 0), ("email", 9), ("resize", 5), ("fail", 9)):
                    producer.publish(
                        {"task": task}, exchange=tasks, routing_key=name, priority=priority,
                        declare=[queue, failed], delivery_mode=2,
                        headers={"task": task, "id": str(uuid.uuid4())},
                    )
                producer.publish({"task": "stale"}, exchange=tasks, routing_key=name, expiration=0.05)
                queue(connection.default_channel).queue_declare(passive=True)  # the broker has them
                done: list[str] = []

                def work(body: Any, message: Any) -> None:
                    if body["task"] == "fail":
                        message.reject()
                    else:
                        done.append(body["task"])
                        message.ack()

                self.elapse(0.1)
                with connection.Consumer(queue, callbacks=[work], prefetch_count=1):
                    give_up = time.monotonic() + _PATIENCE
                    while len(done) < 3 and time.monotonic() < give_up:
                        connection.drain_events(timeout=_PATIENCE)
                dead = self.until(lambda: failed(connection.default_channel).get(no_ack=True))
                return done, dead.payload, dead.headers["x-death"][0]["reason"]

        done, dead_payload, reason = yield deferToThread(scenario)
        self.assertEqual(done, ["email", "resize", "report"])
        self.assertEqual((dead_payload, reason), ({"task": "fail"}, "rejected"))

    @inlineCallbacks
    def test_aio_pika_ttl_priority_and_dead_letters(self) -> Any:
        async def scenario() -> Any:
            connection = await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:{self.port}/")
            async with connection:
                channel = await connection.channel()
                dlx = await channel.declare_exchange(self.name("dlx"), "fanout", auto_delete=True)
                dead = await channel.declare_queue(exclusive=True)
                await dead.bind(dlx)
                queue = await channel.declare_queue(exclusive=True, arguments={
                    "x-max-priority": 3, "x-dead-letter-exchange": dlx.name})
                for body, priority in ((b"low", 0), (b"high", 3)):
                    await channel.default_exchange.publish(
                        aio_pika.Message(body, priority=priority), routing_key=queue.name
                    )
                await channel.default_exchange.publish(
                    aio_pika.Message(b"short-lived", expiration=0.05, priority=3), routing_key=queue.name
                )
                await asyncio.get_running_loop().run_in_executor(None, self.elapse, 0.1)
                order = []
                async with queue.iterator() as messages:
                    async for message in messages:
                        order.append(message.body)
                        await message.reject(requeue=False)
                        if len(order) == 2:
                            break
                dead_messages = []
                while len(dead_messages) < 3:
                    message = await dead.get(no_ack=True, fail=False)
                    if message is not None:
                        dead_messages.append((message.body, message.headers["x-death"][0]["reason"]))
                return order, sorted(dead_messages)

        order, dead_messages = yield deferToThread(asyncio.run, scenario())
        self.assertEqual(order, [b"high", b"low"])
        self.assertEqual(
            dead_messages, [(b"high", "rejected"), (b"low", "rejected"), (b"short-lived", "expired")]
        )


class OwnBrokerTests(FeatureCases, TestCase):
    """The cases against this project's broker, its model on a Clock."""

    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(time.time())
        self.server = LoopbackBroker(broker=Broker(clock=self.clock))
        self.port = self.server.start()
        self.addCleanup(self.server.stop)

    def elapse(self, seconds: float) -> None:
        blockingCallFromThread(reactor, self.clock.advance, seconds)


class RabbitMQTests(FeatureCases, TestCase):
    """The same cases against a private RabbitMQ node."""

    skip = rabbitmq_missing()

    def setUp(self) -> None:
        # Started from the reactor's thread: the node ends with the thread
        # that started it.
        self.port = shared_rabbitmq().port

    def elapse(self, seconds: float) -> None:
        wait_on_node_clock(self.port, seconds, _PATIENCE)
