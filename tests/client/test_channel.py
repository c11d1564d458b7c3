"""Channels offline: requests and responses, closing, content, confirms, flow, the generated API."""

from __future__ import annotations

import inspect
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionDone
from twisted.logger import LogLevel, capturedLogs, formatEvent
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.client.api import channel_class, client_sent_methods
from txamqp09.client.base import ChannelState
from txamqp09.client.channel import Channel
from txamqp09.client.errors import (
    AlreadySettled,
    ChannelClosed,
    ConnectionClosed,
    MessageNacked,
    NotInThisVersion,
)
from txamqp09.testing.scripted import ScriptedServer
from txamqp09.wire.errors import NotFound
from txamqp09.wire.fields import Content
from txamqp09.wire.versions import (
    AMQP0_8,
    AMQP0_9,
    AMQP0_9_1,
    VERSIONS,
    ProtocolVersion,
)


def opened(version: ProtocolVersion = AMQP0_9_1, **parameters: Any) -> tuple[ScriptedServer, Channel]:
    """A scripted server with an open connection and channel 1."""
    server = ScriptedServer(version, **parameters)
    server.open()
    return server, server.open_channel(1)


class RequestTests(SynchronousTestCase):
    def test_response_fires_the_request(self) -> None:
        server, channel = opened()
        declared = channel.queue_declare("q", durable=True)
        [(number, declare)] = server.methods()
        self.assertEqual((number, declare.NAME, declare.queue, declare.durable), (1, "queue.declare", "q", True))
        server.send(1, server.spec.QueueDeclareOk(queue="q", message_count=3, consumer_count=0))
        self.assertEqual(self.successResultOf(declared).message_count, 3)

    def test_pipelined_requests_are_answered_in_order(self) -> None:
        server, channel = opened()
        first = channel.exchange_declare("x", "topic")
        second = channel.queue_bind(queue="q", exchange="x", routing_key="#")
        self.assertEqual(server.names(), ["exchange.declare", "queue.bind"])
        server.send(1, server.spec.ExchangeDeclareOk())
        self.assertNoResult(second)
        server.send(1, server.spec.QueueBindOk())
        self.assertEqual(self.successResultOf(first).NAME, "exchange.declare-ok")
        self.assertEqual(self.successResultOf(second).NAME, "queue.bind-ok")

    def test_nowait_fires_at_once(self) -> None:
        server, channel = opened()
        self.assertIsNone(self.successResultOf(channel.queue_delete(queue="q", nowait=True)))
        self.assertEqual(server.names(), ["queue.delete"])
        # A response now would have no request to answer: nothing waits.
        self.assertFalse(channel._requests)

    def test_method_without_response_returns_none(self) -> None:
        server, channel = opened()
        self.assertIsNone(channel.basic_recover_async(requeue=True))
        self.assertEqual(server.names(), ["basic.recover-async"])

    def test_unexpected_response_closes_the_connection(self) -> None:
        server, channel = opened()
        declaring = channel.queue_declare("q")
        server.methods()
        server.send(1, server.spec.ExchangeDeclareOk())
        [(number, close)] = server.methods()
        self.assertEqual((number, close.NAME, close.reply_code), (0, "connection.close", 503))
        self.assertIn("waited for queue.declare-ok", close.reply_text)
        # Everything on the connection fails at once, with the same reason.
        self.assertEqual(self.failureResultOf(declaring, ConnectionClosed).value.reply_code, 503)
        self.assertRaises(ConnectionClosed, channel.basic_publish, b"x")

    def test_basic_get(self) -> None:
        server, channel = opened()
        got = channel.basic_get("q")
        server.send_content(1, server.spec.BasicGetOk(delivery_tag=7, exchange="", routing_key="q", message_count=2), b"body")
        message = self.successResultOf(got)
        assert message is not None
        self.assertEqual((message.body, message.delivery_tag, message.method.message_count), (b"body", 7, 2))
        empty = channel.basic_get("q")
        server.send(1, server.spec.BasicGetEmpty())
        self.assertIsNone(self.successResultOf(empty))

    def test_missing_field_of_the_version_refused(self) -> None:
        server, channel = opened(AMQP0_8)
        self.failureResultOf(channel.basic_consume("q", arguments={"x-priority": 1}), NotInThisVersion)
        channel.basic_consume("q")
        self.assertEqual(server.names(), ["basic.consume"])

    def test_method_missing_from_the_version(self) -> None:
        _, channel = opened(AMQP0_9)
        failure = self.failureResultOf(channel.confirm_select(), NotInThisVersion)
        self.assertIn("confirm.select does not exist in AMQP 0-9", str(failure.value))
        self.assertRaises(NotInThisVersion, channel.nack, 1)


