"""Large message bodies: frames passed on in the pieces read, kept whole, sent back intact."""

from __future__ import annotations

import socket
from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred, gatherResults, inlineCallbacks
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from tests.broker.test_restart import BrokerProcessTestCase
from txamqp09.broker.server import LARGE_READ_SIZE, _unsent
from txamqp09.client import Message
from txamqp09.testing.scripted import ScriptedClient, server_factory
from txamqp09.wire import bodies
from txamqp09.wire.errors import PreconditionFailed
from txamqp09.wire.frames import FRAME_BODY, FrameReader

FRAME_MAX = 131072
BODY_MAX = FRAME_MAX - 8
#: The class and method ids of basic.get-ok and basic.return.
GET_OK, RETURN = bytes([0, 60, 0, 71]), bytes([0, 60, 0, 50])


def body_of(size: int, seed: int = 0) -> bytes:
    """*size* bytes that differ from one position to the next (a misplaced piece shows)."""
    pattern = bytes((seed + n * 7) % 251 for n in range(251 * 4))
    return (pattern * (size // len(pattern) + 1))[:size]


def body_bytes_before(data: bytes, cut: int) -> int:
    """How many body bytes the frames in *data* carry before offset *cut*."""
    count = at = 0
    while at < cut:
        size = int.from_bytes(data[at + 3 : at + 7], "big")
        if data[at] == FRAME_BODY:
            count += max(0, min(cut, at + 7 + size) - (at + 7))
        at += 8 + size
    return count


def consuming_peer() -> ScriptedClient:
    """A client with frame_max 128 KiB, consuming queue ``q`` with no-ack as ``c``."""
    peer = ScriptedClient(server_factory(Clock()), frame_max=FRAME_MAX)
    peer.send(1, peer.spec.QueueDeclare(queue="q"))
    peer.expect(1, "queue.declare-ok")
    peer.send(1, peer.spec.BasicConsume(queue="q", consumer_tag="c", no_ack=True))
    peer.expect(1, "basic.consume-ok")
    return peer


class PiecesThroughTheBrokerTests(SynchronousTestCase):
    """Bodies published in large frames, read in blocks of every size, are delivered as sent."""

    def setUp(self) -> None:
        self.peer = consuming_peer()
        self.bodies = [body_of(300 * 1024, 1), body_of(BODY_MAX, 2), body_of(1024 * 1024 + 3, 3), body_of(20000, 4)]
        self.data = b"".join(self.peer.publish_bytes(1, "q", body) for body in self.bodies)

    def feed(self, data: bytes, size: int) -> None:
        for at in range(0, len(data), size):
            self.peer.feed(data[at : at + size])

    def test_every_block_size(self) -> None:
        for size in (1000, 16384, 65536, 65537, BODY_MAX, FRAME_MAX + 1, LARGE_READ_SIZE, len(self.data)):
            self.feed(self.data, size)
            self.assertEqual(self.peer.deliveries(), self.bodies, f"blocks of {size} bytes")
            self.assertEqual(self.peer.server.partial_bytes, 0)

    def test_every_split_around_the_frames(self) -> None:
        """Input cut in two within a few bytes of each frame boundary of a three-frame body."""
        body = body_of(2 * BODY_MAX + 100, 5)
        data = self.peer.publish_bytes(1, "q", body)
        boundaries, at = [], 0
        while at < len(data):
            boundaries.append(at)
            at += 8 + int.from_bytes(data[at + 3 : at + 7], "big")
        for boundary in boundaries[1:]:
            for cut in range(boundary - 9, boundary + 10):
                self.peer.feed(data[:cut])
                self.peer.feed(data[cut:])
                self.assertEqual(self.peer.deliveries(), [body], f"cut at {cut}")

    def test_deliveries_in_the_consumer_frame_max(self) -> None:
        """A body received in 128 KiB frames goes to a 4 KiB consumer in 4 KiB frames."""
        consumer = ScriptedClient(self.peer.server.factory)
        consumer.send(1, consumer.spec.BasicConsume(queue="q", consumer_tag="small", no_ack=True))
        consumer.expect(1, "basic.consume-ok")
        self.peer.send(1, self.peer.spec.BasicCancel(consumer_tag="c"))
        self.peer.expect(1, "basic.cancel-ok")
        body = body_of(300 * 1024, 6)
        self.feed(self.peer.publish_bytes(1, "q", body), 65536)
        frames = consumer.frames()
        sizes = {len(payload) for frame_type, _, payload in frames if frame_type == FRAME_BODY}
        self.assertEqual(max(sizes), 4088)
        self.assertEqual(b"".join(payload for frame_type, _, payload in frames if frame_type == FRAME_BODY), body)

    def test_mapped_body(self) -> None:
        """A body gathered in a memory map takes its pieces as well."""
        self.patch(bodies, "MAPPED_BODY_SIZE", 256 * 1024)
        self.feed(self.data, 65536)
        self.assertEqual(self.peer.deliveries(), self.bodies)

    def test_reads_grow(self) -> None:
        """A connection that sends large bodies is read in larger blocks."""
        self.peer.transport.bufferSize = 65536  # type: ignore[attr-defined]
        self.feed(self.peer.publish_bytes(1, "q", body_of(10000)), 65536)
        self.assertEqual(self.peer.transport.bufferSize, 65536)  # type: ignore[attr-defined]
        self.feed(self.data, 65536)
        self.assertEqual(self.peer.transport.bufferSize, LARGE_READ_SIZE)  # type: ignore[attr-defined]

    def test_unfinished_body_counted(self) -> None:
        """The bytes of a body under way count as unfinished, in pieces too,
        until the message is complete."""
        body = body_of(1024 * 1024)
        data = self.peer.publish_bytes(1, "q", body)
        self.peer.feed(data[:500000])
        self.assertEqual(self.peer.server.partial_bytes, body_bytes_before(data, 500000))
        self.peer.feed(data[500000:])
        self.assertEqual(self.peer.server.partial_bytes, 0)
        self.assertEqual(self.peer.deliveries(), [body])

    def test_unfinished_body_limit(self) -> None:
        """A body under way in pieces is held to the connection's limit of unfinished bytes."""
        self.peer.server.partial_content_max = 300000
        self.peer.feed(self.peer.publish_bytes(1, "q", body_of(1024 * 1024))[:400000])
        close = self.peer.expect(0, "connection.close")
        self.assertEqual(close.reply_code, 506)

    def test_channel_closed_in_a_frame(self) -> None:
        """The broker closing a channel in the middle of a frame passed in pieces
        drops that body; the channel's frames are ignored until close-ok."""
        data = self.peer.publish_bytes(1, "q", body_of(300 * 1024))
        self.peer.feed(data[:100000])
        self.peer.server.channelError(1, PreconditionFailed("closed by the test"))
        self.peer.expect(1, "channel.close")
        self.peer.feed(data[100000:])
        self.assertEqual(self.peer.server.partial_bytes, 0)
        self.peer.send(1, self.peer.spec.ChannelCloseOk())
        self.peer.open(1)
        self.feed(self.data, 65536)
        self.peer.send(1, self.peer.spec.QueueDeclare(queue="q", passive=True))
        self.assertEqual(self.peer.expect(1, "queue.declare-ok").message_count, len(self.bodies))
        self.assertFalse(self.peer.disconnected)


class LargePersistentBodiesTests(BrokerProcessTestCase):
    """Large persistent bodies, read by a real broker from TCP, survive a restart."""

    @inlineCallbacks
    def test_survive_restart(self) -> Any:
        data_dir = self.mktemp()
        broker = yield self.started(data_dir)
        channel = yield self.channel(broker)
        yield channel.queue_declare("q", durable=True)
        yield channel.confirm_select()
        sent = [body_of(size, n) for n, size in enumerate((BODY_MAX, 3 * BODY_MAX + 1, 2 * 1024 * 1024 + 17, 70000))]
        yield gatherResults([
            channel.basic_publish(body, routing_key="q", properties={"delivery_mode": 2}) for body in sent
        ])
        yield broker.stop()
        messages = yield self.restarted_contents(data_dir)
        self.assertEqual([message.body for message in messages], sent)

    @inlineCallbacks
    def test_paged_out_and_consumed(self) -> Any:
        """Large bodies beyond the memory budget are paged out and read back,
        and reach a consumer over TCP (deliveries sent from their parts) intact."""
        broker = yield self.started(self.mktemp(), "--memory-budget", str(256 * 1024))
        channel = yield self.channel(broker)
        yield channel.queue_declare("q", durable=True)
        yield channel.confirm_select()
        sent = [body_of(1024 * 1024 + 1000 * n, n) for n in range(6)]
        yield gatherResults([
            channel.basic_publish(body, routing_key="q", properties={"delivery_mode": 2}) for body in sent
        ])
        consumed: list[bytes] = []
        done: Deferred[None] = Deferred()

        def take(message: Message) -> None:
            consumed.append(message.body)
            message.ack()
            if len(consumed) == len(sent):
                done.callback(None)

        yield channel.basic_qos(2)
        yield channel.basic_consume("q", take)
        yield done
        self.assertEqual(consumed, sent)


class SocketTransport(StringTransport):
    """A transport whose socket is one end of a socket pair, as Twisted's TCP
    transport has: what is sent on it directly is read at the other end,
    what is written to the transport is kept as usual; its producer is
    resumed (:meth:`doWrite`) as Twisted's is when the socket may take more."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(peerAddress=IPv4Address("TCP", "127.0.0.1", 40000))
        self.socket = sock
        self.dataBuffer = b""
        self.offset = 0
        self._tempDataLen = 0
        self.connected = True
        self.producerPaused = False
        self.writing = False

    def startWriting(self) -> None:
        self.writing = True

    def doWrite(self) -> None:
        """The socket is writable: with nothing buffered, resume a paused producer."""
        assert self.writing and not self.value()
        self.writing = False
        if self.producerPaused:
            self.producerPaused = False
            self.producer.resumeProducing()


class DirectSendTests(SynchronousTestCase):
    """A large delivery is sent from its parts, without joining them, when the transport can."""

    def setUp(self) -> None:
        self.peer = consuming_peer()
        ours, theirs = socket.socketpair()
        self.addCleanup(ours.close)
        self.addCleanup(theirs.close)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
        ours.setblocking(False)
        theirs.setblocking(False)
        self.theirs = theirs
        self.transport = SocketTransport(ours)
        self.peer.server.transport = self.transport
        self.transport.producer = self.peer.server

    def received(self) -> bytes:
        """What reached the other end of the socket."""
        chunks = []
        while True:
            try:
                chunk = self.theirs.recv(1 << 20)
            except BlockingIOError:
                return b"".join(chunks)
            chunks.append(chunk)

    def delivered(self, data: bytes) -> list[bytes]:
        """The bodies of the deliveries in *data*."""
        reader = FrameReader(1 << 20)
        return [payload for frame_type, _, payload in reader.feed(data) if frame_type == FRAME_BODY]

    def test_sent_from_the_parts(self) -> None:
        """What the socket takes goes straight to it; the rest is held, not
        joined, and sent from its parts as the socket takes more."""
        body = body_of(3 * 1024 * 1024 + 5, 7)
        self.feed(body)
        direct = self.received()
        self.assertGreater(len(direct), 0)
        self.assertTrue(self.transport.writing)  # the socket pair's buffer holds less than the delivery
        self.assertFalse(self.peer.server.client.writable)
        self.assertTrue(all(len(part) for part in self.peer.server._held), "an empty write follows the parts")
        direct += self.drain()
        self.assertEqual(self.transport.value(), b"")
        self.assertEqual(b"".join(self.delivered(direct)), body)
        self.assertTrue(self.peer.server.client.writable)

    def test_output_waits_behind_what_is_held(self) -> None:
        """Output made while part of a delivery is held follows it, and the
        next delivery waits for it, then goes straight to the socket too."""
        first, second = body_of(3 * 1024 * 1024, 1), body_of(2 * 1024 * 1024, 2)
        self.feed(first)
        data = self.received()
        self.peer.server.transport = self.transport  # the scripted peer's sends reset it
        self.feed(second)
        self.peer.send(1, self.peer.spec.QueueDeclare(queue="q2"))
        self.assertEqual(self.transport.value(), b"")
        data += self.drain()
        self.assertEqual(self.transport.value(), b"")
        frames = list(FrameReader(1 << 20).feed(data))
        bodies_seen = [payload for frame_type, _, payload in frames if frame_type == FRAME_BODY]
        self.assertEqual(b"".join(bodies_seen), first + second)
        methods = [bytes(payload[:4]) for frame_type, _, payload in frames if frame_type == 1]
        declare_ok = bytes([0, 50, 0, 11])
        self.assertEqual(methods.count(declare_ok), 1)
        first_frames = 2 + -(-len(first) // BODY_MAX)  # basic.deliver, the header, the body's
        self.assertEqual(frames[first_frames][0], 1)
        self.assertEqual(bytes(frames[first_frames][2][:4]), declare_ok)

    def test_held_written_before_closing(self) -> None:
        """A graceful close writes what is held first, in order."""
        body = body_of(3 * 1024 * 1024, 3)
        self.feed(body)
        direct = self.received()
        self.peer.server.dropConnection(abort=False)
        self.assertEqual(b"".join(self.delivered(direct + self.transport.value())), body)

    def drain(self) -> bytes:
        """Read the other end and let the transport resume its producer until nothing is held."""
        data = b""
        for _ in range(1000):
            data += self.received()
            if not self.transport.writing:
                return data
            self.transport.doWrite()
        self.fail("output still held after 1,000 writable events")

    def test_not_while_output_waits(self) -> None:
        """Output already waiting in the transport goes first: no direct send then."""
        self.transport._tempDataLen = 10
        body = body_of(300 * 1024, 8)
        self.feed(body)
        self.assertEqual(self.received(), b"")
        self.assertEqual(b"".join(self.delivered(self.transport.value())), body)

    def test_not_over_tls(self) -> None:
        """A TLS connection's output goes through its encryption: never straight to the socket."""
        self.transport.TLS = True
        body = body_of(300 * 1024, 9)
        self.feed(body)
        self.assertEqual(self.received(), b"")
        self.assertEqual(b"".join(self.delivered(self.transport.value())), body)

    def test_small_deliveries_are_written(self) -> None:
        self.feed(b"small")
        self.assertEqual(self.received(), b"")
        self.assertEqual(self.delivered(self.transport.value()), [b"small"])

    def test_get_ok_sent_from_the_parts(self) -> None:
        """basic.get-ok with a large body goes out as a delivery does."""
        self.peer.send(1, self.peer.spec.QueueDeclare(queue="g"))
        self.transport.clear()
        body = body_of(3 * 1024 * 1024 + 1, 10)
        self.feed(body, "g")
        self.peer.send(1, self.peer.spec.BasicGet(queue="g", no_ack=True))
        self.assertContent(body, GET_OK)

    def test_return_sent_from_the_parts(self) -> None:
        """basic.return with a large body goes out as a delivery does."""
        body = body_of(2 * 1024 * 1024 + 7, 11)
        self.feed(body, "nowhere", mandatory=True)
        self.assertContent(body, RETURN)

    def assertContent(self, body: bytes, method: bytes) -> None:
        """*body* reached the socket as the content of *method* (class and
        method ids) from its parts: not joined, not through the transport's
        buffer (the socket pair takes less than the body at once)."""
        data = self.received()
        self.assertGreater(len(data), 0, "nothing was sent straight to the socket")
        held = self.peer.server._held
        self.assertGreater(len(held), 2, "what the socket did not take is held joined, not as its parts")
        data += self.drain()
        self.assertEqual(self.transport.value(), b"")
        frames = list(FrameReader(1 << 20).feed(data))
        self.assertEqual(bytes(frames[0][2][:4]), method)
        self.assertEqual(b"".join(self.delivered(data)), body)
        self.assertTrue(self.peer.server.client.writable)

    def feed(self, body: bytes, routing_key: str = "q", **fields: Any) -> None:
        data = self.peer.publish_bytes(1, routing_key, body, **fields)
        for at in range(0, len(data), 65536):
            self.peer.feed(data[at : at + 65536])


class UnsentTests(SynchronousTestCase):
    def test_every_cut(self) -> None:
        """What remains of parts after each number of bytes sent."""
        parts: list[Any] = [b"abc", memoryview(b"defg"), b"", b"hi"]
        whole = b"abcdefghi"
        for sent in range(len(whole) + 1):
            self.assertEqual(b"".join(_unsent(parts, sent)), whole[sent:], f"{sent} sent")
