"""The data source's AMQP work (:mod:`txamqp09.spark.amqp`) against this
project's broker in this process, without Spark."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import reactor
from twisted.trial.unittest import SkipTest, TestCase

from tests.client.support import inline
from tests.spark.session import arrow_missing
from txamqp09.client import Channel, connect
from txamqp09.testing.broker import LoopbackBroker

if TYPE_CHECKING:
    from txamqp09.spark.amqp import StreamRange


class _BrokerTestCase(TestCase):
    """Cases with this project's broker in this process."""

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


class StreamRangeTests(_BrokerTestCase):

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


class DrainTests(_BrokerTestCase):
    async def queue(self, messages: int) -> Channel:
        """Queue "work" holding *messages* messages: bodies b"0", b"1"...,
        every third with headers, every other with a message id."""
        channel = await self.channel()
        await channel.queue_declare("work")
        for number in range(messages):
            channel.basic_publish(
                b"%d" % number, routing_key="work",
                properties={"headers": {"n": number, "x-stream-offset": 7} if number % 3 == 0 else None,
                            "message_id": None if number % 2 else f"id-{number}"},
            )
        await channel.basic_qos(0)
        return channel

    async def drain(self, limit: int, rows: int, acknowledge: bool = True) -> list[list[dict[str, object]]]:
        """The rows of each take of a drain of "work"."""
        from txamqp09.spark.amqp import Drain

        draining = await Drain.open(self.broker.url, "work", limit, rows)
        takes = []
        try:
            while columns := await draining.take():
                takes.append([row for batch in columns.record_batches() for row in batch.to_pylist()])
            if acknowledge:
                await draining.acknowledge()
        finally:
            await draining.close()
        return takes

    @inline
    async def test_takes_up_to_the_limit(self) -> None:
        """A drain takes *limit* messages in order, in takes of at least
        *rows* (but the last); acknowledged, they leave the queue."""
        channel = await self.queue(30)
        takes = await self.drain(20, rows=7)
        self.assertTrue(all(len(take) >= 7 for take in takes[:-1]), [len(take) for take in takes])
        rows = [row for take in takes for row in take]
        self.assertEqual([row["body"] for row in rows], [b"%d" % number for number in range(20)])
        self.assertEqual(rows[3]["headers"], [("n", "3"), ("x-stream-offset", "7")])
        self.assertEqual(rows[3]["offset"], 7)
        self.assertEqual((rows[1]["headers"], rows[1]["offset"], rows[1]["properties"]), ([], None, []))
        self.assertEqual(rows[2]["properties"], [("message_id", "id-2")])
        self.assertEqual((rows[0]["exchange"], rows[0]["routing_key"], rows[0]["redelivered"]), ("", "work", False))
        declared = await channel.queue_declare("work", passive=True)
        self.assertEqual(declared.message_count, 10)

    @inline
    async def test_ends_when_empty(self) -> None:
        """A limit beyond what the queue holds ends with what it has."""
        channel = await self.queue(5)
        rows = [row for take in await self.drain(1000, rows=100) for row in take]
        self.assertEqual([row["body"] for row in rows], [b"%d" % number for number in range(5)])
        self.assertEqual((await channel.queue_declare("work", passive=True)).message_count, 0)

    @inline
    async def test_unacknowledged_come_again(self) -> None:
        """Messages of a drain that did not acknowledge go back, marked redelivered."""
        await self.queue(4)
        await self.drain(3, rows=10, acknowledge=False)
        rows = [row for take in await self.drain(10, rows=10) for row in take]
        self.assertEqual([(row["body"], row["redelivered"]) for row in rows],
                         [(b"0", True), (b"1", True), (b"2", True), (b"3", False)])

class PublisherTests(_BrokerTestCase):
    @inline
    async def test_encoded_and_row_chunks_in_order_all_confirmed(self) -> None:
        """Chunks with encoded properties and chunks of rows, through a
        window of two chunks: every message arrives in order with its
        properties, and close counts the confirmed ones."""
        from pyarrow import RecordBatch, array, binary, map_, string

        from txamqp09.spark.amqp import Publisher
        from txamqp09.spark.arrow import BatchPublications

        channel = await self.channel()
        await channel.queue_declare("out", durable=True)
        publisher = await Publisher.open(self.broker.url)
        publications = BatchPublications("", "out", {"delivery_mode": 2}, "w-0", publisher.properties_class)
        plain = RecordBatch.from_pydict({"body": array([b"%d" % n for n in range(700)], binary())})
        typed = RecordBatch.from_pydict({
            "body": array([b"p"] * 3, binary()),
            "properties": array([[("priority", "4")]] * 3, map_(string(), string())),
        })
        encoded = publications.encoded(plain)
        assert encoded is not None
        properties, bodies = encoded
        for start in range(0, 700, 300):
            await publisher.publish_encoded("", "out", properties[start:start + 300], bodies[start:start + 300])
        await publisher.publish(list(publications.of(typed)))
        self.assertEqual(await publisher.close(), 703)
        self.assertEqual((await channel.queue_declare("out", passive=True)).message_count, 703)
        received = []
        for _ in range(703):
            got = await channel.basic_get("out", no_ack=True)
            assert got is not None
            received.append((got.body, got.properties.message_id, got.properties.delivery_mode, got.properties.priority))
        self.assertEqual(received, [(b"%d" % n, f"w-0-{n}", 2, None) for n in range(700)]
                         + [(b"p", f"w-0-{n}", 2, 4) for n in range(700, 703)])


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


