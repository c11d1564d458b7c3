"""The client connection's state machine, offline: negotiation, heartbeats, blocking, closing."""

from __future__ import annotations

from twisted.internet.error import ConnectionDone
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.testing.scripted import HEARTBEAT, ScriptedServer
from txamqp09.client.connection import Negotiation, sasl_response
from txamqp09.client.errors import ConnectionClosed
from txamqp09.protocol import ConnectionState
from txamqp09.wire.frames import HEARTBEAT_FRAME
from txamqp09.wire.versions import AMQP0_8, AMQP0_9, AMQP0_9_1


class NegotiationTests(SynchronousTestCase):
    """From the protocol header to connection.open-ok."""

    def test_header_of_the_requested_version(self) -> None:
        for version in (AMQP0_8, AMQP0_9, AMQP0_9_1):
            self.assertEqual(ScriptedServer(version).header, version.header)

    def test_start_ok_carries_plain_credentials_and_capabilities(self) -> None:
        server = ScriptedServer(username="ann", password="sécret")
        server.send(0, server.spec.ConnectionStart(server_properties={}, mechanisms=b"AMQPLAIN PLAIN", locales=b"en_US"))
        [(channel, start_ok)] = server.methods()
        self.assertEqual((channel, start_ok.mechanism), (0, "PLAIN"))
        self.assertEqual(start_ok.response, "\0ann\0sécret".encode())
        capabilities = start_ok.client_properties["capabilities"]
        self.assertTrue(capabilities["publisher_confirms"])
        self.assertTrue(capabilities["connection.blocked"])
        self.assertEqual(start_ok.client_properties["product"], b"txamqp09")

    def test_amqplain_response_is_a_table_without_length(self) -> None:
        server = ScriptedServer(AMQP0_8, mechanism="AMQPLAIN")
        server.send(0, server.spec.ConnectionStart(server_properties={}, mechanisms=b"AMQPLAIN", locales=b"en_US"))
        [(_, start_ok)] = server.methods()
        self.assertEqual(start_ok.mechanism, "AMQPLAIN")
        table, _ = AMQP0_8.tables.decode_table(
            len(start_ok.response).to_bytes(4, "big") + start_ok.response, 0
        )
        self.assertEqual(table, {"LOGIN": b"guest", "PASSWORD": b"guest"})
        self.assertNotIn("capabilities", start_ok.client_properties)

    def test_mechanism_not_offered_fails_the_connection(self) -> None:
        server = ScriptedServer(mechanism="AMQPLAIN")
        opened = server.client.whenOpened()
        server.send(0, server.spec.ConnectionStart(server_properties={}, mechanisms=b"EXTERNAL PLAIN", locales=b"en_US"))
        [(_, close)] = server.methods()
        self.assertEqual((close.NAME, close.reply_code), ("connection.close", 530))
        self.assertIn("EXTERNAL, PLAIN", close.reply_text)
        server.send(0, server.spec.ConnectionCloseOk())
        server.lose(Failure(ConnectionDone()))
        failure = self.failureResultOf(opened, ConnectionClosed)
        self.assertEqual(failure.value.reply_code, 530)

    def test_tune_takes_the_lower_limits_and_opens_the_virtual_host(self) -> None:
        server = ScriptedServer(frame_max=65536, channel_max=100, heartbeat=30, virtual_host="/v")
        server.send(0, server.spec.ConnectionStart(server_properties={}, mechanisms=b"PLAIN", locales=b"en_US"))
        server.methods()
        server.send(0, server.spec.ConnectionTune(channel_max=2047, frame_max=4096, heartbeat=60))
        tune_ok, open_ = (method for _, method in server.methods())
        self.assertEqual(
            (tune_ok.channel_max, tune_ok.frame_max, tune_ok.heartbeat), (100, 4096, 30)
        )
        self.assertEqual((open_.NAME, open_.virtual_host), ("connection.open", "/v"))
        self.assertEqual(server.client.body_frame_limit, 4096)

    def test_tune_zero_means_no_limit(self) -> None:
        server = ScriptedServer(heartbeat=None)
        server.send(0, server.spec.ConnectionStart(server_properties={}, mechanisms=b"PLAIN", locales=b"en_US"))
        server.methods()
        server.send(0, server.spec.ConnectionTune(channel_max=0, frame_max=0, heartbeat=0))
        tune_ok = server.methods()[0][1]
        self.assertEqual((tune_ok.channel_max, tune_ok.frame_max, tune_ok.heartbeat), (2047, 131072, 0))

    def test_heartbeat_none_accepts_the_servers(self) -> None:
        server = ScriptedServer(heartbeat=None)
        self.successResultOf(server.open(heartbeat=15))
        self.assertEqual(server.client.negotiated_heartbeat, 15)

    def test_heartbeat_zero_turns_them_off(self) -> None:
        server = ScriptedServer(heartbeat=0)
        self.successResultOf(server.open(heartbeat=15))
        self.assertEqual(server.client.negotiated_heartbeat, 0)

    def test_open_ok_opens(self) -> None:
        server = ScriptedServer()
        connection = self.successResultOf(server.open())
        self.assertIs(connection, server.client)
        self.assertIs(connection.state, ConnectionState.OPEN)
        self.assertIs(connection.negotiation, Negotiation.DONE)
        self.assertEqual(connection.server_properties, {"product": b"scripted"})

    def test_method_out_of_step_closes_with_503(self) -> None:
        server = ScriptedServer()
        server.send(0, server.spec.ConnectionTune(channel_max=0, frame_max=0, heartbeat=0))
        [(_, close)] = server.methods()
        self.assertEqual(close.reply_code, 503)
        self.assertIn("waited for connection.start", close.reply_text)

    def test_version_refused_by_protocol_header(self) -> None:
        server = ScriptedServer(AMQP0_8)
        opened = server.client.whenOpened()
        server.client.dataReceived(b"AMQP")
        server.client.dataReceived(b"\x00\x00\x09\x01")
        server.lose(Failure(ConnectionDone()))
        failure = self.failureResultOf(opened, ConnectionClosed)
        self.assertIn("does not speak AMQP 0-8; it offers AMQP 0-9-1", str(failure.value))

    def test_secure_challenge_fails(self) -> None:
        server = ScriptedServer()
        server.send(0, server.spec.ConnectionStart(server_properties={}, mechanisms=b"PLAIN", locales=b"en_US"))
        server.methods()
        server.send(0, server.spec.ConnectionSecure(challenge=b"?"))
        [(_, close)] = server.methods()
        self.assertIn("SASL challenge", close.reply_text)

    def test_redirect_fails(self) -> None:
        server = ScriptedServer(AMQP0_9)
        server.send(0, server.spec.ConnectionStart(server_properties={}, mechanisms=b"PLAIN", locales=b"en_US"))
        server.send(0, server.spec.ConnectionTune(channel_max=0, frame_max=0, heartbeat=0))
        server.methods()
        server.send(0, server.spec.ConnectionRedirect(host="elsewhere:5672"))
        [(_, close)] = server.methods()
        self.assertIn("redirects this connection to elsewhere:5672", close.reply_text)

    def test_loss_during_tune_hints_at_refused_login(self) -> None:
        server = ScriptedServer(AMQP0_9)
        opened = server.client.whenOpened()
        server.send(0, server.spec.ConnectionStart(server_properties={}, mechanisms=b"PLAIN", locales=b"en_US"))
        server.lose(Failure(ConnectionDone()))
        failure = self.failureResultOf(opened, ConnectionClosed)
        self.assertIn("refused the login", str(failure.value))

    def test_server_close_during_negotiation(self) -> None:
        server = ScriptedServer()
        opened = server.client.whenOpened()
        server.send(0, server.spec.ConnectionStart(server_properties={}, mechanisms=b"PLAIN", locales=b"en_US"))
        server.send(0, server.spec.ConnectionClose(reply_code=403, reply_text="ACCESS_REFUSED - login refused"))
        self.assertEqual(server.names()[-1], "connection.close-ok")
        server.lose(Failure(ConnectionDone()))
        failure = self.failureResultOf(opened, ConnectionClosed)
        self.assertEqual(failure.value.reply_code, 403)
        self.assertIn("login refused", str(failure.value))

    def test_negotiation_timeout(self) -> None:
        server = ScriptedServer(connection_timeout=5)
        opened = server.client.whenOpened()
        server.clock.advance(5)
        self.assertTrue(server.transport.disconnecting)
        server.lose()
        failure = self.failureResultOf(opened, ConnectionClosed)
        self.assertIn("did not open the connection within 5", str(failure.value))

    def test_no_timeout_once_open(self) -> None:
        server = ScriptedServer(connection_timeout=5)
        self.successResultOf(server.open())
        server.clock.advance(10)
        self.assertFalse(server.transport.disconnecting)


