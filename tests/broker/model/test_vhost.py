"""The broker model without sockets: declarations, consumers, acks, tx, confirms."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from tests.broker.support import message, session
from txamqp09.broker.model import Broker, Client, Mode, VirtualHost
from txamqp09.wire.errors import (
    AccessRefused,
    CommandInvalid,
    NotAllowed,
    NotFound,
    PreconditionFailed,
    ResourceLocked,
)


class DeclarationTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.vhost = VirtualHost("/")
        self.client = Client("c")

    def test_standard_exchanges_in_every_vhost(self) -> None:
        broker = Broker(["/", "other"])
        for vhost in broker.vhosts.values():
            kinds = {name: exchange.kind for name, exchange in vhost.exchanges.items()}
            self.assertEqual(
                kinds,
                {"": "direct", "amq.direct": "direct", "amq.fanout": "fanout",
                 "amq.topic": "topic", "amq.headers": "headers", "amq.match": "headers"},
            )

    def test_exchange_errors(self) -> None:
        self.assertRaises(NotFound, self.vhost.declare_exchange, "x", "direct", passive=True)
        self.assertRaises(CommandInvalid, self.vhost.declare_exchange, "x", "nope")
        self.assertRaises(AccessRefused, self.vhost.declare_exchange, "amq.mine", "direct")
        self.assertRaises(AccessRefused, self.vhost.declare_exchange, "", "direct")
        self.vhost.declare_exchange("x", "direct")
        error = self.assertRaises(PreconditionFailed, self.vhost.declare_exchange, "x", "fanout")
        self.assertIn("inequivalent arg 'type'", error.reply_text)
        self.assertRaises(PreconditionFailed, self.vhost.declare_exchange, "x", "direct", durable=True)
        self.assertIs(
            self.vhost.declare_exchange("amq.direct", "direct", durable=True),
            self.vhost.exchanges["amq.direct"],
        )
        self.assertRaises(AccessRefused, self.vhost.delete_exchange, "amq.direct")

    def test_default_exchange_refuses_bindings(self) -> None:
        self.vhost.declare_queue("q", self.client)
        self.assertRaises(AccessRefused, self.vhost.bind_queue, "q", "", "k", {}, self.client)

    def test_exchange_delete_if_unused(self) -> None:
        self.vhost.declare_exchange("x", "fanout")
        self.vhost.declare_queue("q", self.client)
        self.vhost.bind_queue("q", "x", "", {}, self.client)
        self.assertRaises(PreconditionFailed, self.vhost.delete_exchange, "x", if_unused=True)
        self.vhost.delete_exchange("x")
        self.assertNotIn("x", self.vhost.exchanges)
        self.assertEqual(self.vhost.queues["q"].bindings, {})
        self.vhost.delete_exchange("x")  # deleting what is gone succeeds

    def test_auto_delete_exchange(self) -> None:
        """An auto-delete exchange goes with its last binding, not before it had one."""
        self.vhost.declare_exchange("x", "fanout", auto_delete=True)
        self.vhost.declare_queue("q", self.client)
        self.vhost.bind_queue("q", "x", "a", {}, self.client)
        self.vhost.bind_queue("q", "x", "b", {}, self.client)
        self.vhost.unbind_queue("q", "x", "a", {}, self.client)
        self.assertIn("x", self.vhost.exchanges)
        self.vhost.unbind_queue("q", "x", "b", {}, self.client)
        self.assertNotIn("x", self.vhost.exchanges)

    def test_queue_names_and_equivalence(self) -> None:
        queue = self.vhost.declare_queue("", self.client)
        self.assertTrue(queue.name.startswith("amq.gen-"))
        self.assertEqual(len(queue.name), len("amq.gen-") + 22)
        self.assertRaises(AccessRefused, self.vhost.declare_queue, "amq.q", self.client)
        generated = self.vhost.declare_queue("amq.gen-given", self.client, server_named=True)
        self.assertIs(self.vhost.queues["amq.gen-given"], generated)
        self.assertRaises(NotFound, self.vhost.declare_queue, "missing", self.client, passive=True)
        self.vhost.declare_queue("q", self.client, durable=True)
        error = self.assertRaises(PreconditionFailed, self.vhost.declare_queue, "q", self.client)
        self.assertIn("'durable'", error.reply_text)
        self.assertRaises(
            PreconditionFailed,
            self.vhost.declare_queue, "q", self.client, durable=True, arguments={"x-max-length": 3},
        )

    def test_exclusive_queue(self) -> None:
        other = Client("other")
        queue = self.vhost.declare_queue("mine", self.client, exclusive=True)
        self.assertRaises(ResourceLocked, self.vhost.declare_queue, "mine", other, exclusive=True)
        self.assertRaises(ResourceLocked, self.vhost.declare_queue, "mine", other, passive=True)
        self.assertRaises(ResourceLocked, self.vhost.purge_queue, "mine", other)
        self.assertRaises(ResourceLocked, self.vhost.delete_queue_named, "mine", other)
        self.assertRaises(ResourceLocked, self.vhost.bind_queue, "mine", "amq.fanout", "", {}, other)
        self.client.close()
        self.assertTrue(queue.deleted)
        self.assertNotIn("mine", self.vhost.queues)

    def test_delete_queue_conditions(self) -> None:
        queue = self.vhost.declare_queue("q", self.client)
        publisher, _ = session(self.vhost, self.client)
        publisher.publish("", message(routing_key="q"), False, False)
        self.assertRaises(PreconditionFailed, self.vhost.delete_queue_named, "q", self.client, if_empty=True)
        consumer_session, _ = session(self.vhost, self.client)
        consumer_session.consume(queue, "c")
        self.assertRaises(PreconditionFailed, self.vhost.delete_queue_named, "q", self.client, if_unused=True)
        self.assertEqual(self.vhost.delete_queue_named("missing", self.client), 0)

    def test_queue_delete_cancels_consumers(self) -> None:
        queue = self.vhost.declare_queue("q", self.client)
        consumer_session, sink = session(self.vhost, self.client)
        consumer_session.consume(queue, "c")
        publisher, _ = session(self.vhost, self.client)
        consumer_session.flow(False)
        publisher.publish("", message(b"1", routing_key="q"), False, False)
        self.assertEqual(self.vhost.delete_queue_named("q", self.client), 1)
        self.assertEqual(sink.cancels, ["c"])
        self.assertEqual(consumer_session.consumers, {})


class ConsumerTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.vhost = VirtualHost("/")
        self.client = Client("c")
        self.queue = self.vhost.declare_queue("q", self.client)
        self.publisher, self.returns = session(self.vhost, self.client)

    def publish(self, *bodies: bytes, routing_key: str = "q") -> None:
        for body in bodies:
            self.publisher.publish("", message(body, routing_key=routing_key), False, False)

    def test_round_robin(self) -> None:
        first, sink1 = session(self.vhost)
        second, sink2 = session(self.vhost)
        first.consume(self.queue, "a", no_ack=True).start()
        second.consume(self.queue, "b", no_ack=True).start()
        self.publish(b"1", b"2", b"3", b"4", b"5")
        self.assertEqual(sink1.bodies(), [b"1", b"3", b"5"])
        self.assertEqual(sink2.bodies(), [b"2", b"4"])

    def test_waiting_messages_go_out_on_start(self) -> None:
        self.publish(b"1", b"2")
        consumer_session, sink = session(self.vhost)
        consumer = consumer_session.consume(self.queue, "", no_ack=True)
        self.assertEqual(sink.deliveries, [])
        self.assertTrue(consumer.tag.startswith("amq.ctag-"))
        consumer.start()
        self.assertEqual(sink.deliveries, [(consumer.tag, 1, False, b"1"), (consumer.tag, 2, False, b"2")])

    def test_one_tag_sequence_per_channel(self) -> None:
        """Consumers with and without acks, basic.get and basic.recover all
        draw from the channel's one sequence of delivery tags; only what
        awaits an ack is kept."""
        free = self.vhost.declare_queue("free", self.client)
        got = self.vhost.declare_queue("got", self.client)
        consumer_session, sink = session(self.vhost)
        acked = consumer_session.consume(self.queue, "acked")
        acked.start()
        consumer_session.consume(free, "free", no_ack=True).start()
        self.publish(b"1")
        self.publish(b"2", routing_key="free")
        self.publish(b"3", routing_key="got")
        result = consumer_session.get(got, no_ack=False)
        assert result is not None
        tag, redelivered, got_message = result
        self.assertEqual((tag, redelivered, got_message.body), (3, False, b"3"))
        self.assertEqual(list(consumer_session.unacked), [1, 3])
        self.assertEqual([d.consumer for d in consumer_session.unacked.values()], [acked, None])
        consumer_session.recover(requeue=False)
        self.assertEqual(
            sink.deliveries,
            [("acked", 1, False, b"1"), ("free", 2, False, b"2"), ("acked", 4, True, b"1")],
        )
        self.assertEqual(list(consumer_session.unacked), [4])
        self.assertEqual([entry[1] for entry in got.messages], [got_message])

    def test_duplicate_tag_and_exclusive(self) -> None:
        consumer_session, _ = session(self.vhost)
        consumer_session.consume(self.queue, "c", exclusive=True)
        self.assertRaises(NotAllowed, consumer_session.consume, self.queue, "c")
        other, _ = session(self.vhost)
        self.assertRaises(AccessRefused, other.consume, self.queue, "d")
        consumer_session.cancel("c")
        other.consume(self.queue, "d")
        self.assertRaises(AccessRefused, consumer_session.consume, self.queue, "e", exclusive=True)

    def test_prefetch_count_per_consumer(self) -> None:
        consumer_session, sink = session(self.vhost)
        consumer_session.qos(0, 2, False)
        consumer_session.consume(self.queue, "c").start()
        self.publish(b"1", b"2", b"3", b"4")
        self.assertEqual(sink.bodies(), [b"1", b"2"])
        consumer_session.ack(1)
        self.assertEqual(sink.bodies(), [b"1", b"2", b"3"])
        consumer_session.ack(3, multiple=True)
        self.assertEqual(sink.bodies(), [b"1", b"2", b"3", b"4"])
        self.assertEqual(list(consumer_session.unacked), [4])

    def test_prefetch_global_shared_by_consumers(self) -> None:
        """0-9-1 global=true: one window for every consumer of the channel."""
        other_queue = self.vhost.declare_queue("r", self.client)
        consumer_session, sink = session(self.vhost)
        consumer_session.qos(0, 3, True)
        consumer_session.consume(self.queue, "a").start()
        consumer_session.consume(other_queue, "b").start()
        self.publish(b"q1", b"q2")
        self.publish(b"r1", b"r2", routing_key="r")
        self.assertEqual(sink.bodies(), [b"q1", b"q2", b"r1"])
        consumer_session.ack(1)
        self.assertEqual(sink.bodies(), [b"q1", b"q2", b"r1", b"r2"])

    def test_prefetch_spec_scopes(self) -> None:
        """0-8/0-9: global=false limits the channel, global=true the connection."""
        client = Client("old")
        first, sink1 = session(self.vhost, client, per_consumer_qos=False)
        second, sink2 = session(self.vhost, client, per_consumer_qos=False)
        other_queue = self.vhost.declare_queue("r", self.client)
        first.qos(0, 2, True)
        first.consume(self.queue, "a").start()
        second.consume(other_queue, "b").start()
        self.publish(b"q1", b"q2")
        self.publish(b"r1", b"r2", routing_key="r")
        self.assertEqual(sink1.bodies() + sink2.bodies(), [b"q1", b"q2"])
        first.ack(1)
        self.assertEqual(sink2.bodies(), [b"r1"])

    def test_prefetch_size(self) -> None:
        """prefetch-size holds back messages only while something is in flight."""
        consumer_session, sink = session(self.vhost)
        consumer_session.qos(10, 0, False)
        consumer_session.consume(self.queue, "c").start()
        self.publish(b"x" * 20, b"y" * 4, b"z" * 4)
        self.assertEqual(sink.bodies(), [b"x" * 20])
        consumer_session.ack(1)
        self.assertEqual(sink.bodies(), [b"x" * 20, b"y" * 4, b"z" * 4])

    def test_unknown_tag(self) -> None:
        consumer_session, _ = session(self.vhost)
        self.assertRaises(PreconditionFailed, consumer_session.ack, 7)
        consumer_session.consume(self.queue, "c").start()
        self.publish(b"1")
        consumer_session.ack(1)
        error = self.assertRaises(PreconditionFailed, consumer_session.ack, 1)
        self.assertIn("unknown delivery tag 1", error.reply_text)
        self.assertRaises(PreconditionFailed, consumer_session.nack, 5, True, False)

    def test_requeue_in_original_order_on_close(self) -> None:
        consumer_session, _ = session(self.vhost)
        consumer_session.qos(0, 3, False)
        consumer_session.consume(self.queue, "c").start()
        self.publish(b"1", b"2", b"3", b"4", b"5")
        consumer_session.ack(2)
        consumer_session.close()
        self.assertEqual([entry[1].body for entry in self.queue.messages], [b"1", b"3", b"4", b"5"])
        self.assertEqual([entry[2] for entry in self.queue.messages], [True, True, True, False])
        later, sink2 = session(self.vhost)
        later.consume(self.queue, "d", no_ack=True).start()
        self.assertEqual(
            [(body, redelivered) for _, _, redelivered, body in sink2.deliveries],
            [(b"1", True), (b"3", True), (b"4", True), (b"5", False)],
        )

    def test_reject_and_nack(self) -> None:
        consumer_session, sink = session(self.vhost)
        consumer_session.consume(self.queue, "c").start()
        consumer_session.flow(False)
        self.publish(b"1", b"2", b"3")
        consumer_session.flow(True)
        self.assertEqual(sink.bodies(), [b"1", b"2", b"3"])
        consumer_session.flow(False)
        consumer_session.reject(1, requeue=False)
        consumer_session.nack(3, multiple=True, requeue=True)
        self.assertEqual([entry[1].body for entry in self.queue.messages], [b"2", b"3"])
        consumer_session.flow(True)
        self.assertEqual(sink.deliveries[3:], [("c", 4, True, b"2"), ("c", 5, True, b"3")])

    def test_recover(self) -> None:
        consumer_session, sink = session(self.vhost)
        consumer_session.consume(self.queue, "c").start()
        self.publish(b"1", b"2")
        consumer_session.recover(requeue=False)
        self.assertEqual(sink.deliveries[2:], [("c", 3, True, b"1"), ("c", 4, True, b"2")])
        self.assertEqual(list(consumer_session.unacked), [3, 4])
        consumer_session.recover(requeue=True)
        self.assertEqual(sink.deliveries[4:], [("c", 5, True, b"1"), ("c", 6, True, b"2")])

    def test_get(self) -> None:
        consumer_session, _ = session(self.vhost)
        self.assertIsNone(consumer_session.get(self.queue, no_ack=False))
        self.publish(b"1", b"2")
        tag, redelivered, got = consumer_session.get(self.queue, no_ack=False) or (0, True, None)
        self.assertEqual((tag, redelivered, got and got.body, self.queue.message_count), (1, False, b"1", 1))
        consumer_session.reject(1, requeue=True)
        again = consumer_session.get(self.queue, no_ack=True)
        self.assertEqual(again and (again[1], again[2].body), (True, b"1"))
        self.assertEqual(list(consumer_session.unacked), [])

    def test_no_local(self) -> None:
        """A no-local consumer does not receive its own connection's messages."""
        consumer_session, sink = session(self.vhost, self.client)
        consumer_session.consume(self.queue, "c", no_local=True, no_ack=True).start()
        self.publisher.publish("", message(b"mine", routing_key="q", publisher=self.client), False, False)
        self.assertEqual(sink.deliveries, [])
        self.publisher.publish("", message(b"theirs", routing_key="q", publisher=Client("other")), False, False)
        self.assertEqual(sink.bodies(), [b"theirs"])
        self.assertEqual([entry[1].body for entry in self.queue.messages], [b"mine"])

    def test_auto_delete_queue(self) -> None:
        queue = self.vhost.declare_queue("auto", self.client, auto_delete=True)
        consumer_session, _ = session(self.vhost)
        consumer_session.consume(queue, "a")
        consumer_session.consume(queue, "b")
        consumer_session.cancel("a")
        self.assertFalse(queue.deleted)
        consumer_session.cancel("b")
        self.assertTrue(queue.deleted)
        self.assertNotIn("auto", self.vhost.queues)


class PublishTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.vhost = VirtualHost("/")
        self.client = Client("c")
        self.queue = self.vhost.declare_queue("q", self.client)
        self.publisher, self.sink = session(self.vhost, self.client)

    def test_unknown_and_internal_exchange(self) -> None:
        self.assertRaises(NotFound, self.publisher.publish, "nope", message(), False, False)
        self.vhost.declare_exchange("inner", "fanout", internal=True)
        self.assertRaises(AccessRefused, self.publisher.publish, "inner", message(), False, False)

    def test_mandatory_returns(self) -> None:
        self.publisher.publish("", message(b"lost", routing_key="nowhere"), True, False)
        self.publisher.publish("", message(b"dropped", routing_key="nowhere"), False, False)
        self.assertEqual(self.sink.returns, [(312, "NO_ROUTE", b"lost")])

    def test_immediate(self) -> None:
        """Immediate messages reach a consumer with room now, or come back 313."""
        self.publisher.publish("", message(b"1", routing_key="q"), False, True)
        self.assertEqual(self.sink.returns, [(313, "NO_CONSUMERS", b"1")])
        self.assertEqual(self.queue.message_count, 0)
        consumer_session, sink = session(self.vhost)
        consumer_session.consume(self.queue, "c").start()
        self.publisher.publish("", message(b"2", routing_key="q"), False, True)
        self.assertEqual(sink.bodies(), [b"2"])

    def test_confirms(self) -> None:
        limited = self.vhost.declare_queue(
            "small", self.client, arguments={"x-max-length": 1, "x-overflow": b"reject-publish"}
        )
        self.publisher.confirm_select()
        self.publisher.publish("", message(routing_key="q"), False, False)
        self.publisher.publish("", message(routing_key="nowhere"), True, False)
        self.publisher.publish("", message(routing_key="small"), False, False)
        self.publisher.publish("", message(routing_key="small"), False, False)
        self.assertEqual(self.sink.confirms, [(1, True), (2, True), (3, True), (4, False)])
        self.assertEqual(limited.message_count, 1)
        self.assertRaises(PreconditionFailed, self.publisher.tx_select)

    def test_drop_head(self) -> None:
        self.vhost.declare_queue("short", self.client, arguments={"x-max-length": 2})
        for body in (b"1", b"2", b"3"):
            self.publisher.publish("", message(body, routing_key="short"), False, False)
        self.assertEqual([entry[1].body for entry in self.vhost.queues["short"].messages], [b"2", b"3"])

    def test_tx_commit_and_rollback(self) -> None:
        consumer_session, sink = session(self.vhost)
        consumer_session.consume(self.queue, "c").start()
        self.publish_plain(b"before")
        consumer_session.tx_select()
        self.publisher.tx_select()
        self.publish_plain(b"held")
        consumer_session.ack(1)
        self.assertEqual(sink.bodies(), [b"before"])
        self.assertRaises(PreconditionFailed, consumer_session.ack, 1)
        self.publisher.tx_rollback()
        consumer_session.tx_rollback()
        self.assertEqual(list(consumer_session.unacked), [1])
        self.publish_plain(b"kept")
        consumer_session.ack(1)
        self.publisher.tx_commit()
        consumer_session.tx_commit()
        self.assertEqual(sink.bodies(), [b"before", b"kept"])
        self.assertEqual(list(consumer_session.unacked), [2])
        self.assertRaises(PreconditionFailed, self.publisher.confirm_select)

    def publish_plain(self, body: bytes) -> None:
        self.publisher.publish("", message(body, routing_key="q"), False, False)

    def test_commit_without_select(self) -> None:
        self.assertRaises(PreconditionFailed, self.publisher.tx_commit)
        self.assertRaises(PreconditionFailed, self.publisher.tx_rollback)

    def test_mode_transitions(self) -> None:
        """none -> tx or confirm, each kept on a second select; no way from one to the other."""
        self.assertIs(self.publisher.mode, Mode.NONE)
        self.publisher.tx_select()
        self.publisher.tx_select()
        self.assertIs(self.publisher.mode, Mode.TX)
        refused = self.assertRaises(PreconditionFailed, self.publisher.confirm_select)
        self.assertEqual(refused.reply_text, "cannot switch from tx to confirm mode")
        confirming, _ = session(self.vhost, self.client)
        confirming.confirm_select()
        confirming.confirm_select()
        self.assertIs(confirming.mode, Mode.CONFIRM)
        refused = self.assertRaises(PreconditionFailed, confirming.tx_select)
        self.assertEqual(refused.reply_text, "cannot switch from confirm to tx mode")
        self.assertRaises(PreconditionFailed, confirming.tx_commit)
        self.assertIs(confirming.mode, Mode.CONFIRM)
