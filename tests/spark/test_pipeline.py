"""The amqp09 data source in a local Spark session, against this project's
broker (in this process) and a private RabbitMQ node.

Spark's calls block, so they run in a thread (``deferToThread``) while the
reactor serves the broker and the test's own client. The restart tests run
the first half of a streaming query in a child process and kill it inside
a batch: after the batch's offsets are in the checkpoint, before its commit.
"""

from __future__ import annotations

import os
import signal
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.protocol import Factory, ProcessProtocol, Protocol
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThread
from twisted.python.failure import Failure
from twisted.trial.unittest import TestCase

from tests.client.support import inline
from tests.spark.query import HOLD, MESSAGES_PER_BATCH, start_query
from tests.spark.session import ROOT, spark_missing, spark_session
from txamqp09.client import Channel, ClientConnection, connect
from txamqp09.testing.broker import LoopbackBroker
from txamqp09.testing.rabbitmq import rabbitmq_missing, shared_rabbitmq

if TYPE_CHECKING:
    _TestCaseBase = TestCase
else:
    _TestCaseBase = object

#: Messages published before the first run of a restart test, and after.
BEFORE, AFTER = 10, 5


class _HoldListener(Protocol):
    """Fires the factory's ``held`` Deferred (with this protocol) when the
    held batch says so, and :attr:`lost` when its connection ends."""

    def __init__(self) -> None:
        self.lost: Deferred[None] = Deferred()

    def dataReceived(self, data: bytes) -> None:
        held = self.factory.held  # type: ignore[attr-defined]
        if not held.called:
            held.callback(self)

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

        async def delete() -> None:
            cleanup = await self.channel()
            await cleanup.queue_delete(queue=name)

        self.addCleanup(lambda: Deferred.fromCoroutine(delete()))
        return name

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

    async def waitUntil(self, condition: Callable[[], Any], what: str) -> None:
        """Poll the broker until *condition()* (a coroutine) is true."""
        for _ in range(600):
            if await condition():
                return
            await deferLater(reactor, 0.05, lambda: None)
        self.fail(f"the broker never reached: {what}")

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
    async def test_batchWriteThenDrain(self) -> None:
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
    async def test_batchReadStreamBetweenOffsets(self) -> None:
        """A stream read between two offsets, over three partitions, and from
        the first offset to the tail; reading leaves the stream as it was."""
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

    # -- streaming ---------------------------------------------------------------

    @inline
    async def test_streamingWrite(self) -> None:
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

    async def runUntilKilled(self, queue: str, queue_type: str, checkpoint: str, output: str) -> None:
        """Run the query in a child process until its batch holding
        :data:`HOLD` is running, then kill the child and all it started."""
        listening = Factory.forProtocol(_HoldListener)
        listening.held = Deferred()  # type: ignore[attr-defined]
        port = reactor.listenTCP(0, listening, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        child = _QueryProcess()
        arguments = [self.url(), queue, queue_type, checkpoint, output, str(port.getHost().port)]
        process = reactor.spawnProcess(
            child, "/usr/bin/setsid", ["setsid", sys.executable, "-m", "tests.spark.query", *arguments],
            env={**os.environ, "PYTHONPATH": ROOT}, path=ROOT,
        )
        child.ended.addCallback(lambda _: listening.held.called or listening.held.errback(
            AssertionError("the query ended before its batch held:\n" + child.output.decode(errors="replace"))
        ))
        holder = await listening.held
        os.killpg(process.pid, signal.SIGKILL)
        await child.ended
        await holder.lost

    def assertKilledBetweenOffsetsAndCommit(self, checkpoint: str) -> None:
        """The checkpoint has the held batch's offsets but not its commit."""
        batch = str(HOLD_INDEX // MESSAGES_PER_BATCH)
        self.assertIn(batch, os.listdir(Path(checkpoint, "offsets")))
        self.assertNotIn(batch, os.listdir(Path(checkpoint, "commits")))

    async def restart(self, queue: str, queue_type: str) -> list[Any]:
        """Publish, run until killed, publish more, run again to the end; the output's rows."""
        bodies = [HOLD if number == HOLD_INDEX else b"message %d" % number for number in range(BEFORE + AFTER)]
        await self.publish(queue, bodies[:BEFORE])
        checkpoint, output = os.path.abspath(self.mktemp()), os.path.abspath(self.mktemp())
        await self.runUntilKilled(queue, queue_type, checkpoint, output)
        self.assertKilledBetweenOffsetsAndCommit(checkpoint)
        await self.publish(queue, bodies[BEFORE:])
        if queue_type == "classic":
            async def released() -> bool:
                return (await self.counts(queue))[1] == 0

            await self.waitUntil(released, "the killed query's consumer is gone")

        def finish(spark: Any) -> list[Any]:
            start_query(spark, self.url(), queue, queue_type, checkpoint, output, 0).awaitTermination()
            return spark.read.parquet(output).collect()  # type: ignore[no-any-return]

        rows = await self.spark(finish)
        self.assertEqual(set(row.body for row in rows), set(bodies))
        return rows

    @inline
    async def test_restartStreamQueueExactlyOnce(self) -> None:
        """Killed between a batch's offsets and its commit, restarted after
        more messages came: every message of the stream exactly once."""
        queue = await self.queue("stream")
        rows = await self.restart(queue, "stream")
        self.assertEqual(sorted(row.offset for row in rows), list(range(BEFORE + AFTER)))

    @inline
    async def test_restartClassicQueueAtLeastOnce(self) -> None:
        """The same with a classic queue: every message at least once, a
        message seen twice was redelivered, and nothing is left in the queue
        or unacknowledged."""
        queue = await self.queue("classic")
        rows = await self.restart(queue, "classic")
        seen: dict[bytes, list[bool]] = {}
        for row in rows:
            seen.setdefault(row.body, []).append(row.redelivered)
        for body, redelivered in seen.items():
            if len(redelivered) > 1:
                self.assertTrue(any(redelivered), f"{body!r} came {len(redelivered)} times, never redelivered")
        self.assertTrue(seen[HOLD][-1], "the held batch's messages come again, redelivered")
        self.assertEqual(await self.counts(queue), (0, 0))


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


class RabbitMQPipelineTests(PipelineTests, TestCase):
    """Against a private RabbitMQ node."""

    skip = spark_missing() or rabbitmq_missing()

    def setUp(self) -> None:
        self.node = shared_rabbitmq()

    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.node.port}/"