class SASLTests(SynchronousTestCase):
    def test_plain(self) -> None:
        self.assertEqual(sasl_response("PLAIN", "u", "p", AMQP0_9_1.tables), b"\0u\0p")


class HeartbeatTests(SynchronousTestCase):
    """Heartbeats both ways with the Clock."""

    def test_idle_client_sends_heartbeats(self) -> None:
        server = ScriptedServer(heartbeat=10)
        self.successResultOf(server.open(heartbeat=10))
        server.clock.advance(5)
        self.assertEqual(server.received(), [HEARTBEAT])
        server.client.dataReceived(HEARTBEAT_FRAME)
        server.clock.advance(5)
        self.assertEqual(server.received(), [HEARTBEAT])

    def test_silent_server_is_dropped(self) -> None:
        server = ScriptedServer(heartbeat=10)
        connection = self.successResultOf(server.open(heartbeat=10))
        closed = connection.whenClosed()
        for _ in range(3):
            server.clock.advance(5)
            self.assertFalse(server.transport.disconnecting)
        server.clock.advance(5)
        self.assertTrue(server.transport.disconnecting)
        server.lose()
        self.assertIn("missed heartbeats", str(self.successResultOf(closed)))

    def test_paused_reading_is_not_death(self) -> None:
        server = ScriptedServer(heartbeat=10)
        connection = self.successResultOf(server.open(heartbeat=10))
        connection.pauseReading(self)
        self.assertEqual(server.transport.producerState, "paused")
        server.clock.advance(40)
        self.assertFalse(server.transport.disconnecting)
        connection.resumeReading(self)
        self.assertEqual(server.transport.producerState, "producing")


