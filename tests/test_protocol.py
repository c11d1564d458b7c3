"""The shared connection protocol, driven through the server over a fake transport."""

from __future__ import annotations

from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.logger import Logger, LogLevel, formatEvent
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.broker.server import ServerConnection
from txamqp09.protocol import ConnectionState
from txamqp09.wire.base import decode_method
from txamqp09.wire.frames import FRAME_HEARTBEAT, FRAME_METHOD, HEARTBEAT_FRAME, FrameReader, method_frame
from txamqp09.wire.versions import AMQP0_8, AMQP0_9, AMQP0_9_1, ProtocolVersion


class Peer:
    """A client side made of bare frames: sends methods, reads what came back."""

    def __init__(self, version: ProtocolVersion = AMQP0_9_1, heartbeat: int = 0) -> None:
        self.version = version
        self.spec: Any = version.spec
        self.clock = Clock()
        # guest may log in only from loopback.
        self.transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 40000))
        self.server = ServerConnection(self.clock, heartbeat=heartbeat)
        self.server.makeConnection(self.transport)
        self._reader = FrameReader(1 << 20)

    def send(self, channel: int, method: Any) -> None:
        self.server.dataReceived(method_frame(channel, method))

    def frames(self) -> list[tuple[int, int, Any]]:
        """Everything the server wrote since the last call, decoded."""
        data = self.transport.value()
        self.transport.clear()
        out = []
        for frame_type, channel, payload in self._reader.feed(data):
            body = decode_method(self.version.methods, payload) if frame_type == FRAME_METHOD else payload
            out.append((frame_type, channel, body))
        return out

    def methods(self) -> list[Any]:
        return [body for frame_type, _, body in self.frames() if frame_type == FRAME_METHOD]

    def open(self, password: str = "guest", vhost: str = "/", heartbeat: int = 0) -> list[Any]:
        self.server.dataReceived(self.version.header)
        start = self.methods()
        response = b"\x00guest\x00" + password.encode()
        self.send(0, self.spec.ConnectionStartOk(client_properties={}, response=response))
        tune = self.methods()
        if not tune or tune[0].NAME != "connection.tune":
            return start + tune
        self.send(0, self.spec.ConnectionTuneOk(channel_max=0, frame_max=0, heartbeat=heartbeat))
        self.send(0, self.spec.ConnectionOpen(virtual_host=vhost))
        return start + tune + self.methods()


class HeaderTests(SynchronousTestCase):
    def test_each_version_gets_start_in_its_own_version(self) -> None:
        for version, expected in ((AMQP0_8, (8, 0)), (AMQP0_9, (0, 9)), (AMQP0_9_1, (0, 9))):
            peer = Peer(version)
            peer.server.dataReceived(version.header)
            (start,) = peer.methods()
            self.assertEqual(start.NAME, "connection.start")
            self.assertEqual((start.version_major, start.version_minor), expected)
            self.assertIs(peer.server.version, version)

    def test_header_split_across_reads(self) -> None:
        peer = Peer()
        for byte in AMQP0_9_1.header:
            peer.server.dataReceived(bytes((byte,)))
        self.assertEqual([m.NAME for m in peer.methods()], ["connection.start"])

    def test_unknown_header_answered_with_preferred_then_closed(self) -> None:
        peer = Peer()
        peer.server.dataReceived(b"AMQP\x01\x00\x00\x0a")
        self.assertEqual(peer.transport.value(), AMQP0_9_1.header)
        self.assertTrue(peer.transport.disconnecting)

    def test_capabilities_only_on_0_9_1(self) -> None:
        for version in (AMQP0_8, AMQP0_9_1):
            peer = Peer(version)
            peer.server.dataReceived(version.header)
            (start,) = peer.methods()
            self.assertEqual("capabilities" in start.server_properties, version is AMQP0_9_1)
            self.assertEqual(start.server_properties["product"], b"txamqp09")


