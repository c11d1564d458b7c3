"""Consumers of these classes on stream queues (``x-queue-type: stream``)."""

from __future__ import annotations

from tests.broker.classes.support import Collector, LiveClassTestCase
from tests.client.support import fails, inline
from txamqp09.client import ConnectionClosed
from txamqp09.client.classes import FileClass, MessageClass, StreamClass


class StreamQueueTests(LiveClassTestCase):
    """On 0-9, whose consume methods carry the ``filter`` table."""

    async def stream_queue(self, channel) -> str:  # type: ignore[no-untyped-def]
        await channel.queue_declare("log", durable=True, arguments={"x-queue-type": "stream"})
        return "log"

    @inline
    async def test_file_consumer_reads_from_the_first_offset(self) -> None:
        channel = await self.channel()
        queue = await self.stream_queue(channel)
        await MessageClass(channel).transfer(b"entry 0", routing_key=queue)
        files = FileClass(channel)
        await files.qos(prefetch_count=10)
        collector = Collector()
        await files.consume(queue, collector, arguments={"x-stream-offset": "first"})
        (message,) = await collector.done
        self.assertEqual(message.body, b"entry 0")
        message.ack()

    @inline
    async def test_stream_class_consumers_are_refused_clearly(self) -> None:
        """Stream-class deliveries are never acknowledged; stream queues need
        acknowledgements and refuse no-ack consumers with 540 (a connection
        error, as RabbitMQ's)."""
        channel = await self.channel()
        queue = await self.stream_queue(channel)
        error = await fails(StreamClass(channel).consume(queue, Collector()), ConnectionClosed)
        self.assertEqual(error.reply_code, 540)
        self.assertIn("no-ack", error.reply_text)
