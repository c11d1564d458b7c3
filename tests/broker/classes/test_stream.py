"""The stream class over loopback: publish, consume, and the lossy backlog."""

from __future__ import annotations

from tests.broker.classes.support import Collector, LiveClassTestCase
from tests.client.support import inline
from txamqp09.broker.classes.stream import StreamState
from txamqp09.client.classes import StreamClass


class StreamTests(LiveClassTestCase):
    """On 0-9."""

    @inline
    async def test_publish_and_consume(self) -> None:
        channel = await self.channel()
        streams = StreamClass(channel)
        queue = await self.declare(channel, "frames")
        collector = Collector(3)
        consumer = await streams.consume(queue, collector)
        for number in range(3):
            streams.publish(b"frame %d" % number, routing_key=queue, properties={"priority": number})
        messages = await collector.done
        self.assertEqual([message.body for message in messages], [b"frame 0", b"frame 1", b"frame 2"])
        self.assertEqual([message.properties.priority for message in messages], [0, 1, 2])
        self.assertTrue(all(message.settled for message in messages))
        self.assertEqual(messages[0].method.NAME, "stream.deliver")
        self.assertEqual(messages[0].method.queue, queue)
        await consumer.cancel()
        self.assertEqual(self.queue(queue).consumer_count, 0)

    @inline
    async def test_slow_consumer_loses_low_priority_messages(self) -> None:
        """With a backlog of one message and a rate of 100 octets/s, the first
        100-octet message goes at once, the next waits a second, and what
        arrives meanwhile replaces it only with a priority at least as high."""
        channel = await self.channel()
        streams = StreamClass(channel)
        queue = await self.declare(channel, "lossy")
        await streams.qos(prefetch_count=1, consume_rate=100)
        collector = Collector(2)
        await streams.consume(queue, collector)
        for name, priority in ((b"a", 0), (b"b", 0), (b"c", 5), (b"d", 0)):
            streams.publish(name * 100, routing_key=queue, properties={"priority": priority})
        first, second = await collector.done
        self.assertEqual((first.body[:1], second.body[:1]), (b"a", b"c"))
        self.assertEqual(self.server_classes().state(StreamState).dropped, 2)
        self.assertEqual(self.queue(queue).message_count, 0)

    @inline
    async def test_publishers_are_not_held_by_a_paused_consumer(self) -> None:
        """While the consumer's connection takes nothing, messages are dropped,
        not queued."""
        consumer_channel = await self.channel()
        queue = await self.declare(consumer_channel, "paused")
        await StreamClass(consumer_channel).consume(queue, Collector(1))
        (server_connection,) = self.server.factory.connections
        server_connection.pauseProducing()
        publisher = StreamClass(await self.channel())
        for _ in range(1500):
            publisher.publish(b"p" * 10, routing_key=queue)
        await self.round_trip(publisher.channel)
        state = next(iter(server_connection.channels.values())).classes.state(StreamState)
        self.assertEqual(self.queue(queue).message_count, 0)
        self.assertEqual(state.dropped, 500)
        server_connection.resumeProducing()

    @inline
    async def test_returned_when_mandatory_and_unroutable(self) -> None:
        channel = await self.channel()
        returned: list = []
        channel.return_handler = returned.append
        StreamClass(channel).publish(b"gone", routing_key="nowhere", mandatory=True)
        await self.round_trip(channel)
        (message,) = returned
        self.assertEqual((message.method.NAME, message.method.reply_code), ("stream.return", 312))


class StreamTests08(StreamTests):
    """The same on 0-8."""

    version = "0-8"