class NegotiationTests(SynchronousTestCase):
    def test_open_on_every_version(self) -> None:
        for version in (AMQP0_8, AMQP0_9, AMQP0_9_1):
            peer = Peer(version)
            names = [m.NAME for m in peer.open()]
            self.assertEqual(names, ["connection.start", "connection.tune", "connection.open-ok"])
            self.assertIs(peer.server.state, ConnectionState.OPEN)

    def test_wrong_password_closes_with_403(self) -> None:
        """After the login throttle's delay (half a second for a first failure)."""
        peer = Peer()
        self.assertEqual([method.NAME for method in peer.open(password="nope")], ["connection.start"])
        peer.clock.advance(0.5)
        (close,) = peer.methods()
        self.assertEqual((close.NAME, close.reply_code), ("connection.close", 403))
        self.assertNotIn("guest", close.reply_text)

    def test_unknown_vhost_closes_with_402(self) -> None:
        """0-9's invalid-path; 0-9-1 answers 530 as RabbitMQ (tests.broker.dialects)."""
        close = Peer(AMQP0_9).open(vhost="/elsewhere")[-1]
        self.assertEqual((close.NAME, close.reply_code), ("connection.close", 402))
        self.assertIn("/elsewhere", close.reply_text)

    def test_negotiation_timeout_drops_silent_client(self) -> None:
        peer = Peer()
        peer.server.dataReceived(AMQP0_9_1.header)
        peer.clock.advance(peer.server.negotiation_timeout + 1)
        self.assertTrue(peer.transport.disconnecting)


class HeartbeatTests(SynchronousTestCase):
    def test_idle_server_sends_heartbeats(self) -> None:
        peer = Peer(heartbeat=10)
        peer.open(heartbeat=10)
        peer.clock.advance(5)
        self.assertIn(FRAME_HEARTBEAT, [f[0] for f in peer.frames()])

    def test_silent_peer_is_dropped_after_two_intervals(self) -> None:
        peer = Peer(heartbeat=10)
        events: list[dict[str, Any]] = []
        peer.server.log = Logger(observer=events.append)
        peer.open(heartbeat=10)
        peer.clock.advance(15)
        self.assertFalse(peer.transport.disconnecting)
        self.assertEqual(events, [])
        peer.clock.advance(6)
        self.assertTrue(peer.transport.disconnecting)
        self.assertEqual(
            [(event["log_level"], formatEvent(event)) for event in events],
            [(LogLevel.warn, "AMQP peer silent for 20 s; disconnecting")],
        )

    def test_heartbeats_from_peer_keep_it_alive(self) -> None:
        peer = Peer(heartbeat=10)
        peer.open(heartbeat=10)
        for _ in range(10):
            peer.clock.advance(5)
            peer.server.dataReceived(HEARTBEAT_FRAME)
        self.assertFalse(peer.transport.disconnecting)


class CloseTests(SynchronousTestCase):
    def test_hard_error_closes_and_ignores_all_but_close_ok(self) -> None:
        peer = Peer()
        peer.open()
        peer.server.dataReceived(b"\x01\x00\x01\x00\x00\x00\x04\x00\x0a\x00\x63\xce")  # unknown method 10.99
        (close,) = peer.methods()
        self.assertEqual(close.reply_code, 503)
        peer.send(1, peer.spec.ChannelOpen())
        self.assertEqual(peer.methods(), [])
        self.assertFalse(peer.transport.disconnecting)
        peer.send(0, peer.spec.ConnectionCloseOk())
        self.assertTrue(peer.transport.disconnecting)

    def test_close_timeout_drops_peer_that_never_answers(self) -> None:
        peer = Peer()
        peer.open()
        peer.server.dataReceived(b"\x01\x00\x00\x00\x00\x00\x02\x00\x0a\xce")  # too short for its ids
        (close,) = peer.methods()
        self.assertEqual(close.reply_code, 502)
        peer.clock.advance(peer.server.close_timeout - 1)
        self.assertFalse(peer.transport.disconnecting)
        peer.clock.advance(2)
        self.assertTrue(peer.transport.disconnecting)

    def test_client_close_is_answered_with_close_ok(self) -> None:
        peer = Peer()
        peer.open()
        peer.send(0, peer.spec.ConnectionClose(reply_code=200, reply_text="bye"))
        self.assertEqual([m.NAME for m in peer.methods()], ["connection.close-ok"])
        self.assertTrue(peer.transport.disconnecting)

    def test_frame_error_closes_with_501(self) -> None:
        peer = Peer()
        peer.open()
        peer.server.dataReceived(b"\x01\x00\x01\x00\x00\x00\x00\x00")  # frame-end missing
        (close,) = peer.methods()
        self.assertEqual(close.reply_code, 501)

    def test_channel_above_channel_max_is_504(self) -> None:
        """0-9 limits channel numbers; 0-9-1 counts open channels (tests.broker.dialects)."""
        peer = Peer(AMQP0_9)
        peer.open()
        peer.send(peer.server.channel_max + 1, peer.spec.ChannelOpen())
        (close,) = peer.methods()
        self.assertEqual((close.NAME, close.reply_code), ("connection.close", 504))
