"""The 0-9 message class over loopback: transfer, consume, get, references, checkpoints."""

from __future__ import annotations

from tests.broker.classes.support import Collector, LiveClassTestCase
from tests.client.support import fails, inline
from txamqp09.broker.classes.message import MessageState
from txamqp09.client import ChannelClosed
from txamqp09.client.classes import MessageClass, MessageRejected, TransferredMessage


def _raise(error: Exception) -> None:
    raise error


class MessageTests(LiveClassTestCase):
    """On 0-9, the only version with the message class."""

    @inline
    async def test_transfer_consume_ok(self) -> None:
        channel = await self.channel()
        messages = MessageClass(channel)
        queue = await self.declare(channel, "inbox")
        answer = await messages.transfer(
            b"hello", routing_key=queue, message_id="m-1", content_type="text/plain",
            application_headers={"k": 1}, delivery_mode=2,
        )
        self.assertEqual(answer.NAME, "message.ok")
        collector = Collector()
        await messages.consume(queue, collector, destination="mine")
        (message,) = await collector.done
        self.assertIsInstance(message, TransferredMessage)
        self.assertEqual(message.body, b"hello")
        self.assertEqual(message.consumer_tag, "mine")
        self.assertEqual(
            (message.method.message_id, message.method.content_type, message.headers),
            ("m-1", "text/plain", {"k": 1}),
        )
        self.assertEqual(message.method.routing_key, queue)
        self.assertEqual(len(self.server_classes().state(MessageState).session.unacked), 1)
        message.ack()
        await self.round_trip(channel)
        self.assertEqual(self.server_classes().state(MessageState).session.unacked, {})
        self.assertEqual(self.queue(queue).message_count, 0)

    @inline
    async def test_answers_go_in_transfer_order(self) -> None:
        """Answering the second transfer first waits for the first's answer."""
        channel = await self.channel()
        messages = MessageClass(channel)
        queue = await self.declare(channel, "ordered")
        for body in (b"one", b"two"):
            await messages.transfer(body, routing_key=queue)
        collector = Collector(2)
        await messages.consume(queue, collector)
        first, second = await collector.done
        second.reject()
        await self.round_trip(channel)
        self.assertEqual(len(self.server_classes().state(MessageState).session.unacked), 2)
        first.ack()
        await self.round_trip(channel)
        self.assertEqual(self.server_classes().state(MessageState).session.unacked, {})
        self.assertEqual(self.queue(queue).message_count, 0)

    @inline
    async def test_cancel_ends_the_consumer(self) -> None:
        channel = await self.channel()
        messages = MessageClass(channel)
        queue = await self.declare(channel, "cancelled")
        consumer = await messages.consume(queue, Collector(), destination="d1")
        self.assertEqual(self.queue(queue).consumer_count, 1)
        await consumer.cancel()
        self.assertFalse(consumer.active)
        self.assertEqual(self.queue(queue).consumer_count, 0)
        await messages.transfer(b"stays", routing_key=queue)
        self.assertEqual(self.queue(queue).message_count, 1)

    @inline
    async def test_qos_holds_transfers_until_ok(self) -> None:
        channel = await self.channel()
        messages = MessageClass(channel)
        queue = await self.declare(channel, "paced")
        for body in (b"1", b"2"):
            await messages.transfer(body, routing_key=queue)
        await messages.qos(prefetch_count=1)
        collector = Collector(2)
        await messages.consume(queue, collector)
        await self.round_trip(channel)
        self.assertEqual([message.body for message in collector.messages], [b"1"])
        self.assertEqual(self.queue(queue).message_count, 1)
        collector.messages[0].ack()
        first, second = await collector.done
        self.assertEqual(second.body, b"2")
        second.ack()

    @inline
    async def test_get_ok_and_empty(self) -> None:
        channel = await self.channel()
        messages = MessageClass(channel)
        queue = await self.declare(channel, "gets")
        self.assertIsNone(await messages.get(queue))
        await messages.transfer(b"one", routing_key=queue)
        got = await messages.get(queue, destination="here")
        self.assertEqual((got.body, got.consumer_tag), (b"one", "here"))
        got.ack()
        self.assertIsNone(await messages.get(queue))

    @inline
    async def test_recover_redelivers(self) -> None:
        channel = await self.channel()
        messages = MessageClass(channel)
        queue = await self.declare(channel, "recovered")
        await messages.transfer(b"again", routing_key=queue)
        collector = Collector(2)
        await messages.consume(queue, collector)
        await messages.recover(requeue=False)
        first, second = await collector.done
        self.assertEqual((first.redelivered, second.redelivered), (False, True))
        first.ack()
        second.ack()

    @inline
    async def test_recover_on_transactional_channel_is_406(self) -> None:
        channel = await self.channel()
        await channel.tx_select()
        error = await fails(MessageClass(channel).recover(), ChannelClosed)
        self.assertEqual(error.reply_code, 406)

    @inline
    async def test_immediate_without_consumer_is_rejected(self) -> None:
        channel = await self.channel()
        queue = await self.declare(channel, "idle")
        error = await fails(MessageClass(channel).transfer(b"now", routing_key=queue, immediate=True), MessageRejected)
        self.assertEqual(error.code, 313)
        self.assertEqual(self.queue(queue).message_count, 0)

    @inline
    async def test_transfer_to_missing_exchange_is_404(self) -> None:
        channel = await self.channel()
        error = await fails(MessageClass(channel).transfer(b"x", destination="no-such"), ChannelClosed)
        self.assertEqual(error.reply_code, 404)

    @inline
    async def test_reference_transfer_answered_at_close(self) -> None:
        channel = await self.channel()
        messages = MessageClass(channel)
        queue = await self.declare(channel, "refs")
        await messages.open(b"r1")
        await messages.append(b"r1", b"part one, ")
        sent = messages.transfer(routing_key=queue, reference=b"r1")
        await messages.append(b"r1", b"part two")
        self.assertFalse(sent.called)
        self.assertEqual(self.queue(queue).message_count, 0)
        await messages.close(b"r1")
        self.assertEqual((await sent).NAME, "message.ok")
        got = await messages.get(queue, no_ack=True)
        self.assertEqual(got.body, b"part one, part two")

    @inline
    async def test_append_to_unknown_reference_is_404(self) -> None:
        channel = await self.channel()
        error = await fails(MessageClass(channel).append(b"nope", b"x"), ChannelClosed)
        self.assertEqual(error.reply_code, 404)

    @inline
    async def test_checkpoint_resumes_on_another_connection(self) -> None:
        body = b"abcdefghij" * 3000
        first = await self.channel()
        queue = await self.declare(first, "checkpointed")
        messages = MessageClass(first)
        self.assertEqual(await messages.resume(b"big", "upload-1"), 0)
        await messages.append(b"big", body[:12000])
        await messages.checkpoint(b"big", "upload-1")
        await messages.append(b"big", body[12000:15000])
        await first.connection.disconnect()

        second = MessageClass(await self.channel())
        offset = await second.transfer_large(body, routing_key=queue, identifier="upload-1", chunk_size=5000)
        self.assertEqual(offset, 12000)
        got = await second.get(queue, no_ack=True)
        self.assertEqual(got.body, body)

    @inline
    async def test_basic_and_message_consumers_share_queues(self) -> None:
        channel = await self.channel()
        messages = MessageClass(channel)
        queue = await self.declare(channel, "shared")
        await messages.transfer(b"to basic", routing_key=queue, priority=3, reply_to="r")
        got = await channel.basic_get(queue, no_ack=True)
        self.assertEqual((got.body, got.properties.priority, got.properties.reply_to), (b"to basic", 3, "r"))
        channel.basic_publish(b"to message", routing_key=queue, properties={"correlation_id": "c"})
        fetched = await messages.get(queue)
        self.assertEqual((fetched.body, fetched.method.correlation_id), (b"to message", "c"))
        fetched.ack()