class ClosingTests(SynchronousTestCase):
    def server_closes(self, server: ScriptedServer) -> None:
        server.send(1, server.spec.ChannelClose(reply_code=404, reply_text="NOT_FOUND - no queue 'q'", class_id=50, method_id=10))

    def test_server_close_fails_pending_with_its_reply(self) -> None:
        server, channel = opened()
        pending = channel.queue_declare("q", passive=True)
        server.methods()
        self.server_closes(server)
        closed = self.failureResultOf(pending, ChannelClosed).value
        self.assertEqual(
            (closed.reply_code, closed.reply_text, closed.class_id, closed.method_id, closed.method_name),
            (404, "NOT_FOUND - no queue 'q'", 50, 10, "queue.declare"),
        )
        self.assertIsInstance(closed.error, NotFound)
        self.assertEqual(server.names(), ["channel.close-ok"])
        self.assertIs(channel.state, ChannelState.CLOSED)
        self.assertNotIn(1, server.client.channels)

    def test_later_calls_fail_with_the_same_reply(self) -> None:
        server, channel = opened()
        self.server_closes(server)
        self.assertEqual(self.failureResultOf(channel.queue_declare("q"), ChannelClosed).value.reply_code, 404)
        self.assertRaises(ChannelClosed, channel.basic_publish, b"x")
        self.assertRaises(ChannelClosed, channel.ack, 1)
        self.assertEqual(self.successResultOf(channel.whenClosed()).reply_code, 404)

    def test_client_close(self) -> None:
        server, channel = opened()
        pending = channel.queue_declare("q")
        closing = channel.close()
        self.failureResultOf(pending, ChannelClosed)
        self.assertEqual(server.names(), ["queue.declare", "channel.close"])
        # Whatever the server sends before close-ok is dropped.
        server.send_content(1, server.spec.BasicDeliver(consumer_tag="t", delivery_tag=1), b"late")
        server.send(1, server.spec.QueueDeclareOk(queue="q"))
        self.assertNoResult(closing)
        server.send(1, server.spec.ChannelCloseOk())
        self.successResultOf(closing)
        self.assertIs(channel.state, ChannelState.CLOSED)
        self.assertRaises(ChannelClosed, channel.basic_publish, b"x")

    def test_crossing_closes_end_the_channel(self) -> None:
        server, channel = opened()
        closing = channel.close()
        self.server_closes(server)
        self.successResultOf(closing)
        server.send(1, server.spec.ChannelCloseOk())
        self.assertIs(server.client.state.name, "OPEN")

    def test_connection_loss_fails_everything(self) -> None:
        server, channel = opened()
        selecting = channel.confirm_select()
        server.send(1, server.spec.ConfirmSelectOk())
        self.successResultOf(selecting)
        pending = channel.queue_declare("q")
        confirm = channel.basic_publish(b"x")
        server.lose(Failure(ConnectionDone("bye")))
        self.failureResultOf(pending, ConnectionClosed)
        self.failureResultOf(confirm, ConnectionClosed)
        self.assertRaises(ConnectionClosed, channel.basic_publish, b"x")

    def test_disconnect_ends_channels_cleanly(self) -> None:
        server, channel = opened()
        pending = channel.queue_declare("q")
        server.client.disconnect()
        failure = self.failureResultOf(pending, ConnectionClosed)
        self.assertEqual(failure.value.reply_code, 200)

    def test_protocol_error_on_a_channel_closes_it(self) -> None:
        server, channel = opened()
        server.send(1, server.spec.BasicAck(delivery_tag=1))
        [(_, close)] = server.methods()
        self.assertEqual((close.NAME, close.reply_code, close.class_id, close.method_id), ("channel.close", 406, 60, 80))
        self.assertIs(channel.state, ChannelState.CLOSING)
        self.assertRaises(ChannelClosed, channel.basic_publish, b"x")
        server.send(1, server.spec.ChannelCloseOk())
        self.assertIs(channel.state, ChannelState.CLOSED)


