"""The server's channel layer, frame by frame, over fake transports and a Clock."""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.broker.handshake import Handshake
from txamqp09.testing.scripted import ScriptedClient, server_factory
from txamqp09.wire.frames import FRAME_BODY, FRAME_HEADER, HEARTBEAT_FRAME, ContentState, method_frame
from txamqp09.wire.versions import AMQP0_8, AMQP0_9


class ChannelLayerTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.factory = server_factory(self.clock, close_timeout=5)
        self.peer = ScriptedClient(self.factory)
        self.spec = self.peer.spec

    def declare(self, peer: ScriptedClient, name: str) -> None:
        peer.send(1, peer.spec.QueueDeclare(queue=name))
        peer.expect(1, "queue.declare-ok")

    def consume(self, peer: ScriptedClient, queue: str, tag: str = "c", no_ack: bool = True) -> None:
        peer.send(1, peer.spec.BasicConsume(queue=queue, consumer_tag=tag, no_ack=no_ack))
        peer.expect(1, "basic.consume-ok")

    def test_publish_fed_byte_by_byte(self) -> None:
        """The hot path reassembles frames split anywhere, bodies split in frames."""
        self.declare(self.peer, "q")
        self.consume(self.peer, "q")
        data = self.peer.publish_bytes(1, "q", b"x" * 10000)
        for index in range(len(data)):
            self.peer.feed(data[index : index + 1])
        self.assertEqual(self.peer.deliveries(), [b"x" * 10000])

    def test_content_state_of_a_publish(self) -> None:
        """The publisher's content state follows the frames; a method frame
        while the body is due is 505 naming what was expected."""
        self.declare(self.peer, "q")
        publisher = self.peer.server.channels[1].publisher
        frames = self.peer.publish_bytes(1, "q", b"abc")
        method_end = 8 + int.from_bytes(frames[3:7], "big")
        header_end = method_end + 8 + int.from_bytes(frames[method_end + 3 : method_end + 7], "big")
        self.assertIs(publisher.content_state, ContentState.METHOD)
        self.peer.feed(frames[:method_end])
        self.assertIs(publisher.content_state, ContentState.HEADER)
        self.peer.feed(frames[method_end:header_end])
        self.assertIs(publisher.content_state, ContentState.BODY)
        self.peer.send(1, self.spec.BasicQos(prefetch_count=1))
        close = self.peer.expect(0, "connection.close")
        self.assertEqual(
            (close.reply_code, close.reply_text),
            (505, "UNEXPECTED_FRAME - expected content body, got non content body frame instead"),
        )

    def test_deliveries_split_at_frame_max(self) -> None:
        self.declare(self.peer, "q")
        self.consume(self.peer, "q")
        self.peer.publish(1, "q", b"y" * 9000)
        frames = self.peer.frames()
        sizes = [len(payload) for frame_type, _, payload in frames if frame_type == FRAME_BODY]
        self.assertEqual(sizes, [4088, 4088, 824])
        self.assertEqual([t for t, _, _ in frames].count(FRAME_HEADER), 1)

    def test_soft_error_discards_until_close_ok(self) -> None:
        """After channel.close the channel's frames are dropped until close-ok."""
        self.peer.publish(1, "k", b"lost", exchange="missing")
        close = self.peer.expect(1, "channel.close")
        self.assertEqual((close.reply_code, close.class_id, close.method_id), (404, 60, 40))
        self.assertIn("no exchange 'missing'", close.reply_text)
        self.peer.send(1, self.spec.QueueDeclare(queue="ignored"))
        self.peer.publish(1, "k", b"ignored too")
        self.assertEqual(self.peer.frames(), [])
        self.peer.send(1, self.spec.ChannelCloseOk())
        self.peer.open(1)
        self.assertNotIn("ignored", self.factory.broker.vhosts["/"].queues)

    def test_unacked_requeued_when_channel_fails(self) -> None:
        self.declare(self.peer, "q")
        self.consume(self.peer, "q", no_ack=False)
        self.peer.publish(1, "q", b"m")
        self.assertEqual(self.peer.deliveries(), [b"m"])
        self.peer.send(1, self.spec.BasicAck(delivery_tag=42))
        self.assertEqual(self.peer.expect(1, "channel.close").reply_code, 406)
        queue = self.factory.broker.vhosts["/"].queues["q"]
        self.assertEqual([(entry[1].body, entry[2]) for entry in queue.messages], [(b"m", True)])
        self.assertEqual(queue.consumer_count, 0)

    def test_hard_error_discards_until_close_ok(self) -> None:
        self.peer.send(1, self.spec.ExchangeDeclare(exchange="x", type="nonsense"))
        close = self.peer.expect(0, "connection.close")
        self.assertEqual((close.reply_code, close.class_id, close.method_id), (503, 40, 10))
        self.peer.send(1, self.spec.QueueDeclare(queue="late"))
        self.assertEqual(self.peer.frames(), [])
        self.assertFalse(self.peer.disconnected)
        self.peer.send(0, self.spec.ConnectionCloseOk())
        self.assertTrue(self.peer.disconnected)

    def test_nothing_read_after_client_close(self) -> None:
        self.declare(self.peer, "q")
        self.peer.feed(
            self.peer.publish_bytes(1, "q", b"before")
            + method_frame(0, self.spec.ConnectionClose(reply_code=200, reply_text="bye"))
            + self.peer.publish_bytes(1, "q", b"after")
        )
        self.peer.expect(0, "connection.close-ok")
        queue = self.factory.broker.vhosts["/"].queues["q"]
        self.assertEqual([entry[1].body for entry in queue.messages], [b"before"])

    def test_close_timeout(self) -> None:
        """A client that never answers connection.close is dropped after close_timeout."""
        self.peer.send(1, self.spec.BasicConsume(queue="", consumer_tag="t"))
        self.assertEqual(self.peer.expect(1, "channel.close").reply_code, 404)
        self.peer.send(1, self.spec.ChannelCloseOk())
        self.peer.open(1)
        self.declare(self.peer, "q")
        self.consume(self.peer, "q", tag="same")
        self.peer.send(1, self.spec.BasicConsume(queue="q", consumer_tag="same"))
        self.assertEqual(self.peer.expect(0, "connection.close").reply_code, 530)
        self.clock.advance(4.9)
        self.assertFalse(self.peer.disconnected)
        self.clock.advance(0.2)
        self.assertTrue(self.peer.disconnected)

    def test_channel_not_open(self) -> None:
        self.peer.send(2, self.spec.QueueDeclare(queue="q"))
        self.assertEqual(self.peer.expect(0, "connection.close").reply_code, 504)

    def test_client_flow_pauses_deliveries(self) -> None:
        self.declare(self.peer, "q")
        self.consume(self.peer, "q")
        self.peer.send(1, self.spec.ChannelFlow(active=False))
        self.assertFalse(self.peer.expect(1, "channel.flow-ok").active)
        self.peer.publish(1, "q", b"held")
        self.assertEqual(self.peer.deliveries(), [])
        self.peer.send(1, self.spec.ChannelFlow(active=True))
        self.assertEqual(self.peer.deliveries(), [b"held"])

    def test_full_transport_holds_deliveries(self) -> None:
        self.declare(self.peer, "q")
        self.consume(self.peer, "q")
        self.peer.server.pauseProducing()
        self.peer.publish(1, "q", b"waiting")
        self.assertEqual(self.peer.deliveries(), [])
        self.peer.server.resumeProducing()
        self.assertEqual(self.peer.deliveries(), [b"waiting"])

    def test_misbehaving_connection_leaves_others_alone(self) -> None:
        other = ScriptedClient(self.factory)
        self.declare(other, "shared")
        self.consume(other, "shared")
        self.peer.feed(b"\x01\x00\x01\x00\x00\x00\x04abcd\x00")
        self.assertEqual(self.peer.expect(0, "connection.close").reply_code, 501)
        other.publish(1, "shared", b"still fine")
        self.assertEqual(other.deliveries(), [b"still fine"])

    def test_oversized_frame(self) -> None:
        self.peer.feed(b"\x03\x00\x01\x00\x01\x00\x00")
        self.assertEqual(self.peer.expect(0, "connection.close").reply_code, 501)

    def test_cancel_notify_only_when_advertised(self) -> None:
        notified = ScriptedClient(self.factory, capabilities={"consumer_cancel_notify": True})
        for peer in (self.peer, notified):
            self.declare(peer, "doomed")
            self.consume(peer, "doomed")
        self.peer.send(1, self.spec.QueueDelete(queue="doomed"))
        self.assertEqual(self.peer.names(), ["queue.delete-ok"])
        self.assertEqual(notified.expect(1, "basic.cancel").consumer_tag, "c")

    def test_confirms_on_the_wire(self) -> None:
        self.peer.send(1, self.spec.ConfirmSelect())
        self.peer.expect(1, "confirm.select-ok")
        self.peer.publish(1, "nowhere", b"1", mandatory=True)
        self.peer.publish(1, "nowhere", b"2")
        methods = self.peer.methods()
        self.assertEqual([m.NAME for _, m in methods], ["basic.return", "basic.ack", "basic.ack"])
        self.assertEqual((methods[0][1].reply_code, methods[0][1].routing_key), (312, "nowhere"))
        self.assertEqual([m.delivery_tag for _, m in methods[1:]], [1, 2])

    def test_confirms_gathered_into_multiple_acks(self) -> None:
        """Publishes handled in one read are acked at once; a nack splits the run."""
        self.peer.send(1, self.spec.QueueDeclare(
            queue="one", arguments={"x-max-length": 1, "x-overflow": "reject-publish"}))
        self.peer.expect(1, "queue.declare-ok")
        self.peer.send(1, self.spec.ConfirmSelect())
        self.peer.expect(1, "confirm.select-ok")
        self.peer.feed(b"".join(self.peer.publish_bytes(1, key, b"m") for key in ("a", "b", "one", "one", "c")))
        confirms = [(m.NAME, m.delivery_tag, m.multiple) for _, m in self.peer.methods()]
        self.assertEqual(
            confirms, [("basic.ack", 3, True), ("basic.nack", 4, False), ("basic.ack", 5, False)]
        )

    def test_get_ok_and_empty(self) -> None:
        self.declare(self.peer, "q")
        self.peer.publish(1, "q", b"one")
        self.peer.send(1, self.spec.BasicGet(queue="q", no_ack=True))
        get_ok = self.peer.expect(1, "basic.get-ok")
        self.assertEqual((get_ok.routing_key, get_ok.message_count, get_ok.delivery_tag), ("q", 0, 1))
        self.peer.frames()
        self.peer.send(1, self.spec.BasicGet(queue="q"))
        self.peer.expect(1, "basic.get-empty")

    def test_last_declared_queue_shortcut(self) -> None:
        """An empty queue name means the queue last declared on the channel."""
        self.peer.send(1, self.spec.QueueDeclare(queue=""))
        name = self.peer.expect(1, "queue.declare-ok").queue
        self.peer.send(1, self.spec.QueueBind(queue="", exchange="amq.direct"))
        self.peer.expect(1, "queue.bind-ok")
        self.peer.publish(1, name, b"via shortcut", exchange="amq.direct")
        self.peer.send(1, self.spec.QueuePurge(queue=""))
        self.assertEqual(self.peer.expect(1, "queue.purge-ok").message_count, 1)
        self.peer.open(2)
        self.peer.send(2, self.spec.QueuePurge(queue=""))
        self.assertEqual(self.peer.expect(2, "channel.close").reply_code, 404)

    def test_heartbeats(self) -> None:
        """The server sends heartbeats and drops a client silent for two intervals."""
        peer = ScriptedClient(self.factory, heartbeat=2)
        peer.frames()
        self.clock.advance(1)
        self.assertTrue(any(frame_type == 8 for frame_type, _, _ in peer.frames()))
        peer.feed(HEARTBEAT_FRAME)
        self.clock.advance(3)
        self.assertFalse(peer.disconnected)
        self.clock.advance(2)
        self.assertTrue(peer.disconnected)