class LargeTransferTests(LiveClassTestCase):
    """A body larger than a frame goes to the client through a reference."""

    broker_options = {"frame_max": 8192}

    @inline
    async def test_large_body_by_reference(self) -> None:
        channel = await self.channel(frame_max=8192)
        messages = MessageClass(channel)
        queue = await self.declare(channel, "large")
        body = bytes(range(256)) * 100
        await messages.open(b"up")
        for start in range(0, len(body), 4000):
            await messages.append(b"up", body[start : start + 4000])
        sent = messages.transfer(routing_key=queue, reference=b"up")
        await messages.close(b"up")
        await sent
        collector = Collector()
        await messages.consume(queue, collector)
        (message,) = await collector.done
        self.assertEqual(message.body, body)
        message.ack()
        await self.round_trip(channel)
        self.assertEqual(self.queue(queue).message_count, 0)
        self.assertEqual(self.server_classes().state(MessageState).session.unacked, {})


class NotIn08Tests(LiveClassTestCase):
    """0-8 has no message class: the client says so before sending anything."""

    version = "0-8"

    @inline
    async def test_not_in_this_version(self) -> None:
        from txamqp09.client import NotInThisVersion

        channel = await self.channel()
        await fails(MessageClass(channel).transfer(b"x"), NotInThisVersion)

    @inline
    async def test_no_channel_resume(self) -> None:
        from txamqp09.client import NotInThisVersion

        connection = await self.connect()
        await fails(connection.channel(resume=b"amq.channel-x"), NotInThisVersion)
        self.assertEqual(connection.channels, {})