class PublishTests(SynchronousTestCase):
    def test_publish_with_properties(self) -> None:
        server, channel = opened()
        self.assertIsNone(channel.basic_publish(b"hi", "x", "k", {"content_type": "text/plain", "headers": {"a": 1}}, mandatory=True))
        [(number, command)] = server.received()
        self.assertEqual((number, command.method.exchange, command.method.routing_key, command.method.mandatory), (1, "x", "k", True))
        self.assertEqual(command.body, b"hi")
        self.assertEqual((command.properties.content_type, command.properties.headers), ("text/plain", {"a": 1}))

    def test_properties_object(self) -> None:
        server, channel = opened()
        channel.publish(bytearray(b"hi"), properties=server.spec.BasicProperties(delivery_mode=2))
        [(_, command)] = server.received()
        self.assertEqual((command.body, command.properties.delivery_mode), (b"hi", 2))

    def test_body_split_to_frame_max(self) -> None:
        server = ScriptedServer()
        server.open(frame_max=4096)
        channel = server.open_channel(1)
        body = bytes(range(256)) * 40
        channel.basic_publish(body, routing_key="q")
        data = server.transport.value()
        self.assertEqual(data.count(b"\xce\x03\x00\x01"), 3)  # header end + 2 body frames, the third follows a body end
        [(_, command)] = server.received()
        self.assertEqual(command.body, body)

    def test_text_body_refused(self) -> None:
        _, channel = opened()
        error = self.assertRaises(TypeError, channel.basic_publish, "text")
        self.assertIn("encode text first", str(error))

    def test_empty_body(self) -> None:
        server, channel = opened()
        channel.basic_publish(b"", routing_key="q")
        [(_, command)] = server.received()
        self.assertEqual(command.body, b"")

    def test_publish_many_in_one_write(self) -> None:
        """Every message with its own routing, properties and body, in order, in one write."""
        server, channel = opened()
        writes = []
        write = channel.connection.transport.write

        def counted(data: bytes) -> None:
            writes.append(data)
            write(data)

        channel.connection.transport.write = counted  # type: ignore[method-assign]
        published = channel.basic_publish_many(
            [(b"one", "x", "a", {"message_id": "1"}), (bytearray(b"two"), "", "b", None), (b"", "y", "c", {"priority": 3})],
            mandatory=True,
        )
        self.assertIsNone(published)
        self.assertEqual(len(writes), 1)
        received = [command for _, command in server.received()]
        self.assertEqual(
            [(c.method.exchange, c.method.routing_key, c.method.mandatory, c.body) for c in received],
            [("x", "a", True, b"one"), ("", "b", True, b"two"), ("y", "c", True, b"")],
        )
        self.assertEqual([(c.properties.message_id, c.properties.priority) for c in received],
                         [("1", None), (None, None), (None, 3)])
        self.assertIsNone(channel.basic_publish_many([]))
        self.assertEqual(server.received(), [])


    def test_publish_encoded_is_publish_many_with_encoded_properties(self) -> None:
        """Bodies of one frame, of none and of several (frame_max 4096),
        each with its encoded properties, in order, in one write; the
        same bytes as basic_publish_many sends."""
        server = ScriptedServer()
        server.open(frame_max=4096)
        channel = server.open_channel(1)
        spec = server.spec
        properties = [spec.BasicProperties(message_id=f"m-{n}", delivery_mode=2).encode() for n in range(4)]
        bodies = [b"one", b"", bytes(range(256)) * 40, b"last"]
        server.transport.clear()
        self.assertIsNone(channel.basic_publish_encoded("x", "k", properties, bodies, mandatory=True))
        encoded = server.transport.value()
        received = [command for _, command in server.received()]
        self.assertEqual(
            [(c.method.exchange, c.method.routing_key, c.method.mandatory, c.body, c.properties.message_id)
             for c in received],
            [("x", "k", True, body, f"m-{n}") for n, body in enumerate(bodies)],
        )
        channel.basic_publish_many([(body, "x", "k", raw) for raw, body in zip(properties, bodies)], mandatory=True)
        self.assertEqual(server.transport.value(), encoded)
        server.received()
        self.assertIsNone(channel.basic_publish_encoded("x", "k", [], []))
        self.assertRaises(ValueError, channel.basic_publish_encoded, "x", "k", properties, bodies[:3])
        self.assertEqual(server.received(), [])


