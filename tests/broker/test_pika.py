"""pika (BlockingConnection in a thread, and the Twisted adapter) against the broker."""

from __future__ import annotations

import socket
from typing import Any

import pika
from pika.adapters.twisted_connection import TwistedProtocolConnection
from pika.exceptions import (
    ChannelClosedByBroker,
    ConnectionClosedByBroker,
    NackError,
    UnroutableError,
)
from twisted.internet import defer, reactor
from twisted.internet.protocol import ClientCreator

from tests.broker.support import LoopbackTestCase


class BlockingTests(LoopbackTestCase):
    """0-9-1 behaviour as pika's BlockingConnection sees it."""

    def connect(self) -> pika.BlockingConnection:
        return pika.BlockingConnection(
            pika.ConnectionParameters("127.0.0.1", self.port, frame_max=4096)
        )

    def run_client(self, scenario: Any) -> defer.Deferred[Any]:
        def in_thread() -> Any:
            connection = self.connect()
            try:
                return scenario(connection)
            finally:
                if connection.is_open:
                    connection.close()

        return self.in_thread(in_thread)

    @defer.inlineCallbacks
    def test_round_trip_keeps_properties_and_large_bodies(self) -> Any:
        """Properties arrive as published; a body larger than frame_max is split and joined."""
        big = bytes(range(256)) * 100

        def scenario(connection: pika.BlockingConnection) -> Any:
            channel = connection.channel()
            queue = channel.queue_declare("", exclusive=True).method.queue
            properties = pika.BasicProperties(
                content_type="application/octet-stream", headers={"n": 1, "s": "text"},
                delivery_mode=2, correlation_id="c-1", priority=3,
            )
            channel.basic_publish("", queue, big, properties)
            channel.basic_publish("", queue, b"", pika.BasicProperties())
            first = channel.basic_get(queue, auto_ack=True)
            second = channel.basic_get(queue, auto_ack=True)
            empty = channel.basic_get(queue, auto_ack=True)
            return queue, first, second, empty

        queue, (method, properties, body), second, empty = yield self.run_client(scenario)
        self.assertEqual(body, big)
        self.assertEqual((method.exchange, method.routing_key, method.message_count), ("", queue, 1))
        self.assertEqual(properties.headers, {"n": 1, "s": "text"})
        self.assertEqual(
            (properties.content_type, properties.delivery_mode, properties.correlation_id, properties.priority),
            ("application/octet-stream", 2, "c-1", 3),
        )
        self.assertEqual(second[2], b"")
        self.assertEqual(empty, (None, None, None))

    @defer.inlineCallbacks
    def test_topic_headers_and_exchange_bindings(self) -> Any:
        def scenario(connection: pika.BlockingConnection) -> Any:
            channel = connection.channel()
            channel.exchange_declare("events", "topic")
            channel.exchange_declare("mirror", "fanout")
            channel.exchange_bind("mirror", "events", "audit.#")
            channel.queue_declare("orders")
            channel.queue_declare("audit")
            channel.queue_declare("pdf")
            channel.queue_bind("orders", "events", "order.*")
            channel.queue_bind("audit", "mirror")
            channel.queue_bind("pdf", "amq.headers", arguments={"x-match": "all", "format": "pdf"})
            channel.basic_publish("events", "order.created", b"o1")
            channel.basic_publish("events", "order.created.late", b"nowhere")
            channel.basic_publish("events", "audit.login", b"a1")
            channel.basic_publish("amq.headers", "", b"p1", pika.BasicProperties(headers={"format": "pdf"}))
            channel.basic_publish("amq.headers", "", b"z1", pika.BasicProperties(headers={"format": "zip"}))
            return [
                [channel.basic_get(name, auto_ack=True)[2] for _ in range(2)]
                for name in ("orders", "audit", "pdf")
            ]

        self.assertEqual(
            (yield self.run_client(scenario)), [[b"o1", None], [b"a1", None], [b"p1", None]]
        )

    @defer.inlineCallbacks
    def test_consume_round_robin_ack_and_prefetch(self) -> Any:
        def scenario(connection: pika.BlockingConnection) -> Any:
            channel = connection.channel()
            channel.queue_declare("work")
            channel.basic_qos(prefetch_count=2)
            received: list[tuple[str, bytes]] = []

            def on_message(channel: Any, method: Any, properties: Any, body: bytes) -> None:
                received.append((method.consumer_tag, body))

            channel.basic_consume("work", on_message, consumer_tag="a")
            channel.basic_consume("work", on_message, consumer_tag="b")
            for number in range(6):
                channel.basic_publish("", "work", str(number).encode())
            connection.process_data_events(time_limit=0)
            while len(received) < 4:
                connection.process_data_events(time_limit=1)
            return received

        received = yield self.run_client(scenario)
        self.assertEqual(received, [("a", b"0"), ("b", b"1"), ("a", b"2"), ("b", b"3")])

    @defer.inlineCallbacks
    def test_flow_and_global_qos(self) -> Any:
        """channel.flow(false) holds deliveries; a global window is shared by the channel's consumers."""

        def scenario(connection: pika.BlockingConnection) -> Any:
            channel = connection.channel()
            channel.basic_qos(prefetch_count=3, global_qos=True)
            for name in ("left", "right"):
                channel.queue_declare(name)
            received: list[bytes] = []
            for name in ("left", "right"):
                channel.basic_consume(name, lambda c, m, p, body: received.append(body))
            channel.flow(False)
            for number in range(3):
                channel.basic_publish("", "left", b"l%d" % number)
                channel.basic_publish("", "right", b"r%d" % number)
            held = channel.queue_declare("left", passive=True).method.message_count
            channel.flow(True)
            while len(received) < 3:
                connection.process_data_events(time_limit=1)
            waiting = sum(
                channel.queue_declare(name, passive=True).method.message_count for name in ("left", "right")
            )
            return held, sorted(received), waiting

        held, received, waiting = yield self.run_client(scenario)
        self.assertEqual(held, 3)
        self.assertEqual(len(received), 3)
        self.assertEqual(waiting, 3)

    @defer.inlineCallbacks
    def test_unacked_messages_return_in_order_redelivered(self) -> Any:
        def scenario(connection: pika.BlockingConnection) -> Any:
            channel = connection.channel()
            channel.queue_declare("jobs")
            for number in range(4):
                channel.basic_publish("", "jobs", str(number).encode())
            first = channel.basic_get("jobs")
            second = channel.basic_get("jobs")
            channel.basic_ack(second[0].delivery_tag)
            channel.basic_get("jobs")
            channel.close()
            again = connection.channel()
            return [
                (body, method.redelivered)
                for method, _, body in (again.basic_get("jobs", auto_ack=True) for _ in range(3))
            ], first[0].redelivered

        order, first_redelivered = yield self.run_client(scenario)
        self.assertFalse(first_redelivered)
        self.assertEqual(order, [(b"0", True), (b"2", True), (b"3", False)])

    @defer.inlineCallbacks
    def test_reject_nack_and_recover(self) -> Any:
        def scenario(connection: pika.BlockingConnection) -> Any:
            channel = connection.channel()
            channel.queue_declare("r")
            for number in range(4):
                channel.basic_publish("", "r", str(number).encode())
            tags = [channel.basic_get("r")[0].delivery_tag for _ in range(4)]
            channel.basic_reject(tags[0], requeue=False)
            channel.basic_nack(tags[2], multiple=True, requeue=True)
            channel.basic_recover(requeue=True)
            return [channel.basic_get("r", auto_ack=True)[2] for _ in range(4)]

        self.assertEqual((yield self.run_client(scenario)), [b"1", b"2", b"3", None])

    @defer.inlineCallbacks
    def test_publisher_confirms(self) -> Any:
        """Unroutable mandatory messages come back; a full reject-publish queue nacks."""

        def scenario(connection: pika.BlockingConnection) -> Any:
            channel = connection.channel()
            channel.confirm_delivery()
            channel.queue_declare("one", arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
            channel.basic_publish("", "one", b"fits")
            outcomes = []
            for routing_key, mandatory in (("nowhere", True), ("one", False)):
                try:
                    channel.basic_publish("", routing_key, b"x", mandatory=mandatory)
                    outcomes.append("ack")
                except UnroutableError:
                    outcomes.append("returned")
                except NackError:
                    outcomes.append("nack")
            return outcomes

        self.assertEqual((yield self.run_client(scenario)), ["returned", "nack"])

    @defer.inlineCallbacks
    def test_transactions(self) -> Any:
        def scenario(connection: pika.BlockingConnection) -> Any:
            channel = connection.channel()
            channel.queue_declare("tx")
            channel.basic_publish("", "tx", b"acked-later")
            channel.tx_select()
            tag = channel.basic_get("tx")[0].delivery_tag
            channel.basic_publish("", "tx", b"rolled-back")
            channel.basic_ack(tag)
            channel.tx_rollback()
            during = channel.queue_declare("tx", passive=True).method.message_count
            channel.basic_publish("", "tx", b"committed")
            channel.basic_ack(tag)
            before_commit = channel.queue_declare("tx", passive=True).method.message_count
            channel.tx_commit()
            return during, before_commit, channel.basic_get("tx", auto_ack=True)[2]

        self.assertEqual((yield self.run_client(scenario)), (0, 0, b"committed"))
        self.assertEqual(self.queue("tx").message_count, 0)

    @defer.inlineCallbacks
    def test_server_cancels_consumer_of_deleted_queue(self) -> Any:
        def scenario(connection: pika.BlockingConnection) -> Any:
            channel = connection.channel()
            channel.queue_declare("doomed")
            cancelled: list[str] = []
            channel.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
            channel.basic_consume("doomed", lambda *args: None, consumer_tag="watcher")
            other = connection.channel()
            count = other.queue_delete("doomed").method.message_count
            while not cancelled:
                connection.process_data_events(time_limit=1)
            return cancelled, count

        self.assertEqual((yield self.run_client(scenario)), (["watcher"], 0))

    @defer.inlineCallbacks
    def test_queue_purge_delete_and_counts(self) -> Any:
        def scenario(connection: pika.BlockingConnection) -> Any:
            channel = connection.channel()
            channel.queue_declare("counted")
            for _ in range(3):
                channel.basic_publish("", "counted", b"m")
            declared = channel.queue_declare("counted", passive=True).method
            purged = channel.queue_purge("counted").method.message_count
            channel.basic_publish("", "counted", b"m")
            deleted = channel.queue_delete("counted").method.message_count
            return declared.message_count, declared.consumer_count, purged, deleted

        self.assertEqual((yield self.run_client(scenario)), (3, 0, 3, 1))

    def expect_channel_error(self, code: int, action: Any) -> defer.Deferred[Any]:
        """*action(channel)* closes the channel with *code*; the connection stays usable."""

        def scenario(connection: pika.BlockingConnection) -> Any:
            channel = connection.channel()
            try:
                action(channel)
            except ChannelClosedByBroker as error:
                still_open = connection.channel().queue_declare("", exclusive=True).method.queue
                return error.reply_code, error.reply_text, bool(still_open)
            return None

        def check(result: Any) -> None:
            self.assertIsNotNone(result, "no channel error")
            self.assertEqual((result[0], result[2]), (code, True), result[1])

        return self.run_client(scenario).addCallback(check)

    def test_404_publish_to_missing_exchange(self) -> defer.Deferred[Any]:
        def action(channel: Any) -> None:
            channel.basic_publish("missing", "k", b"x")
            channel.queue_declare("", exclusive=True)

        return self.expect_channel_error(404, action)

    def test_404_passive_declare(self) -> defer.Deferred[Any]:
        return self.expect_channel_error(404, lambda channel: channel.queue_declare("nope", passive=True))

    def test_406_exchange_type_mismatch(self) -> defer.Deferred[Any]:
        def action(channel: Any) -> None:
            channel.exchange_declare("typed", "direct")
            channel.exchange_declare("typed", "fanout")

        return self.expect_channel_error(406, action)

    def test_406_unknown_delivery_tag(self) -> defer.Deferred[Any]:
        def action(channel: Any) -> None:
            channel.basic_ack(99)
            channel.queue_declare("", exclusive=True)

        return self.expect_channel_error(406, action)

    def test_403_reserved_exchange_name(self) -> defer.Deferred[Any]:
        return self.expect_channel_error(403, lambda channel: channel.exchange_declare("amq.custom", "direct"))

    @defer.inlineCallbacks
    def test_405_exclusive_queue_of_another_connection(self) -> Any:
        def scenario(connection: pika.BlockingConnection) -> Any:
            owner = connection.channel()
            owner.queue_declare("private", exclusive=True)
            other = self.connect()
            try:
                other.channel().queue_declare("private", passive=True)
            except ChannelClosedByBroker as error:
                return error.reply_code, owner.queue_declare("private", passive=True).method.queue
            finally:
                other.close()

        self.assertEqual((yield self.run_client(scenario)), (405, "private"))

    @defer.inlineCallbacks
    def test_exclusive_queue_goes_with_its_connection(self) -> Any:
        def scenario(connection: pika.BlockingConnection) -> Any:
            connection.channel().queue_declare("mine", exclusive=True)

        yield self.run_client(scenario)
        self.assertNotIn("mine", self.server.broker.vhosts["/"].queues)

    def expect_connection_error(self, code: int, action: Any) -> defer.Deferred[Any]:
        def scenario(connection: pika.BlockingConnection) -> Any:
            try:
                action(connection.channel())
            except ConnectionClosedByBroker as error:
                return error.reply_code
            return None

        return self.run_client(scenario).addCallback(self.assertEqual, code)

    def test_503_unknown_exchange_type(self) -> defer.Deferred[Any]:
        return self.expect_connection_error(503, lambda channel: channel.exchange_declare("odd", "weird"))


class IsolationTests(LoopbackTestCase):
    """One connection's faults or slowness do not reach the others."""

    def raw_socket(self) -> socket.socket:
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        self.addCleanup(raw.close)
        return raw

    def connection_close(self, raw: socket.socket) -> bytes:
        """Read frames from *raw* up to the broker's connection.close; its
        whole method payload (frames may arrive in any pieces)."""
        received = b""
        while True:
            while len(received) >= 7:
                kind, size = received[0], int.from_bytes(received[3:7], "big")
                if len(received) < 8 + size:
                    break
                payload, received = received[7:7 + size], received[8 + size:]
                if kind == 1 and payload[:4] == b"\x00\x0a\x00\x32":
                    return payload
            data = raw.recv(65536)
            if not data:
                raise AssertionError(f"the broker closed the socket without connection.close: {received!r}")
            received += data

    @defer.inlineCallbacks
    def test_garbage_and_a_stalled_reader(self) -> Any:
        def scenario() -> Any:
            parameters = pika.ConnectionParameters("127.0.0.1", self.port)
            healthy = pika.BlockingConnection(parameters)
            try:
                channel = healthy.channel()
                channel.queue_declare("stalled")
                channel.queue_declare("fine")
                stalled = pika.BlockingConnection(parameters)
                stalled.channel().basic_consume("stalled", lambda *args: None, auto_ack=True)
                # The stalled client never reads again, while 32 MiB are sent to
                # it: more than the socket buffers on both sides hold.
                for _ in range(512):
                    channel.basic_publish("", "stalled", b"s" * 65536)
                garbage = self.raw_socket()
                garbage.sendall(b"AMQP\x00\x00\x09\x01" + b"\x01\x00\x00\x00\x00\x00\x04nope\x00")
                answer = self.connection_close(garbage)
                for number in range(3):
                    channel.basic_publish("", "fine", b"%d" % number)
                got = [channel.basic_get("fine", auto_ack=True)[2] for _ in range(3)]
                return got, answer
            finally:
                healthy.close()

        got, answer = yield self.in_thread(scenario)
        self.assertEqual(got, [b"0", b"1", b"2"])
        self.assertEqual(answer[:6], b"\x00\x0a\x00\x32\x01\xf5")  # connection.close 501
        self.assertGreater(self.queue("stalled").message_count, 0)


class BlockedConnectionTests(LoopbackTestCase):
    """A publisher filling the broker past its high watermark is blocked, then released."""

    broker_options = {"high_watermark": 1000}

    @defer.inlineCallbacks
    def test_blocked_and_unblocked(self) -> Any:
        def scenario() -> Any:
            parameters = pika.ConnectionParameters("127.0.0.1", self.port)
            publisher = pika.BlockingConnection(parameters)
            drainer = pika.BlockingConnection(parameters)
            try:
                events: list[str] = []
                publisher.add_on_connection_blocked_callback(lambda *args: events.append("blocked"))
                publisher.add_on_connection_unblocked_callback(lambda *args: events.append("unblocked"))
                channel = publisher.channel()
                channel.queue_declare("flood")
                channel.basic_publish("", "flood", b"x" * 1500)
                while not events:
                    publisher.process_data_events(time_limit=1)
                purged = drainer.channel().queue_purge("flood").method.message_count
                while len(events) < 2:
                    publisher.process_data_events(time_limit=1)
                return events, purged
            finally:
                publisher.close()
                drainer.close()

        self.assertEqual((yield self.in_thread(scenario)), (["blocked", "unblocked"], 1))


class TwistedAdapterTests(LoopbackTestCase):
    """pika's Twisted adapter, in the reactor thread next to the broker."""

    @defer.inlineCallbacks
    def connect(self) -> Any:
        protocol = yield ClientCreator(
            reactor, TwistedProtocolConnection, pika.ConnectionParameters()
        ).connectTCP("127.0.0.1", self.port)
        yield protocol.ready
        self.addCleanup(self.disconnect, protocol)
        return protocol

    def disconnect(self, protocol: Any) -> Any:
        if protocol.is_open:
            protocol.close()
            return protocol.closed
        return None

    @defer.inlineCallbacks
    def test_consume_and_ack(self) -> Any:
        protocol = yield self.connect()
        channel = yield protocol.channel()
        yield channel.queue_declare(queue="tw")
        yield channel.basic_qos(prefetch_count=10)
        queue_object, _tag = yield channel.basic_consume(queue="tw")
        for number in range(3):
            channel.basic_publish("", "tw", str(number).encode())
        bodies = []
        for _ in range(3):
            _channel, method, _properties, body = yield queue_object.get()
            bodies.append(body)
            yield channel.basic_ack(method.delivery_tag)
        self.assertEqual(bodies, [b"0", b"1", b"2"])
        self.assertEqual(self.queue("tw").message_count, 0)

    @defer.inlineCallbacks
    def test_channel_error_leaves_other_channels(self) -> Any:
        protocol = yield self.connect()
        doomed = yield protocol.channel()
        survivor = yield protocol.channel()
        with self.assertRaises(ChannelClosedByBroker) as caught:
            yield doomed.queue_declare(queue="absent", passive=True)
        self.assertEqual(caught.exception.reply_code, 404)
        result = yield survivor.queue_declare(queue="", exclusive=True)
        self.assertTrue(result.method.queue.startswith("amq.gen-"))
