"""The shared connection protocol, driven through the server over a fake transport."""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.logger import Logger, LogLevel, formatEvent
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.client.connection import ClientConnection
from txamqp09.client.params import ConnectionParameters
from txamqp09.protocol import ConnectionState
from txamqp09.testing.scripted import ScriptedClient, server_factory
from txamqp09.wire.frames import FRAME_HEARTBEAT, HEARTBEAT_FRAME
from txamqp09.wire.versions import AMQP0_8, AMQP0_9, AMQP0_9_1, ProtocolVersion


def scripted(version: ProtocolVersion = AMQP0_9_1, heartbeat: int = 0) -> ScriptedClient:
    """A bare-frame client that has sent nothing yet, to a server on a Clock of its own."""
    return ScriptedClient(server_factory(Clock(), heartbeat=heartbeat), version, handshake=False)


def clock_of(peer: ScriptedClient) -> Clock:
    """The Clock the server of *peer* runs on."""
    return peer.server.clock  # type: ignore[return-value]


def methods(peer: ScriptedClient) -> list[Any]:
    """The methods the server sent since the last look, whatever their channel."""
    return [method for _, method in peer.methods()]


def open_connection(peer: ScriptedClient, password: str = "guest", vhost: str = "/", heartbeat: int = 0) -> list[Any]:
    """Run the opening handshake as far as the server lets it; the methods it sent."""
    peer.feed(peer.version.header)
    start = methods(peer)
    response = b"\x00guest\x00" + password.encode()
    peer.send(0, peer.spec.ConnectionStartOk(client_properties={}, response=response))
    tune = methods(peer)
    if not tune or tune[0].NAME != "connection.tune":
        return start + tune
    peer.send(0, peer.spec.ConnectionTuneOk(channel_max=0, frame_max=0, heartbeat=heartbeat))
    peer.send(0, peer.spec.ConnectionOpen(virtual_host=vhost))
    return start + tune + methods(peer)


class HeaderTests(SynchronousTestCase):
    def test_each_version_gets_start_in_its_own_version(self) -> None:
        for version, expected in ((AMQP0_8, (8, 0)), (AMQP0_9, (0, 9)), (AMQP0_9_1, (0, 9))):
            peer = scripted(version)
            peer.server.dataReceived(version.header)
            (start,) = methods(peer)
            self.assertEqual(start.NAME, "connection.start")
            self.assertEqual((start.version_major, start.version_minor), expected)
            self.assertIs(peer.server.version, version)

    def test_header_split_across_reads(self) -> None:
        peer = scripted()
        for byte in AMQP0_9_1.header:
            peer.server.dataReceived(bytes((byte,)))
        self.assertEqual([m.NAME for m in methods(peer)], ["connection.start"])

    def test_unknown_header_answered_with_preferred_then_closed(self) -> None:
        peer = scripted()
        peer.server.dataReceived(b"AMQP\x01\x00\x00\x0a")
        self.assertEqual(peer.transport.value(), AMQP0_9_1.header)
        self.assertTrue(peer.transport.disconnecting)

    def test_capabilities_only_on_0_9_1(self) -> None:
        for version in (AMQP0_8, AMQP0_9_1):
            peer = scripted(version)
            peer.server.dataReceived(version.header)
            (start,) = methods(peer)
            self.assertEqual("capabilities" in start.server_properties, version is AMQP0_9_1)
            self.assertEqual(start.server_properties["product"], b"txamqp09")


class NegotiationTests(SynchronousTestCase):
    def test_open_on_every_version(self) -> None:
        for version in (AMQP0_8, AMQP0_9, AMQP0_9_1):
            peer = scripted(version)
            names = [m.NAME for m in open_connection(peer)]
            self.assertEqual(names, ["connection.start", "connection.tune", "connection.open-ok"])
            self.assertIs(peer.server.state, ConnectionState.OPEN)

    def test_wrong_password_closes_with_403(self) -> None:
        """After the login throttle's delay (half a second for a first failure)."""
        peer = scripted()
        self.assertEqual([method.NAME for method in open_connection(peer, password="nope")], ["connection.start"])
        clock_of(peer).advance(0.5)
        (close,) = methods(peer)
        self.assertEqual((close.NAME, close.reply_code), ("connection.close", 403))
        self.assertNotIn("guest", close.reply_text)

    def test_unknown_vhost_closes_with_402(self) -> None:
        """0-9's invalid-path; 0-9-1 answers 530 as RabbitMQ (tests.broker.dialects)."""
        close = open_connection(scripted(AMQP0_9), vhost="/elsewhere")[-1]
        self.assertEqual((close.NAME, close.reply_code), ("connection.close", 402))
        self.assertIn("/elsewhere", close.reply_text)

    def test_negotiation_timeout_drops_silent_client(self) -> None:
        peer = scripted()
        peer.server.dataReceived(AMQP0_9_1.header)
        clock_of(peer).advance(peer.server.handshake.timeout + 1)
        self.assertTrue(peer.transport.disconnecting)