class ConfirmTests(SynchronousTestCase):
    def confirming(self) -> tuple[ScriptedServer, Channel]:
        server, channel = opened()
        selected = channel.confirm_select()
        server.send(1, server.spec.ConfirmSelectOk())
        self.successResultOf(selected)
        server.methods()
        return server, channel

    def publish(self, channel: Channel, body: bytes) -> Deferred[int]:
        confirmation = channel.basic_publish(body)
        assert confirmation is not None
        return confirmation

    def test_ack_fires_with_the_tag(self) -> None:
        server, channel = self.confirming()
        first, second = self.publish(channel, b"1"), self.publish(channel, b"2")
        server.send(1, server.spec.BasicAck(delivery_tag=2))
        self.assertNoResult(first)
        self.assertEqual(self.successResultOf(second), 2)
        self.assertEqual(channel.unconfirmed, 1)

    def test_multiple_ack(self) -> None:
        server, channel = self.confirming()
        published = [self.publish(channel, b"%d" % n) for n in range(4)]
        server.send(1, server.spec.BasicAck(delivery_tag=3, multiple=True))
        self.assertEqual([self.successResultOf(d) for d in published[:3]], [1, 2, 3])
        self.assertNoResult(published[3])
        server.send(1, server.spec.BasicAck(delivery_tag=0, multiple=True))
        self.assertEqual(self.successResultOf(published[3]), 4)

    def test_nack_fails(self) -> None:
        server, channel = self.confirming()
        published = [self.publish(channel, b"%d" % n) for n in range(2)]
        server.send(1, server.spec.BasicNack(delivery_tag=2, multiple=True))
        for number, deferred in enumerate(published, 1):
            self.assertEqual(self.failureResultOf(deferred, MessageNacked).value.delivery_tag, number)

    def test_ack_without_confirm_mode_closes_the_channel(self) -> None:
        server, channel = opened()
        server.send(1, server.spec.BasicAck(delivery_tag=1))
        self.assertEqual(server.names(), ["channel.close"])
        self.assertIn("not in confirm mode", str(channel.closed_by))

    def test_publish_many_confirmed_together(self) -> None:
        server, channel = self.confirming()
        single = self.publish(channel, b"0")
        group = channel.basic_publish_many([(b"%d" % n, "", "q", None) for n in range(1, 4)])
        assert group is not None
        self.assertEqual(channel.unconfirmed, 4)
        server.send(1, server.spec.BasicAck(delivery_tag=3, multiple=True))
        self.assertEqual(self.successResultOf(single), 1)
        self.assertNoResult(group)
        server.send(1, server.spec.BasicAck(delivery_tag=4))
        self.assertEqual((self.successResultOf(group), channel.unconfirmed), (4, 0))

    def test_publish_encoded_confirmed_together(self) -> None:
        server, channel = self.confirming()
        raw = server.spec.BasicProperties().encode()
        group = channel.basic_publish_encoded("", "q", [raw] * 3, [b"1", b"2", b"3"])
        assert group is not None
        self.assertEqual(channel.unconfirmed, 3)
        server.send(1, server.spec.BasicAck(delivery_tag=3, multiple=True))
        self.assertEqual((self.successResultOf(group), channel.unconfirmed), (3, 0))

    def test_channel_close_fails_unconfirmed(self) -> None:
        server, channel = self.confirming()
        published = channel.basic_publish(b"x")
        server.send(1, server.spec.ChannelClose(reply_code=406, reply_text="PRECONDITION_FAILED"))
        self.assertEqual(self.failureResultOf(published, ChannelClosed).value.reply_code, 406)


class TransactionTests(SynchronousTestCase):
    def test_tx_methods(self) -> None:
        server, channel = opened()
        selected, committed, rolled_back = channel.tx_select(), channel.tx_commit(), channel.tx_rollback()
        self.assertEqual(server.names(), ["tx.select", "tx.commit", "tx.rollback"])
        for ok in (server.spec.TxSelectOk(), server.spec.TxCommitOk(), server.spec.TxRollbackOk()):
            server.send(1, ok)
        self.assertEqual(
            [self.successResultOf(d).NAME for d in (selected, committed, rolled_back)],
            ["tx.select-ok", "tx.commit-ok", "tx.rollback-ok"],
        )