class PublisherThrottleTests(SynchronousTestCase):
    """Publishers are held back while the queues hold more than the high watermark."""

    def setUp(self) -> None:
        self.clock = Clock()
        self.factory = server_factory(self.clock, high_watermark=1000)
        self.factory.startFactory()
        self.addCleanup(self.factory.stopFactory)

    def fill(self, peer: ScriptedClient) -> None:
        peer.send(1, peer.spec.QueueDeclare(queue="big"))
        peer.expect(1, "queue.declare-ok")
        peer.publish(1, "big", b"x" * 1200)
        self.clock.advance(self.factory.throttle.interval)

    def release(self) -> None:
        self.factory.broker.vhosts["/"].queues["big"].purge()
        self.clock.advance(self.factory.throttle.interval)

    def test_connection_blocked_for_clients_that_know_it(self) -> None:
        reader = ScriptedClient(self.factory)
        peer = ScriptedClient(self.factory, capabilities={"connection.blocked": True})
        self.fill(peer)
        self.assertEqual(peer.expect(0, "connection.blocked").reason[:30], "broker holds 1200 bytes of rea")
        self.assertEqual(peer.transport.producerState, "paused")
        self.assertEqual((reader.frames(), reader.transport.producerState), ([], "producing"))
        self.release()
        peer.expect(0, "connection.unblocked")
        self.assertEqual(peer.transport.producerState, "producing")

    def test_channel_flow_for_others(self) -> None:
        peer = ScriptedClient(self.factory, AMQP0_9)
        self.fill(peer)
        self.assertFalse(peer.expect(1, "channel.flow").active)
        self.release()
        self.assertTrue(peer.expect(1, "channel.flow").active)
        peer.send(1, peer.spec.ChannelFlowOk(active=True))
        self.assertEqual(peer.frames(), [])


