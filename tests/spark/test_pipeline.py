"""The amqp09 data source in a local Spark session, against this project's
broker (in this process) and a private RabbitMQ node.

Spark's calls block, so they run in a thread (``deferToThread``) while the
reactor serves the broker and the test's own client. The restart tests run
the first half of a streaming query in a child process and kill it inside
a batch: after the batch's offsets are in the checkpoint, before its commit.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from twisted.internet import reactor
from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.protocol import Factory, ProcessProtocol, Protocol
from twisted.internet.threads import deferToThread
from twisted.internet.utils import getProcessOutputAndValue
from twisted.python.failure import Failure
from twisted.trial.unittest import TestCase

from tests.client.support import inline
from tests.spark.query import HOLD, MESSAGES_PER_BATCH, start_query
from tests.docs.guides import blocks
from tests.spark.session import ROOT, spark_missing, spark_session
from txamqp09.client import Channel, ClientConnection, connect
from txamqp09.testing.broker import LoopbackBroker
from txamqp09.testing.rabbitmq import rabbitmq_missing, shared_rabbitmq
from txamqp09.testing.waiting import NeverHappened, eventually

if TYPE_CHECKING:
    _TestCaseBase = TestCase
else:
    _TestCaseBase = object

#: Messages published before the first run of a restart test, and after.
BEFORE, AFTER = 10, 5


class _HoldListener(Protocol):
    """Calls the factory's ``held`` with this protocol when a held batch
    says so; :attr:`lost` fires when its connection ends."""

    def __init__(self) -> None:
        self.lost: Deferred[None] = Deferred()

    def dataReceived(self, data: bytes) -> None:
        self.factory.held(self)  # type: ignore[attr-defined]

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self.lost.callback(None)


class _QueryProcess(ProcessProtocol):
    """The child process that runs the first half of a streaming query."""

    def __init__(self) -> None:
        self.output = b""
        self.ended: Deferred[None] = Deferred()

    def outReceived(self, data: bytes) -> None:
        self.output = (self.output + data)[-20000:]

    errReceived = outReceived

    def processEnded(self, reason: Failure) -> None:
        reason.trap(ProcessDone, ProcessTerminated)
        self.ended.callback(None)


class PipelineTests(_TestCaseBase):
    """Cases that need a broker with stream queues; a subclass provides :meth:`url`."""

    timeout = 300

    def url(self) -> str:
        raise NotImplementedError

    async def channel(self) -> Channel:
        connection: ClientConnection = await connect(reactor, self.url())
        self.addCleanup(connection.disconnect)
        return await connection.channel()

    async def queue(self, queue_type: str) -> str:
        """A new durable queue of *queue_type*, deleted after the test."""
        name = f"spark-{queue_type}-{uuid.uuid4().hex[:8]}"
        channel = await self.channel()
        await channel.queue_declare(name, durable=True, arguments={"x-queue-type": queue_type})
        self.addCleanup(lambda: Deferred.fromCoroutine(self.delete_queues(name)))
        return name

    async def delete_queues(self, *queues: str) -> None:
        channel = await self.channel()
        for queue in queues:
            await channel.queue_delete(queue=queue)

    async def publish(self, queue: str, bodies: list[bytes]) -> None:
        """Publish *bodies* to *queue* with confirms."""
        channel = await self.channel()
        await channel.confirm_select()
        for body in bodies:
            await channel.basic_publish(body, routing_key=queue)

    async def counts(self, queue: str) -> tuple[int, int]:
        """(messages ready, consumers) of *queue*."""
        channel = await self.channel()
        declared = await channel.queue_declare(queue, passive=True)
        return declared.message_count, declared.consumer_count

    def spark(self, action: Callable[[Any], Any]) -> Deferred[Any]:
        """Run *action(spark)* in a thread, with the process's Spark session."""
        return deferToThread(lambda: action(spark_session()))

    def read(self, **options: str) -> Deferred[list[Any]]:
        """The rows of a batch read with *options* (and this broker's url)."""

        def read(spark: Any) -> list[Any]:
            reader = spark.read.format("amqp09").option("url", self.url())
            for name, value in options.items():
                reader = reader.option(name, value)
            return reader.load().collect()  # type: ignore[no-any-return]

        return self.spark(read)

    # -- batch -------------------------------------------------------------------

    @inline
    async def test_batch_write_then_drain(self) -> None:
        """A DataFrame written to a classic queue and read back: bodies,
        properties, headers, message ids; the read removes the messages."""
        queue = await self.queue("classic")
        records = [
            (f"record {number}".encode(), {"content_type": "text/plain"}, {"n": str(number)})
            for number in range(40)
        ]

        def write(spark: Any) -> None:
            frame = spark.createDataFrame(
                records, "body binary, properties map<string,string>, headers map<string,string>"
            ).repartition(3)
            (frame.write.format("amqp09").option("url", self.url()).option("routingKey", queue)
             .option("writeId", "job7").mode("append").save())

        await self.spark(write)
        self.assertEqual((await self.counts(queue))[0], len(records))
        rows = await self.read(queue=queue, numPartitions="3")
        self.assertEqual(sorted(row.body for row in rows), sorted(record[0] for record in records))
        for row in rows:
            number = int(row.body.split()[1])
            self.assertEqual(row.headers, {"n": str(number)})
            self.assertEqual(row.properties["content_type"], "text/plain")
            self.assertEqual(row.properties["delivery_mode"], "2")
            self.assertEqual((row.routing_key, row.exchange, row.offset, row.redelivered), (queue, "", None, False))
        ids = [row.properties["message_id"] for row in rows]
        self.assertEqual(len(set(ids)), len(records))
        self.assertEqual({tuple(id.split("-")[:1]) for id in ids}, {("job7",)})
        self.assertEqual({id.split("-")[1] for id in ids}, {"0", "1", "2"})
        self.assertEqual(await self.counts(queue), (0, 0))

    @inline
    async def test_batch_read_stream_between_offsets(self) -> None:
        """A stream read between two offsets, over three partitions, from
        the first offset to the tail, and from the tail (nothing); reading
        leaves the stream as it was."""
        queue = await self.queue("stream")
        await self.publish(queue, [b"event %d" % number for number in range(30)])
        rows = await self.read(
            queue=queue, queueType="stream", startingOffset="5", endingOffset="25", numPartitions="3"
        )
        self.assertEqual(sorted(row.offset for row in rows), list(range(5, 25)))
        self.assertEqual({row.body for row in rows}, {b"event %d" % row.offset for row in rows})
        self.assertEqual({row.headers["x-stream-offset"] for row in rows}, {str(row.offset) for row in rows})
        everything = await self.read(queue=queue, queueType="stream")
        self.assertEqual(sorted(row.offset for row in everything), list(range(30)))
        self.assertEqual(await self.read(queue=queue, queueType="stream", startingOffset="30"), [])

    # -- reads Spark stops early -------------------------------------------------

    #: Messages in the queue of a read that Spark stops early: several
    #: record batches (of 5,000 rows) per partition.
    STOPPED_MESSAGES = 20_000

    async def publish_many(self, queue: str, count: int) -> None:
        """Publish *count* messages (bodies b"0", b"1"...) to *queue*; return once all are confirmed."""
        channel = await self.channel()
        await channel.confirm_select()
        await gatherResults([channel.basic_publish(b"%d" % number, routing_key=queue) for number in range(count)])

    def stopped_reads(self, **options: str) -> Deferred[tuple[list[Any], list[Any]]]:
        """The rows of ``limit(10).collect()`` and of ``take(5)`` on a read
        with *options* (two partitions)."""

        def read(spark: Any) -> tuple[list[Any], list[Any]]:
            reader = spark.read.format("amqp09").option("url", self.url()).option("numPartitions", "2")
            for name, value in options.items():
                reader = reader.option(name, value)
            frame = reader.load()
            return frame.limit(10).collect(), frame.take(5)

        return self.spark(read)

    async def settled(self, queue: str) -> None:
        """Wait until *queue* has no consumer."""
        seen: list[tuple[int, int]] = []

        async def there() -> bool:
            seen.append(await self.counts(queue))
            return seen[-1][1] == 0

        try:
            await eventually(there, reactor, timeout=30, interval=0.05)
        except NeverHappened:
            self.fail(f"{queue} still has {seen[-1][1]} consumers")

    @inline
    async def test_limit_and_take_stop_a_stream_read(self) -> None:
        """limit and take on a stream read end with their rows, and their
        consumers are gone afterwards."""
        queue = await self.queue("stream")
        await self.publish_many(queue, self.STOPPED_MESSAGES)
        limited, taken = await self.stopped_reads(queue=queue, queueType="stream")
        self.assertEqual((len(limited), len(taken)), (10, 5))
        for row in limited + taken:
            self.assertEqual(row.body, b"%d" % row.offset)
        # A stream's message count is RabbitMQ's statistics: the consumers are what count here.
        await self.settled(queue)

    # -- streaming ---------------------------------------------------------------

    @inline
    async def test_streaming_write(self) -> None:
        """A streaming query from a stream queue into a classic queue:
        every message once, with ids from the query, batch and partition."""
        source = await self.queue("stream")
        target = await self.queue("classic")
        await self.publish(source, [b"in %d" % number for number in range(12)])
        checkpoint = self.mktemp()

        def run(spark: Any) -> str:
            query = (
                spark.readStream.format("amqp09").option("url", self.url()).option("queue", source)
                .option("queueType", "stream").option("startingOffset", "first")
                .option("maxMessagesPerTrigger", "5").load()
                .select("body").writeStream.format("amqp09").option("url", self.url())
                .option("routingKey", target).option("checkpointLocation", checkpoint)
                .trigger(availableNow=True).start()
            )
            query.awaitTermination()
            return str(query.id)

        query_id = await self.spark(run)
        rows = await self.read(queue=target)
        self.assertEqual(sorted(row.body for row in rows), sorted(b"in %d" % n for n in range(12)))
        batches = set()
        for row in rows:
            query, batch, partition, number = row.properties["message_id"].rsplit("-", 3)
            self.assertEqual(query, query_id)
            batches.add(int(batch))
        self.assertEqual(batches, {0, 1, 2})

    async def run_until_killed(self, queries: list[tuple[str, str, str, str]]) -> None:
        """Run *queries* (queue, type, checkpoint, output) in a child process
        until each is inside its batch holding :data:`HOLD`, then kill the
        child and everything it started."""
        holders: list[_HoldListener] = []
        all_held: Deferred[None] = Deferred()

        def held(holder: _HoldListener) -> None:
            holders.append(holder)
            if len(holders) == len(queries):
                all_held.callback(None)

        listening = Factory.forProtocol(_HoldListener)
        listening.held = held  # type: ignore[attr-defined]
        port = reactor.listenTCP(0, listening, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        child = _QueryProcess()
        arguments = [self.url(), str(port.getHost().port), *(",".join(query) for query in queries)]
        process = reactor.spawnProcess(
            child, "/usr/bin/setsid", ["setsid", sys.executable, "-m", "tests.spark.query", *arguments],
            env={**os.environ, "PYTHONPATH": ROOT}, path=ROOT,
        )

        def ended(_: None) -> None:
            if not all_held.called:
                output = child.output.decode(errors="replace")
                all_held.errback(AssertionError(f"the queries ended before their batches held:\n{output}"))

        child.ended.addCallback(ended)
        await all_held
        os.killpg(process.pid, signal.SIGKILL)
        await child.ended
        for holder in holders:
            await holder.lost

    def assertKilledBetweenOffsetsAndCommit(self, checkpoint: str) -> None:
        """The checkpoint has the held batch's offsets but not its commit."""
        batch = str(HOLD_INDEX // MESSAGES_PER_BATCH)
        self.assertIn(batch, os.listdir(Path(checkpoint, "offsets")))
        self.assertNotIn(batch, os.listdir(Path(checkpoint, "commits")))

    @inline
    async def test_restart_after_kill(self) -> None:
        """Streaming queries from a stream queue and a classic queue into
        parquet, killed between a batch's offsets and its commit, restarted
        after more messages came: every message of the stream exactly once;
        every message of the classic queue at least once, a message seen
        twice was redelivered, and nothing is left in the queue or
        unacknowledged."""
        bodies = [HOLD if number == HOLD_INDEX else b"message %d" % number for number in range(BEFORE + AFTER)]
        queries = []
        for queue_type in ("stream", "classic"):
            queue = await self.queue(queue_type)
            await self.publish(queue, bodies[:BEFORE])
            queries.append((queue, queue_type, os.path.abspath(self.mktemp()), os.path.abspath(self.mktemp())))
        await self.run_until_killed(queries)
        for queue, _, checkpoint, _ in queries:
            self.assertKilledBetweenOffsetsAndCommit(checkpoint)
            await self.publish(queue, bodies[BEFORE:])
        classic = queries[1][0]

        async def released() -> bool:
            return (await self.counts(classic))[1] == 0

        await eventually(released, reactor, timeout=30, interval=0.05, what="the killed query's consumer is gone")

        def finish(spark: Any) -> list[list[Any]]:
            results = []
            for query in queries:
                start_query(spark, self.url(), *query, 0).awaitTermination()
                results.append(spark.read.parquet(query[3]).collect())
            return results

        from_stream, from_classic = await self.spark(finish)
        self.assertEqual(sorted(row.body for row in from_stream), sorted(bodies))
        self.assertEqual(sorted(row.offset for row in from_stream), list(range(BEFORE + AFTER)))

        seen: dict[bytes, list[bool]] = {}
        for row in from_classic:
            seen.setdefault(row.body, []).append(row.redelivered)
        self.assertEqual(set(seen), set(bodies))
        for body, redelivered in seen.items():
            if len(redelivered) > 1:
                self.assertTrue(any(redelivered), f"{body!r} came {len(redelivered)} times, never redelivered")
        self.assertTrue(seen[HOLD][-1], "the held batch's messages come again, redelivered")
        self.assertEqual(await self.counts(classic), (0, 0))


def guide_programs() -> tuple[str, str]:
    """The pipeline guide's two programs: the producer and the Spark pipeline."""
    programs = [
        block.code for block in blocks(Path(ROOT, "docs", "pipeline.rst"))
        if block.language == "python" and 'URL = "' in block.code
    ]
    producer, pipeline = programs
    return producer, pipeline


#: Where the held message is among the messages of a restart test (in the second batch).
HOLD_INDEX = MESSAGES_PER_BATCH + 1


class OwnBrokerPipelineTests(PipelineTests, TestCase):
    """Against this project's broker, in this process."""

    skip = spark_missing()

    def setUp(self) -> None:
        self.broker = LoopbackBroker()
        self.broker.start()
        self.addCleanup(self.broker.stop)

    def url(self) -> str:
        return self.broker.url

    @inline
    async def test_guide_pipeline(self) -> None:
        """docs/pipeline.rst's producer and pipeline run and give the totals it promises."""
        producer, pipeline = (
            program.replace('"amqp://guest:guest@localhost:5672/"', repr(self.url()))
            for program in guide_programs()
        )
        pipeline = pipeline.replace('DATA = "pipeline-data"', f"DATA = {os.path.abspath(self.mktemp())!r}")
        self.addCleanup(lambda: Deferred.fromCoroutine(self.delete_queues("events", "totals")))
        output, errors, status = await getProcessOutputAndValue(
            sys.executable, ["-c", producer], env={**os.environ, "PYTHONPATH": ROOT}
        )
        self.assertEqual(status, 0, errors.decode())

        def run(spark: Any) -> list[Any]:
            namespace: dict[str, Any] = {"__name__": "__main__"}
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(pipeline, "docs/pipeline.rst", "exec"), namespace)
            return namespace["totals"].orderBy("kind").collect()  # type: ignore[no-any-return]

        totals = await self.spark(run)
        expected = [("buy", 100, 14850), ("click", 300, 44850), ("view", 300, 44850)]
        self.assertEqual([tuple(row) for row in totals], expected)
        published = await self.read(queue="totals")
        self.assertEqual(
            sorted((json.loads(row.body) for row in published), key=lambda total: total["kind"]),
            [{"kind": kind, "events": events, "amount": amount} for kind, events, amount in expected],
        )


class RabbitMQPipelineTests(PipelineTests, TestCase):
    """Against a private RabbitMQ node."""

    skip = spark_missing() or rabbitmq_missing()

    def setUp(self) -> None:
        self.node = shared_rabbitmq()

    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.node.port}/"