class FlowTests(SynchronousTestCase):
    def test_flow_pauses_publishing(self) -> None:
        server, channel = opened()
        server.send(1, server.spec.ChannelFlow(active=False))
        [(_, flow_ok)] = server.methods()
        self.assertEqual((flow_ok.NAME, flow_ok.active), ("channel.flow-ok", False))
        self.assertFalse(channel.flow_active)
        channel.basic_publish(b"1")
        channel.basic_publish(b"2")
        self.assertEqual(server.transport.value(), b"")
        server.send(1, server.spec.ChannelFlow(active=True))
        received = server.received()
        self.assertEqual(received[0][1].NAME, "channel.flow-ok")
        self.assertEqual([command.body for _, command in received[1:]], [b"1", b"2"])


class ReturnAndCancelTests(SynchronousTestCase):
    def test_return_reaches_the_handler(self) -> None:
        server, channel = opened()
        returned: list[Any] = []
        channel.return_handler = returned.append
        server.send_content(1, server.spec.BasicReturn(reply_code=312, reply_text="NO_ROUTE", exchange="x", routing_key="k"), b"lost")
        [message] = returned
        self.assertEqual((message.body, message.method.reply_code, message.routing_key), (b"lost", 312, "k"))
        self.assertRaises(AlreadySettled, message.ack)

    def test_return_without_handler_is_logged(self) -> None:
        server, _ = opened()
        with capturedLogs() as events:
            server.send_content(1, server.spec.BasicReturn(reply_code=312, reply_text="NO_ROUTE"), b"lost")
        [event] = events
        self.assertEqual(event["log_level"], LogLevel.warn)
        self.assertIn("message returned by the server (312 NO_ROUTE) on channel 1", formatEvent(event))

    def test_server_cancel_ends_the_consumer(self) -> None:
        server, channel = opened()
        consumer = self.successResultOf(self.consume(server, channel))
        cancelled: list[Any] = []
        consumer.onCancel(cancelled.append)
        server.send(1, server.spec.BasicCancel(consumer_tag=consumer.tag, nowait=False))
        self.assertEqual(server.names(), ["basic.cancel-ok"])
        self.assertEqual(cancelled, [consumer])
        self.assertTrue(consumer.cancelled_by_server)
        self.assertFalse(consumer.active)
        self.assertNotIn(consumer.tag, channel.consumers)

    def test_server_cancel_nowait(self) -> None:
        server, channel = opened()
        consumer = self.successResultOf(self.consume(server, channel))
        server.send(1, server.spec.BasicCancel(consumer_tag=consumer.tag, nowait=True))
        self.assertEqual(server.names(), [])

    def consume(self, server: ScriptedServer, channel: Channel) -> Any:
        consuming = channel.basic_consume("q", lambda message: None)
        [(_, consume)] = server.methods()
        server.send(1, server.spec.BasicConsumeOk(consumer_tag=consume.consumer_tag))
        return consuming

    def test_deliveries_reach_the_callback_and_ack_once(self) -> None:
        server, channel = opened()
        messages: list[Any] = []
        consuming = channel.basic_consume("q", messages.append, consumer_tag="mine")
        server.send(1, server.spec.BasicConsumeOk(consumer_tag="mine"))
        consumer = self.successResultOf(consuming)
        self.assertEqual(consumer.tag, "mine")
        server.methods()
        properties = server.spec.BasicProperties(headers={"h": 1}, correlation_id="c")
        server.send_content(1, server.spec.BasicDeliver(consumer_tag="mine", delivery_tag=5, redelivered=True, exchange="x", routing_key="k"), b"m", properties)
        [message] = messages
        self.assertEqual(
            (message.body, message.delivery_tag, message.redelivered, message.exchange, message.routing_key, message.consumer_tag),
            (b"m", 5, True, "x", "k", "mine"),
        )
        self.assertEqual((message.headers, message.properties.correlation_id), ({"h": 1}, "c"))
        message.ack()
        self.assertRaises(AlreadySettled, message.reject)
        [(_, ack)] = server.methods()
        self.assertEqual((ack.NAME, ack.delivery_tag, ack.multiple), ("basic.ack", 5, False))

    def test_nack_and_reject(self) -> None:
        server, channel = opened()
        channel.nack(3, multiple=True, requeue=False)
        channel.reject(4, requeue=False)
        nack, reject = (method for _, method in server.methods())
        self.assertEqual((nack.delivery_tag, nack.multiple, nack.requeue), (3, True, False))
        self.assertEqual((reject.delivery_tag, reject.requeue), (4, False))

    def test_no_ack_deliveries_are_settled(self) -> None:
        server, channel = opened()
        messages: list[Any] = []
        channel.basic_consume("q", messages.append, consumer_tag="t", no_ack=True)
        server.send(1, server.spec.BasicConsumeOk(consumer_tag="t"))
        server.send_content(1, server.spec.BasicDeliver(consumer_tag="t", delivery_tag=1), b"m")
        self.assertRaises(AlreadySettled, messages[0].ack)

    def test_client_cancel(self) -> None:
        server, channel = opened()
        consumer = self.successResultOf(self.consume(server, channel))
        cancelling = consumer.cancel()
        [(_, cancel)] = server.methods()
        self.assertEqual((cancel.NAME, cancel.consumer_tag), ("basic.cancel", consumer.tag))
        server.send(1, server.spec.BasicCancelOk(consumer_tag=consumer.tag))
        self.successResultOf(cancelling)
        self.assertFalse(consumer.active)
        self.successResultOf(consumer.cancel())

    def test_unknown_requests_go_to_method_handlers(self) -> None:
        server, channel = opened(AMQP0_8)
        alerts: list[Any] = []
        channel.method_handlers["channel.alert"] = alerts.append
        server.send(1, server.spec.ChannelAlert(reply_code=1, reply_text="note", details={}))
        self.assertEqual(alerts[0].method.reply_text, "note")