class OlderVersionTests(SynchronousTestCase):
    """0-8 and 0-9 specifics: access tickets, 0-9's channel methods, recover."""

    def setUp(self) -> None:
        self.factory = server_factory()

    def test_access_request(self) -> None:
        for version in (AMQP0_8, AMQP0_9):
            peer = ScriptedClient(self.factory, version)
            peer.send(1, peer.spec.AccessRequest(realm="/data", active=True, read=True))
            self.assertEqual(peer.expect(1, "access.request-ok").ticket, 1)

    def test_ping_pong_served(self) -> None:
        """0-9's grammar: C:PING S:OK, then S:PONG C:OK; C:PONG S:OK."""
        peer = ScriptedClient(self.factory, AMQP0_9)
        peer.send(1, peer.spec.ChannelPing())
        peer.expect(1, "channel.ok")
        peer.expect(1, "channel.pong")
        peer.send(1, peer.spec.ChannelOk())
        peer.send(1, peer.spec.ChannelPong())
        peer.expect(1, "channel.ok")
        self.assertEqual(peer.frames(), [])

    def test_test_class_refused(self) -> None:
        peer = ScriptedClient(self.factory, AMQP0_8)
        peer.send(1, peer.spec.TestInteger())
        close = peer.expect(0, "connection.close")
        self.assertEqual(close.reply_code, 540)
        self.assertIn("not implemented", close.reply_text)

    def test_server_methods_from_client_refused(self) -> None:
        peer = ScriptedClient(self.factory, AMQP0_8)
        peer.send(1, peer.spec.BasicGetEmpty())
        self.assertEqual(peer.expect(0, "connection.close").reply_code, 503)

    def test_recover_has_no_answer_before_0_9_1(self) -> None:
        peer = ScriptedClient(self.factory, AMQP0_8)
        peer.send(1, peer.spec.QueueDeclare(queue="q"))
        peer.expect(1, "queue.declare-ok")
        peer.publish(1, "q", b"m")
        peer.send(1, peer.spec.BasicGet(queue="q"))
        peer.expect(1, "basic.get-ok")
        peer.frames()
        peer.send(1, peer.spec.BasicRecover(requeue=True))
        self.assertEqual(peer.frames(), [])
        self.assertEqual(self.factory.broker.vhosts["/"].queues["q"].message_count, 1)

    def test_global_qos_is_connection_wide(self) -> None:
        """0-8: qos global=true limits all channels of the connection together."""
        peer = ScriptedClient(self.factory, AMQP0_8)
        peer.open(2)
        peer.send(1, peer.spec.BasicQos(prefetch_count=1, global_=True))
        peer.expect(1, "basic.qos-ok")
        for channel, queue in ((1, "a"), (2, "b")):
            peer.send(channel, peer.spec.QueueDeclare(queue=queue))
            peer.expect(channel, "queue.declare-ok")
            peer.send(channel, peer.spec.BasicConsume(queue=queue, consumer_tag=queue))
            peer.expect(channel, "basic.consume-ok")
        for channel, queue in ((1, "a"), (2, "b")):
            peer.publish(channel, queue, queue.encode())
        self.assertEqual(peer.deliveries(), [b"a"])
        peer.feed(method_frame(1, peer.spec.BasicAck(delivery_tag=1)))
        self.assertEqual(peer.deliveries(), [b"b"])


