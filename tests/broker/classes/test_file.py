"""The file class over loopback: staging with resume, consumers, ack and reject, returns."""

from __future__ import annotations

from tests.broker.classes.support import Collector, LiveClassTestCase
from tests.client.support import fails, inline
from txamqp09.broker.classes.file import FileState
from txamqp09.client import ChannelClosed
from txamqp09.client.classes import FileClass, FileMessage, StagingStore


class FileTests(LiveClassTestCase):
    """On 0-9."""

    @inline
    async def test_publish_consume_ack(self) -> None:
        channel = await self.channel()
        files = FileClass(channel)
        queue = await self.declare(channel, "files")
        body = bytes(range(256)) * 1000
        offset = await files.publish(
            body, routing_key=queue, identifier="report-1", stage_size=64 * 1024,
            properties={"filename": "report.bin", "content_type": "application/octet-stream"},
        )
        self.assertEqual(offset, 0)
        collector = Collector()
        await files.consume(queue, collector)
        (message,) = await collector.done
        self.assertIsInstance(message, FileMessage)
        self.assertEqual(message.body, body)
        self.assertEqual(message.properties.filename, "report.bin")
        self.assertEqual(message.properties.content_type, "application/octet-stream")
        self.assertEqual(message.method.NAME, "file.deliver")
        message.ack()
        await self.round_trip(channel)
        self.assertEqual(self.queue(queue).message_count, 0)
        self.assertEqual(self.server_classes().state(FileState).session.unacked, {})

    @inline
    async def test_cancel(self) -> None:
        channel = await self.channel()
        queue = await self.declare(channel, "cancelled-files")
        consumer = await FileClass(channel).consume(queue, Collector())
        self.assertEqual(self.queue(queue).consumer_count, 1)
        await consumer.cancel()
        self.assertEqual(self.queue(queue).consumer_count, 0)
        self.assertNotIn(consumer.tag, channel.consumers)

    @inline
    async def test_resume_after_reconnect(self) -> None:
        """A file partly staged before the connection broke is completed from its offset."""
        body = b"0123456789" * 5000
        first = await self.channel()
        queue = await self.declare(first, "resumed")
        files = FileClass(first)
        self.assertEqual(await files.open("movie-7", len(body)), 0)
        files.stage(body[:20000], {"filename": "movie"})
        await self.round_trip(first)
        await first.connection.disconnect()

        second = await self.channel()
        offset = await FileClass(second).publish(
            body, routing_key=queue, identifier="movie-7", properties={"filename": "movie"}
        )
        self.assertEqual(offset, 20000)
        await self.round_trip(second)
        self.assertEqual(self.queue(queue).message_count, 1)
        message = await second.basic_get(queue, no_ack=True)
        self.assertEqual(message.body, body)
        self.assertEqual(message.headers["x-filename"], b"movie")
        self.assertEqual(message.properties.delivery_mode, 2)

    @inline
    async def test_staging_is_keyed_by_user(self) -> None:
        """Staging identifiers belong to the user who staged (guest here)."""
        channel = await self.channel()
        files = FileClass(channel)
        await files.open("x", 3)
        files.stage(b"abc")
        await self.round_trip(channel)
        (connection,) = self.server.factory.connections
        (server_channel,) = connection.channels.values()
        staging = server_channel.classes.state(FileState)._staging
        self.assertIsNotNone(staging.get(("guest", "file", "x")))
        self.assertIsNone(staging.get(("other", "file", "x")))

    @inline
    async def test_publish_unstaged_is_404(self) -> None:
        channel = await self.channel()
        channel.call(channel.build("file.publish", routing_key="q", identifier="never"))
        closed = await fails(channel.whenClosed().addCallback(_raise), ChannelClosed)
        self.assertEqual(closed.reply_code, 404)
        self.assertIn("never", closed.reply_text)

    @inline
    async def test_publish_incomplete_is_406(self) -> None:
        channel = await self.channel()
        files = FileClass(channel)
        await files.open("half", 10)
        files.stage(b"12345")
        channel.call(channel.build("file.publish", routing_key="q", identifier="half"))
        closed = await fails(channel.whenClosed().addCallback(_raise), ChannelClosed)
        self.assertEqual(closed.reply_code, 406)
        self.assertIn("5 of 10", closed.reply_text)

    @inline
    async def test_staging_beyond_the_announced_size_is_406(self) -> None:
        channel = await self.channel()
        files = FileClass(channel)
        await files.open("small", 2)
        files.stage(b"12345")
        closed = await fails(channel.whenClosed().addCallback(_raise), ChannelClosed)
        self.assertEqual(closed.reply_code, 406)

    @inline
    async def test_qos_holds_files_until_ack(self) -> None:
        channel = await self.channel()
        files = FileClass(channel)
        queue = await self.declare(channel, "paced-files")
        for number in range(2):
            await files.publish(b"file %d" % number, routing_key=queue, identifier=f"q{number}")
        await files.qos(prefetch_count=1)
        collector = Collector(2)
        await files.consume(queue, collector)
        await collector.arrived(1)
        await self.round_trip(channel)
        self.assertEqual(self.queue(queue).message_count, 1)
        self.assertEqual([message.body for message in collector.messages], [b"file 0"])
        collector.messages[0].ack()
        first, second = await collector.done
        self.assertEqual(second.body, b"file 1")

    @inline
    async def test_reject_requeues_or_drops(self) -> None:
        channel = await self.channel()
        files = FileClass(channel)
        queue = await self.declare(channel, "rejects")
        await files.publish(b"data", routing_key=queue, identifier="r")
        collector = Collector(2)
        await files.qos(prefetch_count=1)
        await files.consume(queue, collector)
        await collector.arrived(1)
        collector.messages[0].reject(requeue=True)
        (first, again) = await collector.done
        self.assertFalse(first.redelivered)
        self.assertTrue(again.redelivered)
        self.assertEqual(again.body, b"data")
        again.reject(requeue=False)
        await self.round_trip(channel)
        self.assertEqual(self.queue(queue).message_count, 0)

    @inline
    async def test_redelivery_uses_what_the_client_staged(self) -> None:
        """The server offers a redelivered file under the same identifier; a
        client that kept it staged is sent only the missing part (nothing)."""
        staging = RecordingStore()
        publisher = await self.channel()
        queue = await self.declare(publisher, "redelivered")
        await FileClass(publisher).publish(b"x" * 1000, routing_key=queue, identifier="p")
        first = await self.channel()
        collector = Collector()
        await FileClass(first, staging).consume(queue, collector)
        (message,) = await collector.done
        ((identifier, chunk),) = staging.appended
        self.assertEqual(chunk, message.body)
        staging.append(identifier, message.body)  # kept, as an application would
        await first.connection.disconnect()

        second = Collector()
        await FileClass(await self.channel(), staging).consume(queue, second)
        (redelivered,) = await second.done
        self.assertTrue(redelivered.redelivered)
        self.assertEqual(redelivered.body, b"x" * 1000)
        self.assertEqual(staging.appended[-1], (identifier, b""))

    @inline
    async def test_basic_acks_never_settle_files_of_the_same_channel(self) -> None:
        """Tags are shared by the classes of a channel; the client's combined
        basic acks (multiple) settle basic deliveries only."""
        channel = await self.channel()
        for name in ("qb", "qf"):
            await self.declare(channel, name)
        basic, files = Collector(2), Collector()
        await channel.basic_consume("qb", basic)
        await FileClass(channel).consume("qf", files)
        channel.basic_publish(b"b1", routing_key="qb")
        await basic.arrived(1)
        await FileClass(channel).publish(b"f", routing_key="qf", identifier="shared-tags")
        (file_message,) = await files.done
        channel.basic_publish(b"b2", routing_key="qb")
        first, second = await basic.done
        self.assertEqual(
            [first.delivery_tag, file_message.delivery_tag, second.delivery_tag],
            [first.delivery_tag, first.delivery_tag + 1, first.delivery_tag + 2],
        )
        first.ack()
        second.ack()
        await self.round_trip(channel)
        (server,) = self.server.factory.connections
        (server_channel,) = server.channels.values()
        file_session = server_channel.classes.state(FileState).session
        self.assertEqual(server_channel.session.unacked, {})
        self.assertEqual(list(file_session.unacked), [file_message.delivery_tag])
        file_message.ack()
        await self.round_trip(channel)
        self.assertEqual(file_session.unacked, {})

    @inline
    async def test_returned_when_mandatory_and_unroutable(self) -> None:
        channel = await self.channel()
        returned: list = []
        channel.return_handler = returned.append
        await FileClass(channel).publish(b"lost", routing_key="nowhere", identifier="m", mandatory=True)
        await self.round_trip(channel)
        (message,) = returned
        self.assertEqual(message.method.NAME, "file.return")
        self.assertEqual(message.method.reply_code, 312)
        self.assertEqual(message.body, b"lost")

    @inline
    async def test_basic_consumer_receives_file_and_file_consumer_receives_basic(self) -> None:
        channel = await self.channel()
        queue = await self.declare(channel, "mixed")
        files = FileClass(channel)
        await files.publish(b"from file", routing_key=queue, identifier="f", properties={"filename": "a.txt"})
        await self.round_trip(channel)
        got = await channel.basic_get(queue, no_ack=True)
        self.assertEqual((got.body, got.headers), (b"from file", {"x-filename": b"a.txt"}))
        channel.basic_publish(b"from basic", routing_key=queue, properties={"headers": {"x-filename": "b.txt"}})
        collector = Collector()
        await files.consume(queue, collector, no_ack=True)
        (message,) = await collector.done
        self.assertEqual(message.body, b"from basic")
        self.assertEqual(message.properties.filename, "b.txt")
        self.assertTrue(message.settled)


class RecordingStore(StagingStore):
    """A staging store that records what the server staged."""

    def __init__(self) -> None:
        super().__init__()
        self.appended: list[tuple[str, bytes]] = []

    def append(self, identifier: str, chunk: bytes) -> None:
        self.appended.append((identifier, chunk))
        super().append(identifier, chunk)


class FileTests08(FileTests):
    """The same on 0-8."""

    version = "0-8"


def _raise(error: Exception) -> None:
    raise error