class WriteBufferTests(SynchronousTestCase):
    def test_transport_pauses_and_resumes_the_connection(self) -> None:
        server = ScriptedServer()
        connection = self.successResultOf(server.open())
        self.assertIs(server.transport.producer, connection)
        self.assertTrue(connection.writable)
        self.successResultOf(connection.whenWritable())
        connection.pauseProducing()
        self.assertFalse(connection.writable)
        room = connection.whenWritable()
        self.assertNoResult(room)
        connection.resumeProducing()
        self.successResultOf(room)

    def test_loss_fails_the_wait(self) -> None:
        server = ScriptedServer()
        connection = self.successResultOf(server.open())
        connection.pauseProducing()
        room = connection.whenWritable()
        connection.stopProducing()
        server.lose()
        self.failureResultOf(room, ConnectionClosed)
        self.failureResultOf(connection.whenWritable(), ConnectionClosed)


class BlockedTests(SynchronousTestCase):
    def test_blocked_and_unblocked_reach_listeners(self) -> None:
        server = ScriptedServer()
        connection = self.successResultOf(server.open())
        seen: list[object] = []
        connection.addBlockedListener(seen.append)
        server.send(0, server.spec.ConnectionBlocked(reason="low on memory"))
        self.assertEqual(connection.blocked, "low on memory")
        server.send(0, server.spec.ConnectionUnblocked())
        self.assertIsNone(connection.blocked)
        self.assertEqual(seen, ["low on memory", None])


class ClosingTests(SynchronousTestCase):
    def test_disconnect_runs_the_handshake(self) -> None:
        server = ScriptedServer()
        connection = self.successResultOf(server.open())
        closed = connection.disconnect()
        [(_, close)] = server.methods()
        self.assertEqual((close.NAME, close.reply_code), ("connection.close", 200))
        self.assertNoResult(closed)
        server.send(0, server.spec.ConnectionCloseOk())
        self.assertTrue(server.transport.disconnecting)
        # A TLS transport would wait for its producer before closing.
        self.assertIsNone(server.transport.producer)
        server.lose(Failure(ConnectionDone()))
        self.assertEqual(self.successResultOf(closed).reply_code, 200)

    def test_disconnect_times_out(self) -> None:
        server = ScriptedServer(close_timeout=3)
        connection = self.successResultOf(server.open())
        connection.disconnect()
        server.clock.advance(2.9)
        self.assertFalse(server.transport.disconnecting)
        server.clock.advance(0.1)
        self.assertTrue(server.transport.disconnecting)

    def test_server_close_is_answered_and_reported(self) -> None:
        server = ScriptedServer()
        connection = self.successResultOf(server.open())
        closed = connection.whenClosed()
        server.send(0, server.spec.ConnectionClose(reply_code=320, reply_text="CONNECTION_FORCED - shutdown", class_id=0, method_id=0))
        self.assertEqual(server.names(), ["connection.close-ok"])
        server.lose(Failure(ConnectionDone()))
        ended = self.successResultOf(closed)
        self.assertEqual((ended.reply_code, ended.reply_text), (320, "CONNECTION_FORCED - shutdown"))

    def test_close_names_the_method(self) -> None:
        server = ScriptedServer()
        connection = self.successResultOf(server.open())
        closed = connection.whenClosed()
        server.send(0, server.spec.ConnectionClose(reply_code=503, reply_text="COMMAND_INVALID", class_id=60, method_id=40))
        server.lose(Failure(ConnectionDone()))
        self.assertEqual(self.successResultOf(closed).method_name, "basic.publish")

    def test_channel_after_close_fails(self) -> None:
        server = ScriptedServer()
        connection = self.successResultOf(server.open())
        server.lose()
        self.failureResultOf(connection.channel(), ConnectionClosed)

    def test_free_channel_numbers_are_reused(self) -> None:
        server = ScriptedServer()
        self.successResultOf(server.open())
        first = server.open_channel(1)
        server.open_channel(2)
        closing = first.close()
        server.send(1, server.spec.ChannelCloseOk())
        self.successResultOf(closing)
        server.methods()
        server.client.channel()
        self.assertEqual([(channel, method.NAME) for channel, method in server.methods()], [(1, "channel.open")])