class HeartbeatTests(SynchronousTestCase):
    def test_idle_server_sends_heartbeats(self) -> None:
        peer = scripted(heartbeat=10)
        open_connection(peer, heartbeat=10)
        clock_of(peer).advance(5)
        self.assertIn(FRAME_HEARTBEAT, [f[0] for f in peer.frames()])

    def test_silent_peer_is_dropped_after_two_intervals(self) -> None:
        peer = scripted(heartbeat=10)
        events: list[dict[str, Any]] = []
        peer.server.log = Logger(observer=events.append)
        open_connection(peer, heartbeat=10)
        clock_of(peer).advance(15)
        self.assertFalse(peer.transport.disconnecting)
        self.assertEqual(events, [])
        clock_of(peer).advance(6)
        self.assertTrue(peer.transport.disconnecting)
        self.assertEqual(
            [(event["log_level"], formatEvent(event)) for event in events],
            [(LogLevel.warn, "AMQP peer silent for 20 s; disconnecting")],
        )

    def test_heartbeats_from_peer_keep_it_alive(self) -> None:
        peer = scripted(heartbeat=10)
        open_connection(peer, heartbeat=10)
        for _ in range(10):
            clock_of(peer).advance(5)
            peer.server.dataReceived(HEARTBEAT_FRAME)
        self.assertFalse(peer.transport.disconnecting)


class CloseTests(SynchronousTestCase):
    def test_hard_error_closes_and_ignores_all_but_close_ok(self) -> None:
        peer = scripted()
        open_connection(peer)
        peer.server.dataReceived(b"\x01\x00\x01\x00\x00\x00\x04\x00\x0a\x00\x63\xce")  # unknown method 10.99
        (close,) = methods(peer)
        self.assertEqual(close.reply_code, 503)
        peer.send(1, peer.spec.ChannelOpen())
        self.assertEqual(methods(peer), [])
        self.assertFalse(peer.transport.disconnecting)
        peer.send(0, peer.spec.ConnectionCloseOk())
        self.assertTrue(peer.transport.disconnecting)

    def test_close_timeout_drops_peer_that_never_answers(self) -> None:
        peer = scripted()
        open_connection(peer)
        peer.server.dataReceived(b"\x01\x00\x00\x00\x00\x00\x02\x00\x0a\xce")  # too short for its ids
        (close,) = methods(peer)
        self.assertEqual(close.reply_code, 502)
        clock_of(peer).advance(peer.server.close_timeout - 1)
        self.assertFalse(peer.transport.disconnecting)
        clock_of(peer).advance(2)
        self.assertTrue(peer.transport.disconnecting)

    def test_client_close_is_answered_with_close_ok(self) -> None:
        peer = scripted()
        open_connection(peer)
        peer.send(0, peer.spec.ConnectionClose(reply_code=200, reply_text="bye"))
        self.assertEqual([m.NAME for m in methods(peer)], ["connection.close-ok"])
        self.assertTrue(peer.transport.disconnecting)

    def test_frame_error_closes_with_501(self) -> None:
        peer = scripted()
        open_connection(peer)
        peer.server.dataReceived(b"\x01\x00\x01\x00\x00\x00\x00\x00")  # frame-end missing
        (close,) = methods(peer)
        self.assertEqual(close.reply_code, 501)

    def test_channel_above_channel_max_is_504(self) -> None:
        """0-9 limits channel numbers; 0-9-1 counts open channels (tests.broker.dialects)."""
        peer = scripted(AMQP0_9)
        open_connection(peer)
        peer.send(peer.server.channel_max + 1, peer.spec.ChannelOpen())
        (close,) = methods(peer)
        self.assertEqual((close.NAME, close.reply_code), ("connection.close", 504))


class OutputTests(SynchronousTestCase):
    """write and writeParts queue output the same way (a client connection here)."""

    def setUp(self) -> None:
        self.connection = ClientConnection(ConnectionParameters(), Clock())
        self.transport = StringTransport()
        self.connection.makeConnection(self.transport)
        self.transport.clear()

    def test_parts_outside_a_batch_are_written_at_once_joined(self) -> None:
        self.connection.writeParts([b"ab", memoryview(b"-cd-")[1:3], b"e"])
        self.assertEqual(self.transport.value(), b"abcde")

    def test_parts_and_writes_of_a_batch_go_in_one_write_in_order(self) -> None:
        written: list[bytes] = []
        self.transport.write = written.append  # type: ignore[method-assign]
        batch = self.connection.batch
        batch.enter()
        self.connection.writeParts([b"a", memoryview(b"bc")])
        self.connection.write(b"d")
        self.connection.writeParts([b"e"])
        self.assertEqual(written, [])
        batch.leave()
        self.assertEqual(written, [b"abcde"])

    def test_nothing_after_the_connection_closed(self) -> None:
        self.connection.state = ConnectionState.CLOSED
        self.connection.writeParts([b"a", b"b"])
        self.connection.flush()
        self.assertEqual(self.transport.value(), b"")
