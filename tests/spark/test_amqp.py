"""The data source's AMQP work (:mod:`txamqp09.spark.amqp`) against this
project's broker in this process, without Spark."""

from __future__ import annotations

from typing import TYPE_CHECKING

from twisted.internet import reactor
from twisted.trial.unittest import TestCase

from tests.client.support import inline
from tests.spark.session import arrow_missing
from txamqp09.client import Channel, connect
from txamqp09.testing.broker import LoopbackBroker

if TYPE_CHECKING:
    from txamqp09.spark.amqp import StreamRange


class StreamRangeTests(TestCase):
    timeout = 30
    skip = arrow_missing()

    def setUp(self) -> None:
        self.broker = LoopbackBroker()
        self.broker.start()
        self.addCleanup(self.broker.stop)

    async def channel(self) -> Channel:
        connection = await connect(reactor, self.broker.url)
        self.addCleanup(connection.disconnect)
        return await connection.channel()

    async def stream(self, messages: int) -> str:
        """A stream queue holding *messages* messages, bodies b"0", b"1"..."""
        channel = await self.channel()
        await channel.queue_declare("log", durable=True, arguments={"x-queue-type": "stream"})
        await channel.confirm_select()
        for number in range(messages):
            channel.basic_publish(b"%d" % number, routing_key="log")
        await channel.basic_qos(0)
        return "log"

    async def take_all(self, reading: StreamRange) -> list[list[int]]:
        """The offsets of each take until the range is complete."""
        takes = []
        try:
            while columns := await reading.take():
                takes.append([int(body) for batch in columns.record_batches() for body in batch["body"].to_pylist()])
        finally:
            await reading.close()
        return takes

    @inline
    async def test_takes_span_many_deliveries(self) -> None:
        """With a prefetch window of 4, each take but the last still holds
        at least 25 deliveries (the range acknowledges as they arrive, so
        the broker keeps sending): all of the range, in order, none outside it."""
        from txamqp09.spark.amqp import StreamRange

        queue = await self.stream(200)
        reading = await StreamRange.open(self.broker.url, queue, 10, 190, prefetch=4, rows=25)
        takes = await self.take_all(reading)
        self.assertEqual([offset for take in takes for offset in take], list(range(10, 190)))
        self.assertTrue(all(len(take) >= 25 for take in takes[:-1]), [len(take) for take in takes])

    @inline
    async def test_short_range(self) -> None:
        """A range shorter than a take ends with what it has; an empty one at once."""
        from txamqp09.spark.amqp import StreamRange

        queue = await self.stream(10)
        reading = await StreamRange.open(self.broker.url, queue, 3, 6, prefetch=100, rows=1000)
        self.assertEqual(await self.take_all(reading), [[3, 4, 5]])
        empty = await StreamRange.open(self.broker.url, queue, 6, 6, prefetch=100, rows=1000)
        self.assertEqual(await self.take_all(empty), [])


    @inline
    async def test_not_a_stream(self) -> None:
        """Reading a classic queue as a stream fails with a reason to act on."""
        from txamqp09.spark.amqp import StreamRange
        from txamqp09.spark.deliveries import NotAStream

        channel = await self.channel()
        await channel.queue_declare("plain")
        channel.basic_publish(b"a", routing_key="plain")
        await channel.basic_qos(0)
        reading = await StreamRange.open(self.broker.url, "plain", 0, 10, prefetch=10, rows=5)
        try:
            with self.assertRaises(NotAStream) as raised:
                await reading.take()
        finally:
            await reading.close()
        self.assertIn("queueType", str(raised.exception))

class FewerCollectionsTests(TestCase):
    def test_threshold_raised_inside_and_restored_after(self) -> None:
        import gc

        from txamqp09.spark.reactor import TASK_GC_THRESHOLD, fewer_collections

        before = gc.get_threshold()
        self.addCleanup(gc.set_threshold, *before)
        gc.set_threshold(500, 7, 9)
        with fewer_collections():
            self.assertEqual(gc.get_threshold(), (TASK_GC_THRESHOLD, 7, 9))
        self.assertEqual(gc.get_threshold(), (500, 7, 9))
        with self.assertRaises(RuntimeError), fewer_collections():
            raise RuntimeError("a task failed")
        self.assertEqual(gc.get_threshold(), (500, 7, 9))
        gc.set_threshold(2 * TASK_GC_THRESHOLD, 7, 9)
        with fewer_collections():
            self.assertEqual(gc.get_threshold(), (2 * TASK_GC_THRESHOLD, 7, 9))
