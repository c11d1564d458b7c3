"""Consumers offline: async iteration, callbacks, and backpressure on the transport."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.testing.scripted import ScriptedServer
from txamqp09.client.channel import Channel
from txamqp09.client.consumer import Consumer
from txamqp09.client.errors import ChannelClosed, ConnectionClosed
from txamqp09.wire.frames import content_frames, method_frame


class ConsumerTestCase(SynchronousTestCase):
    def setUp(self) -> None:
        self.server = ScriptedServer()
        self.server.open()
        self.channel: Channel = self.server.open_channel(1)

    def consume(self, callback: Any = None, max_backlog: int = 1000) -> Consumer:
        consuming = self.channel.basic_consume("q", callback, consumer_tag="c", max_backlog=max_backlog)
        self.server.send(1, self.server.spec.BasicConsumeOk(consumer_tag="c"))
        self.server.methods()
        return self.successResultOf(consuming)

    def deliver(self, tag: int, body: bytes = b"m") -> None:
        self.server.send_content(1, self.server.spec.BasicDeliver(consumer_tag="c", delivery_tag=tag), body)

    def next(self, consumer: Consumer) -> Deferred[Any]:
        return ensureDeferred(consumer.__anext__())

    @property
    def paused(self) -> bool:
        return self.server.transport.producerState == "paused"


class IterationTests(ConsumerTestCase):
    def test_buffered_then_awaited(self) -> None:
        consumer = self.consume()
        self.deliver(1, b"a")
        self.assertEqual(self.successResultOf(self.next(consumer)).body, b"a")
        waiting = self.next(consumer)
        self.assertNoResult(waiting)
        self.deliver(2, b"b")
        self.assertEqual(self.successResultOf(waiting).body, b"b")

    def test_async_for_until_cancelled(self) -> None:
        consumer = self.consume()

        async def collect() -> list[bytes]:
            bodies = []
            async for message in consumer:
                bodies.append(message.body)
                message.ack()
            return bodies

        collected = ensureDeferred(collect())
        self.deliver(1, b"a")
        self.deliver(2, b"b")
        cancelling = consumer.cancel()
        self.deliver(3, b"c")  # in flight before cancel-ok: still delivered
        self.server.send(1, self.server.spec.BasicCancelOk(consumer_tag="c"))
        self.successResultOf(cancelling)
        self.assertEqual(self.successResultOf(collected), [b"a", b"b", b"c"])
        self.assertEqual(self.server.names(), ["basic.ack", "basic.ack", "basic.cancel", "basic.ack"])

    def test_buffer_drains_before_the_end(self) -> None:
        consumer = self.consume()
        self.deliver(1)
        self.server.send(1, self.server.spec.BasicCancel(consumer_tag="c", nowait=True))
        self.assertEqual(self.successResultOf(self.next(consumer)).delivery_tag, 1)
        self.failureResultOf(self.next(consumer), StopAsyncIteration)

    def test_channel_close_raises_in_the_loop(self) -> None:
        consumer = self.consume()
        waiting = self.next(consumer)
        self.server.send(1, self.server.spec.ChannelClose(reply_code=404, reply_text="NOT_FOUND - queue deleted"))
        self.assertEqual(self.failureResultOf(waiting, ChannelClosed).value.reply_code, 404)
        self.failureResultOf(self.next(consumer), ChannelClosed)

    def test_connection_loss_raises_in_the_loop(self) -> None:
        consumer = self.consume()
        waiting = self.next(consumer)
        self.server.lose()
        self.failureResultOf(waiting, ConnectionClosed)

    def test_client_close_ends_the_loop(self) -> None:
        consumer = self.consume()
        waiting = self.next(consumer)
        self.channel.close()
        self.failureResultOf(waiting, StopAsyncIteration)

    def test_one_awaiter_at_a_time(self) -> None:
        consumer = self.consume()
        self.next(consumer)
        self.failureResultOf(self.next(consumer), RuntimeError)

    def test_callback_consumer_is_not_iterable(self) -> None:
        consumer = self.consume(lambda message: None)
        self.assertRaises(TypeError, consumer.__aiter__)


class BackpressureTests(ConsumerTestCase):
    def test_slow_iterator_pauses_reading(self) -> None:
        consumer = self.consume(max_backlog=4)
        for tag in range(1, 4):
            self.deliver(tag)
        self.assertFalse(self.paused)
        self.deliver(4)
        self.assertTrue(self.paused)
        self.assertEqual(consumer.backlog, 4)
        self.next(consumer)
        self.assertTrue(self.paused)
        self.next(consumer)
        self.assertFalse(self.paused)

    def test_unfinished_callbacks_pause_reading(self) -> None:
        working: list[Deferred[None]] = []

        def handle(message: Any) -> Deferred[None]:
            working.append(Deferred())
            return working[-1]

        consumer = self.consume(handle, max_backlog=2)
        self.deliver(1)
        self.deliver(2)
        self.assertTrue(self.paused)
        self.assertEqual(consumer.backlog, 2)
        working[0].callback(None)
        self.assertFalse(self.paused)

    def test_coroutine_callbacks_count(self) -> None:
        gate: Deferred[None] = Deferred()

        async def handle(message: Any) -> None:
            await gate
            message.ack()

        consumer = self.consume(handle, max_backlog=1)
        self.deliver(1)
        self.assertTrue(self.paused)
        gate.callback(None)
        self.assertFalse(self.paused)
        self.assertEqual(consumer.backlog, 0)
        self.assertEqual(self.server.names(), ["basic.ack"])

    def test_failing_callbacks_are_logged_and_counted(self) -> None:
        def handle(message: Any) -> None:
            raise ValueError("boom")

        async def handle_later(message: Any) -> None:
            raise KeyError("later")

        self.consume(handle)
        self.deliver(1)
        self.assertEqual(len(self.flushLoggedErrors(ValueError)), 1)
        self.channel.basic_consume("q", handle_later, consumer_tag="d")
        self.server.send_content(1, self.server.spec.BasicDeliver(consumer_tag="d", delivery_tag=2), b"m")
        self.assertEqual(len(self.flushLoggedErrors(KeyError)), 1)
        self.assertEqual(self.channel.consumers["d"].backlog, 0)

    def test_two_consumers_hold_reading_together(self) -> None:
        first = self.consume(max_backlog=1)
        self.channel.basic_consume("q", consumer_tag="d", max_backlog=1)
        self.server.send(1, self.server.spec.BasicConsumeOk(consumer_tag="d"))
        second = self.channel.consumers["d"]
        self.deliver(1)
        self.server.send_content(1, self.server.spec.BasicDeliver(consumer_tag="d", delivery_tag=2), b"m")
        self.next(first)
        self.assertTrue(self.paused)
        self.next(second)
        self.assertFalse(self.paused)

    def test_ending_releases_reading(self) -> None:
        self.consume(max_backlog=1)
        self.deliver(1)
        self.assertTrue(self.paused)
        self.server.send(1, self.server.spec.BasicCancel(consumer_tag="c", nowait=True))
        self.assertFalse(self.paused)


class DeliveryPathTests(ConsumerTestCase):
    """Deliveries reach consumers however the bytes are cut; bad content still fails."""

    def delivery_bytes(self, tag: int, body: bytes, frame_max: int = 131072) -> bytes:
        spec = self.server.spec
        return content_frames(1, spec.BasicDeliver(consumer_tag="c", delivery_tag=tag), spec.BasicProperties(message_id=str(tag)), body, frame_max)

    def test_every_cut_of_the_stream(self) -> None:
        consumer = self.consume()
        stream = self.delivery_bytes(1, b"a" * 10) + self.delivery_bytes(2, b"") + self.delivery_bytes(3, b"b" * 9000, 4096)
        # Every cut in the small deliveries and the big one's headers, then some.
        cuts = [*range(1, 400), *range(400, len(stream), 101)]
        for cut in cuts:
            self.server.client.dataReceived(stream[:cut])
            self.server.client.dataReceived(stream[cut:])
        received = [self.successResultOf(self.next(consumer)) for _ in range(3 * len(cuts))]
        self.assertEqual({(message.delivery_tag, message.body, message.properties.message_id) for message in received},
                         {(1, b"a" * 10, "1"), (2, b"", "2"), (3, b"b" * 9000, "3")})

    def test_other_channels_frame_in_between(self) -> None:
        consumer = self.consume()
        self.server.open_channel(2)
        delivery = self.delivery_bytes(1, b"x")
        method_end = delivery.index(b"\xce") + 1
        self.server.client.dataReceived(delivery[:method_end] + method_frame(2, self.server.spec.ChannelFlow(active=True)) + delivery[method_end:])
        self.assertEqual(self.server.names(), ["channel.flow-ok"])
        self.assertEqual(self.successResultOf(self.next(consumer)).body, b"x")

    def test_body_longer_than_announced_fails(self) -> None:
        self.consume()
        delivery = self.delivery_bytes(1, b"xy")
        header_start = delivery.index(b"\xce") + 1
        tampered = delivery[: header_start + 7 + 4] + (1).to_bytes(8, "big") + delivery[header_start + 19 :]
        self.server.client.dataReceived(tampered)
        [(_, close)] = self.server.methods()
        self.assertEqual((close.NAME, close.reply_code), ("connection.close", 501))

    def test_delivery_to_a_closing_channel_is_dropped(self) -> None:
        consumer = self.consume()
        self.channel.close()
        self.server.client.dataReceived(self.delivery_bytes(1, b"x"))
        self.assertEqual(consumer.backlog, 0)


class AckCoalescingTests(ConsumerTestCase):
    """Acks made in order while output is held become one basic.ack with multiple."""

    def acks(self) -> list[tuple[str, int, bool]]:
        return [
            (method.NAME, method.delivery_tag, getattr(method, "multiple", False))
            for _, method in self.server.methods()
        ]

    def deliver_all(self, tags: range) -> None:
        spec = self.server.spec
        self.server.client.dataReceived(
            b"".join(
                content_frames(1, spec.BasicDeliver(consumer_tag="c", delivery_tag=tag), spec.BasicProperties(), b"m", 131072)
                for tag in tags
            )
        )

    def test_in_one_read_one_ack(self) -> None:
        self.consume(lambda message: message.ack())
        self.deliver_all(range(1, 4))
        self.assertEqual(self.acks(), [("basic.ack", 3, True)])
        self.deliver_all(range(4, 6))
        self.assertEqual(self.acks(), [("basic.ack", 5, True)])

    def test_acks_already_written_stay_written(self) -> None:
        self.consume(lambda message: message.ack())
        for tag in range(1, 3):
            self.deliver(tag)
        self.assertEqual(self.acks(), [("basic.ack", 1, True), ("basic.ack", 2, True)])

    def test_out_of_order_acks_are_single(self) -> None:
        consumer = self.consume()
        self.deliver_all(range(1, 4))
        first, second, third = (self.successResultOf(self.next(consumer)) for _ in range(3))
        second.ack()
        first.ack()
        third.ack()
        self.assertEqual(self.acks(), [("basic.ack", 2, False), ("basic.ack", 1, True), ("basic.ack", 3, False)])

    def test_refusals_in_between(self) -> None:
        def settle(message: Any) -> None:
            if message.delivery_tag == 2:
                message.reject(requeue=False)
            else:
                message.ack()

        self.consume(settle)
        self.deliver_all(range(1, 5))
        self.assertEqual(
            self.acks(), [("basic.ack", 1, True), ("basic.reject", 2, False), ("basic.ack", 4, True)]
        )

    def test_no_ack_deliveries_count_as_settled(self) -> None:
        self.channel.basic_consume("q", lambda message: None, consumer_tag="auto", no_ack=True)
        self.server.send(1, self.server.spec.BasicConsumeOk(consumer_tag="auto"))
        self.consume(lambda message: message.ack())
        self.server.send_content(1, self.server.spec.BasicDeliver(consumer_tag="auto", delivery_tag=1), b"m")
        self.deliver(2)
        self.assertEqual(self.acks(), [("basic.ack", 2, True)])