class HandshakeStateTests(SynchronousTestCase):
    """Each handshake method is taken in one named state; elsewhere it is refused."""

    def setUp(self) -> None:
        self.peer = ScriptedClient(server_factory(), handshake=False)
        self.spec = self.peer.spec
        self.peer.feed(self.peer.version.header)
        self.peer.expect(0, "connection.start")

    def start_ok(self) -> None:
        self.peer.send(0, self.spec.ConnectionStartOk(
            client_properties={}, mechanism="PLAIN", response=b"\x00guest\x00guest", locale="en_US"))

    def logged_in(self) -> None:
        self.start_ok()
        self.peer.expect(0, "connection.tune")

    def tune_ok(self) -> None:
        self.peer.send(0, self.spec.ConnectionTuneOk(channel_max=0, frame_max=4096, heartbeat=0))

    def open(self) -> None:
        self.peer.send(0, self.spec.ConnectionOpen(virtual_host="/"))

    def assertRefused(self, code: int, text: str) -> None:
        close = self.peer.expect(0, "connection.close")
        self.assertEqual((close.reply_code, close.reply_text), (code, text))

    def test_states_in_order(self) -> None:
        server = self.peer.server
        self.assertIs(server.handshake.state, Handshake.STARTING)
        self.logged_in()
        self.assertIs(server.handshake.state, Handshake.TUNING)
        self.tune_ok()
        self.assertIs(server.handshake.state, Handshake.OPENING)
        self.open()
        self.peer.expect(0, "connection.open-ok")
        self.assertIs(server.handshake.state, Handshake.RUNNING)

    def test_tune_ok_before_start_ok(self) -> None:
        self.tune_ok()
        self.assertRefused(503, "COMMAND_INVALID - connection.tune-ok arrived out of order during negotiation")

    def test_open_before_tune_ok(self) -> None:
        self.logged_in()
        self.open()
        self.assertRefused(503, "COMMAND_INVALID - connection.open arrived out of order during negotiation")

    def test_second_tune_ok(self) -> None:
        self.logged_in()
        self.tune_ok()
        self.tune_ok()
        self.assertRefused(503, "COMMAND_INVALID - connection.tune-ok arrived out of order during negotiation")

    def test_second_start_ok(self) -> None:
        self.logged_in()
        self.start_ok()
        self.assertRefused(503, "COMMAND_INVALID - connection.start-ok arrived out of order during negotiation")

    def test_update_secret_before_open(self) -> None:
        self.logged_in()
        self.tune_ok()
        self.peer.send(0, self.spec.ConnectionUpdateSecret(new_secret=b"guest", reason="refresh"))
        self.assertRefused(
            503, "COMMAND_INVALID - connection.update-secret arrived before the connection was opened"
        )