def _child_stdout(arguments: list[str]) -> str:
    """What Python run with *arguments* in a fresh process, with this tree
    on its path, prints (it must end within 60 s, successfully)."""
    import os
    import subprocess
    import sys

    import txamqp09

    tree = os.path.dirname(os.path.dirname(os.path.abspath(txamqp09.__file__)))
    return subprocess.run([sys.executable, *arguments], capture_output=True, text=True, check=True,
                          timeout=60, cwd=tree, env={**os.environ, "PYTHONPATH": tree}).stdout


def _freeze_counts(program: str) -> list[int]:
    """What *program*, run in a fresh Python process with this tree on its
    path, prints: numbers, on one line."""
    return [int(number) for number in _child_stdout(["-c", program]).split()]


def _child_output(arguments: list[str]) -> Any:
    """The JSON the last line of :func:`_child_stdout` holds."""
    import json

    return json.loads(_child_stdout(arguments).splitlines()[-1])


class SettledHeapTests(TestCase):
    def assert_frozen_once(self, setup: str, call: str) -> None:
        """In a fresh process, after *setup*: nothing is frozen before the
        first *call*, more than 10,000 objects are after it, and a second
        call (with more objects alive) freezes nothing more."""
        before, first, later = _freeze_counts(
            f"import gc\n{setup}\n"
            f"before = gc.get_freeze_count()\n{call}\n"
            "first = gc.get_freeze_count()\n"
            f"garbage = [[] for _ in range(1000)]\n{call}\n"
            "print(before, first, gc.get_freeze_count())\n"
        )
        self.assertEqual(before, 0)
        self.assertGreater(first, 10_000)
        self.assertEqual(later, first)

    def test_first_call_freezes_what_lives(self) -> None:
        """The first call into the reactor of a process leaves the objects
        alive by then out of later collections; later calls change nothing."""
        self.assert_frozen_once("from txamqp09.spark.reactor import call_in_reactor", "call_in_reactor(lambda: None)")

    def test_schema_freezes_what_lives(self) -> None:
        """The data source's schema(), which Spark asks in the worker that
        creates it, does the same (once)."""
        from tests.spark.session import spark_missing

        if spark_missing():
            raise SkipTest(spark_missing())
        self.assert_frozen_once(
            "from txamqp09.spark.source import AMQPDataSource\nsource = AMQPDataSource({})", "source.schema()"
        )


class StoppedReadTests(TestCase):
    """A read that Spark stops after its first batches (``limit``, ``take``,
    a failing task) cleans up at once: its connection closes, nothing is
    left waiting in the reactor or running in a thread, and a classic
    queue's messages, unacknowledged, are all back in the queue.

    Each case runs :mod:`tests.spark.partial` in a process of its own (the
    read calls into a reactor thread of its process, which trial's reactor
    cannot be)."""

    skip = arrow_missing()

    def stopped(self, kind: str, how: str) -> None:
        from tests.spark.partial import BATCHES, MESSAGES, ROWS

        outcome = _child_output(["-m", "tests.spark.partial", kind, how])
        self.assertGreaterEqual(outcome["taken"], BATCHES * ROWS)
        self.assertLess(outcome["taken"], MESSAGES)
        self.assertEqual(
            (outcome["ready"], outcome["consumers"], outcome["calls"], outcome["threads"]), (MESSAGES, 0, [], [])
        )

    def test_stream_closed(self) -> None:
        self.stopped("stream", "close")

    def test_stream_consumer_raises(self) -> None:
        self.stopped("stream", "raise")

    def test_stream_collected_in_reactor_thread(self) -> None:
        """Closed by the garbage collector in the reactor thread, the read
        starts closing its connection there instead of waiting for the
        reactor thread (itself) for ever."""
        self.stopped("stream", "collect")

    def test_drain_closed(self) -> None:
        self.stopped("classic", "close")

    def test_drain_consumer_raises(self) -> None:
        self.stopped("classic", "raise")

    def test_drain_collected_in_reactor_thread(self) -> None:
        self.stopped("classic", "collect")


class ReactorThreadTests(TestCase):
    def test_call_from_the_reactor_thread_is_refused(self) -> None:
        """call_in_reactor in the reactor thread raises at once (it would
        wait for itself for ever)."""
        (refused,) = _child_stdout([
            "-c",
            "from txamqp09.spark.reactor import call_in_reactor\n"
            "try:\n"
            "    call_in_reactor(call_in_reactor, print)\n"
            "except RuntimeError as error:\n"
            "    print('wait for itself' in str(error))\n",
        ]).split()
        self.assertEqual(refused, "True")


class QueueFeedTests(_BrokerTestCase):
    @inline
    async def test_close_ends_a_wait_and_returns_the_unacknowledged(self) -> None:
        """Closing the feed while a wait_for waits fires the wait with what
        arrived, as does a wait_for after (no timer is left behind: trial
        fails a test that leaves one); every unacknowledged delivery is
        back in the queue."""
        from txamqp09.spark.amqp import QueueFeed

        channel = await self.channel()
        await channel.queue_declare("work")
        for number in range(5):
            channel.basic_publish(b"%d" % number, routing_key="work")
        await channel.basic_qos(0)
        feed, ready = await QueueFeed.open(self.broker.url, "work", prefetch=10)
        self.assertEqual(ready, 5)
        self.assertEqual(await feed.wait_for(5, timeout=30), 5)
        await feed.ack_through(2)
        waiting = feed.wait_for(100, timeout=30)
        await feed.close()
        self.assertEqual(await waiting, 5)
        self.assertEqual(await feed.wait_for(100, timeout=30), 5)
        declared = await channel.queue_declare("work", passive=True)
        self.assertEqual((declared.message_count, declared.consumer_count), (3, 0))