class GeneratedAPITests(SynchronousTestCase):
    """Every client-sent method of every version is a channel method."""

    def test_every_method_is_callable(self) -> None:
        for version in VERSIONS.values():
            cls = channel_class(version)
            for method_class in client_sent_methods(version):
                self.assertTrue(callable(getattr(cls, method_class.HANDLER)), method_class.NAME)

    def test_docstring_and_typed_keyword_signature(self) -> None:
        cls = channel_class(AMQP0_9_1)
        bind = getattr(cls, "queue_bind")
        self.assertTrue(bind.__doc__.startswith(AMQP0_9_1.spec.QueueBind.__doc__))
        self.assertIn("queue.bind-ok", bind.__doc__)
        parameters = inspect.signature(bind).parameters
        self.assertEqual(parameters["routing_key"].kind, inspect.Parameter.KEYWORD_ONLY)
        self.assertEqual(parameters["routing_key"].annotation, "str")
        self.assertEqual(parameters["nowait"].default, False)

    def test_explicit_wrappers_win(self) -> None:
        self.assertIs(channel_class(AMQP0_9_1).queue_declare, Channel.queue_declare)

    def test_unknown_field_is_a_type_error(self) -> None:
        _, channel = opened()
        self.assertRaises(TypeError, channel.queue_bind, queue="q", no_such_field=1)

    def test_classes_of_zero_nine(self) -> None:
        server, channel = opened(AMQP0_9)
        names = ["file_qos", "stream_consume", "dtx_select", "tunnel_request", "message_transfer", "access_request"]
        for name in names:
            self.assertTrue(hasattr(channel, name), name)
        qos = channel.file_qos(prefetch_count=3)
        server.send(1, server.spec.FileQosOk())
        self.assertEqual(self.successResultOf(qos).NAME, "file.qos-ok")
        channel.tunnel_request(body=b"payload", properties={"durable": 1}, meta_data={"k": "v"})
        transfer = channel.message_transfer(destination="d", body=Content(b"b"))
        server.send(1, server.spec.MessageOk())
        self.assertEqual(self.successResultOf(transfer).NAME, "message.ok")
        tunnel, message = server.received()[1:]
        self.assertEqual((tunnel[1].method.NAME, tunnel[1].body, tunnel[1].method.meta_data), ("tunnel.request", b"payload", {"k": b"v"}))
        self.assertEqual((message[1].NAME, message[1].body), ("message.transfer", Content(b"b")))


class RequestByNameTests(SynchronousTestCase):
    def test_request_by_name(self) -> None:
        server, channel = opened()
        bound = channel.request("queue.bind", queue="q", exchange="x")
        server.send(1, server.spec.QueueBindOk())
        self.assertEqual(self.successResultOf(bound).NAME, "queue.bind-ok")
        self.assertIsNone(self.successResultOf(channel.request("basic.recover-async", requeue=True)))
        self.failureResultOf(channel.request("file.qos"), NotInThisVersion)
        server.send(1, server.spec.ChannelClose(reply_code=406, reply_text="PRECONDITION_FAILED"))
        self.failureResultOf(channel.request("basic.recover-async"), ChannelClosed)
