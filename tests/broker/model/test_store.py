"""The model writes what must survive to the store, and restores it."""

from __future__ import annotations

from typing import Optional, cast

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from tests.broker.model.support import message_for_store as message
from tests.broker.support import RecordingSink, session
from txamqp09.broker.model import Broker, Client, Persistence, Session
from txamqp09.broker.dialects import SPECIFIED
from txamqp09.broker.model.message import delivery_mode, reply_to_span
from txamqp09.broker.model.store import restored_message
from txamqp09.store.interface import DurableBinding, DurableExchange, DurableQueue, StoredMessage
from txamqp09.store.memory import MemoryStore
from txamqp09.wire import _amqp0_9_1 as spec
from txamqp09.wire.errors import AMQPSyntaxError
from txamqp09.wire.fields import encode_shortstr


def stored_bodies(store: MemoryStore, queue: str = "q") -> list[Optional[bytes]]:
    """The bodies *store* keeps for *queue*, in order."""
    return [m.body for _, m in sorted(store.messages.get(("/", queue), {}).items())]


class DeliveryModeTests(SynchronousTestCase):
    def test_read_in_place_past_earlier_properties(self) -> None:
        cases = [
            (spec.BasicProperties(), 0),
            (spec.BasicProperties(delivery_mode=1, priority=4), 1),
            (spec.BasicProperties(delivery_mode=2, message_id="m"), 2),
            (spec.BasicProperties(content_type="text/plain", message_id="m"), 0),
            (spec.BasicProperties(headers={}, delivery_mode=2), 2),
            (spec.BasicProperties(content_type="text/plain", content_encoding="gzip",
                                  headers={"a": 1, "b": [b"x"]}, delivery_mode=2, message_id="m"), 2),
        ]
        for properties, expected in cases:
            self.assertEqual(delivery_mode(properties.encode()), expected)

    def test_truncated_properties_are_a_syntax_error(self) -> None:
        raw = spec.BasicProperties(content_type="text/plain", delivery_mode=2).encode()
        self.assertRaises(AMQPSyntaxError, delivery_mode, raw[:5])


class ReplyToTests(SynchronousTestCase):
    def test_found_in_place_past_earlier_properties(self) -> None:
        for properties in (
            spec.BasicProperties(reply_to="r"),
            spec.BasicProperties(content_type="text/plain", headers={"a": 1}, delivery_mode=2, priority=3,
                                 correlation_id="c", reply_to="r", message_id="m"),
            spec.BasicProperties(correlation_id="reply_to", reply_to="r", expiration="5"),
        ):
            raw = properties.encode()
            start, end = reply_to_span(raw)
            self.assertEqual(raw[start:end], encode_shortstr("r"), properties)

    def test_absent(self) -> None:
        self.assertEqual(reply_to_span(spec.BasicProperties(correlation_id="amq.rabbitmq.reply-to").encode()), (0, 0))

    def test_truncated_properties_are_a_syntax_error(self) -> None:
        raw = spec.BasicProperties(correlation_id="c", reply_to="reply").encode()
        for cut in (4, len(raw) - 1):
            self.assertRaises(AMQPSyntaxError, reply_to_span, raw[:cut])


class WritingTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.store = MemoryStore()
        self.broker = Broker(persistence=Persistence(self.store))
        self.vhost = self.broker.vhosts["/"]
        self.client = Client("c")

    def session(self) -> tuple[Session, RecordingSink]:
        return session(self.vhost, self.client)

    def test_only_durable_topology_is_written(self) -> None:
        vhost, client = self.vhost, self.client
        vhost.declare_exchange("logs", "topic", durable=True, arguments={"alternate-exchange": "ae"})
        vhost.declare_exchange("scratch", "fanout")
        vhost.declare_queue("q", client, durable=True, arguments={"x-max-length": 10})
        vhost.declare_queue("mine", client, durable=True, exclusive=True)
        vhost.declare_queue("temp", client)
        for queue in ("q", "mine", "temp"):
            vhost.bind_queue(queue, "logs", "a.#", {}, client)
        vhost.bind_queue("q", "amq.direct", "k", {}, client)
        vhost.bind_queue("q", "scratch", "", {}, client)
        vhost.bind_exchange("logs", "amq.topic", "#", {})
        self.assertEqual(list(self.store.exchanges.values()), [
            DurableExchange("/", "logs", "topic", arguments={"alternate-exchange": "ae"})
        ])
        self.assertEqual(list(self.store.queues), [("/", "q")])
        self.assertEqual(self.store.queues[("/", "q")].arguments, {"x-max-length": 10})
        self.assertEqual(self.store.bindings, {
            DurableBinding("/", "logs", "q", "queue", "a.#"),
            DurableBinding("/", "amq.direct", "q", "queue", "k"),
            DurableBinding("/", "amq.topic", "logs", "exchange", "#"),
        })
        vhost.unbind_queue("q", "logs", "a.#", {}, self.client)
        vhost.delete_exchange("logs")
        vhost.delete_queue_named("q", self.client)
        self.assertEqual((self.store.exchanges, self.store.queues, self.store.bindings), ({}, {}, set()))

    def test_persistent_messages_to_durable_queues_are_written_once(self) -> None:
        self.vhost.declare_queue("q", self.client, durable=True)
        self.vhost.declare_queue("also", self.client, durable=True)
        self.vhost.declare_queue("temp", self.client)
        for name in ("q", "also", "temp"):
            self.vhost.bind_queue(name, "amq.fanout", "", {}, self.client)
        publisher, _ = self.session()
        publisher.publish("amq.fanout", message(b"kept", headers={"h": 1}), False, False)
        publisher.publish("amq.fanout", message(b"transient", mode=1), False, False)
        publisher.publish("amq.fanout", message(b"no mode", mode=0), False, False)
        publisher.publish("", message(b"only temp", "temp"), False, False)
        self.assertEqual(stored_bodies(self.store), [b"kept"])
        self.assertEqual(stored_bodies(self.store, "also"), [b"kept"])
        self.assertNotIn(("/", "temp"), self.store.messages)
        self.assertIs(self.store.messages[("/", "q")][1], self.store.messages[("/", "also")][1])
        self.assertEqual(publisher.stored_sequence, self.store.last_sequence)

    def test_streams_and_exclusive_queues_are_not_among_a_message_s_queues(self) -> None:
        self.broker = Broker(persistence=Persistence(self.store), clock=Clock())
        self.vhost = self.broker.vhosts["/"]
        self.vhost.declare_queue("log", self.client, durable=True, arguments={"x-queue-type": "stream"})
        self.vhost.declare_queue("mine", self.client, durable=True, exclusive=True)
        self.vhost.declare_queue("q", self.client, durable=True)
        for name in ("log", "mine", "q"):
            self.vhost.bind_queue(name, "amq.fanout", "", {}, self.client)
        publisher, _ = self.session()
        publisher.publish("amq.fanout", message(b"fanned"), False, False)
        publisher.publish("", message(b"direct", "q"), False, False)
        publisher.publish("", message(b"to the log", "log"), False, False)
        publisher.publish("", message(b"to mine", "mine"), False, False)
        self.assertEqual(stored_bodies(self.store), [b"fanned", b"direct"])
        self.assertEqual(stored_bodies(self.store, "log"), [])
        self.assertNotIn(("/", "mine"), self.store.messages)

    def test_settled_messages_are_removed_and_requeued_ones_kept(self) -> None:
        self.vhost.declare_queue("q", self.client, durable=True)
        publisher, _ = self.session()
        for n in range(6):
            publisher.publish("", message(b"m%d" % n), False, False)
        consumer, sink = self.session()
        for _ in range(6):
            consumer.get(self.vhost.queues["q"], no_ack=False)
        consumer.ack(1)
        consumer.ack(3, multiple=True)
        consumer.reject(4, requeue=True)
        consumer.nack(5, multiple=False, requeue=False)
        self.assertEqual(stored_bodies(self.store), [b"m3", b"m5"])
        consumer.recover(requeue=True)
        self.assertEqual(stored_bodies(self.store), [b"m3", b"m5"])
        consumer.get(self.vhost.queues["q"], no_ack=True)
        self.assertEqual(stored_bodies(self.store), [b"m5"])

    def test_no_ack_consumers_take_messages_for_good(self) -> None:
        self.vhost.declare_queue("q", self.client, durable=True)
        publisher, _ = self.session()
        publisher.publish("", message(b"before"), False, False)
        consumer, sink = self.session()
        consumer.consume(self.vhost.queues["q"], "c", no_ack=True).start()
        publisher.publish("", message(b"after"), False, False)
        self.assertEqual(sink.bodies(), [b"before", b"after"])
        self.assertEqual(stored_bodies(self.store), [])

    def test_purge_removes_ready_messages_not_unacked_ones(self) -> None:
        self.vhost.declare_queue("q", self.client, durable=True)
        publisher, _ = self.session()
        for n in range(3):
            publisher.publish("", message(b"m%d" % n), False, False)
        consumer, _ = self.session()
        consumer.get(self.vhost.queues["q"], no_ack=False)
        self.assertEqual(self.vhost.purge_queue("q", self.client), 2)
        self.assertEqual(stored_bodies(self.store), [b"m0"])

    def test_length_limits_remove_what_they_drop(self) -> None:
        self.vhost.declare_queue("head", self.client, durable=True, arguments={"x-max-length": 2})
        self.vhost.declare_queue(
            "refuse", self.client, durable=True,
            arguments={"x-max-length": 1, "x-overflow": "reject-publish"},
        )
        publisher, sink = self.session()
        publisher.confirm_select()
        for n in range(3):
            publisher.publish("", message(b"h%d" % n, "head"), False, False)
            publisher.publish("", message(b"r%d" % n, "refuse"), False, False)
        self.assertEqual(stored_bodies(self.store, "head"), [b"h1", b"h2"])
        self.assertEqual(stored_bodies(self.store, "refuse"), [b"r0"])
        self.assertEqual([ack for _, ack in sink.confirms], [True, True, True, False, True, False])

    def test_immediate_message_no_consumer_took_is_not_kept(self) -> None:
        self.vhost.declare_queue("q", self.client, durable=True)
        publisher, sink = self.session()
        publisher.publish("", message(b"now or never"), False, True)
        self.assertEqual(sink.returns, [(313, "NO_CONSUMERS", b"now or never")])
        self.assertEqual(stored_bodies(self.store), [])

    def test_deleting_a_queue_forgets_its_messages(self) -> None:
        self.vhost.declare_queue("q", self.client, durable=True)
        publisher, _ = self.session()
        publisher.publish("", message(b"m"), False, False)
        consumer, _ = self.session()
        consumer.get(self.vhost.queues["q"], no_ack=False)
        self.vhost.delete_queue_named("q", self.client)
        sequence = self.store.last_sequence
        consumer.ack(1)
        self.assertEqual(self.store.last_sequence, sequence)
        self.assertNotIn(("/", "q"), self.store.messages)


class RestoreTests(SynchronousTestCase):
    def restarted(self, store: MemoryStore) -> Broker:
        broker = Broker(persistence=Persistence(store))
        broker.restore(store.open())
        return broker

    def test_topology_and_messages_come_back_in_order_as_redelivered(self) -> None:
        store = MemoryStore()
        broker = self.restarted(store)
        vhost, client = broker.vhosts["/"], Client("c")
        vhost.declare_exchange("x", "direct", durable=True, internal=True)
        vhost.declare_queue("q", client, durable=True, auto_delete=True, arguments={"x-max-length": 9})
        vhost.declare_queue("temp", client)
        vhost.bind_queue("q", "x", "k", {"a": 1}, client)
        vhost.bind_exchange("x", "amq.direct", "k", {})
        publisher, _ = session(vhost, client)
        for n in range(5):
            publisher.publish("amq.direct", message(b"m%d" % n, "k", "amq.direct", message_id=str(n)), False, False)
        consumer, _ = session(vhost, client)
        consumer.consume(vhost.queues["q"], "c").start()
        consumer.ack(2)

        broker = self.restarted(store)
        vhost = broker.vhosts["/"]
        self.assertEqual(set(vhost.queues), {"q"})
        queue = vhost.queues["q"]
        self.assertEqual((queue.durable, queue.auto_delete, queue.arguments), (True, True, {"x-max-length": 9}))
        exchange = vhost.exchanges["x"]
        self.assertEqual((exchange.kind, exchange.durable, exchange.internal), ("direct", True, True))
        self.assertEqual(
            [(b.destination.name, b.routing_key, b.arguments) for b in exchange.bindings.values()],
            [("q", "k", {"a": 1})],
        )
        self.assertEqual(list(vhost.exchanges["amq.direct"].bindings.values())[0].destination, exchange)
        consumer, sink = session(vhost, Client("again"))
        consumer.consume(queue, "c").start()
        self.assertEqual(sink.bodies(), [b"m0", b"m2", b"m3", b"m4"])
        self.assertTrue(all(redelivered for _, _, redelivered, _ in sink.deliveries))
        delivered = [consumer.unacked[tag].message for tag in sorted(consumer.unacked)]
        self.assertEqual([cast(spec.BasicProperties, m.properties).message_id for m in delivered], ["0", "2", "3", "4"])
        self.assertEqual(delivered[0].envelope, encode_shortstr("amq.direct") + encode_shortstr("k"))

        consumer.ack(0, multiple=True)
        publisher, _ = session(vhost, Client("p"))
        publisher.publish("", message(b"new"), False, False)
        self.assertEqual([m.message_id for m in store.messages[("/", "q")].values()], [6])

    def test_a_binding_to_the_default_exchange_comes_back(self) -> None:
        """0-9 connections bind queues to the default exchange by other keys."""
        store = MemoryStore()
        vhost = self.restarted(store).vhosts["/"]
        client = Client("c")
        vhost.declare_queue("q", client, durable=True)
        vhost.bind_queue("q", "", "k", {}, client, SPECIFIED)
        vhost = self.restarted(store).vhosts["/"]
        publisher, _ = session(vhost, Client("p"))
        publisher.publish("", message(b"by key", "k"), False, False)
        self.assertEqual([entry[1].body for entry in vhost.queues["q"].messages], [b"by key"])

    def test_virtual_hosts_named_in_the_store_are_created(self) -> None:
        store = MemoryStore()
        store.add_queue(DurableQueue("other", "q"))
        broker = self.restarted(store)
        self.assertIn("q", broker.vhosts["other"].queues)

    def test_messages_prepared_ahead_of_time_are_restored_as_they_are(self) -> None:
        """A standby's store prepares the messages of one queue as it reads
        them; a message on several queues becomes one model message on each,
        tracked by each."""
        store = MemoryStore()
        store.add_queue(DurableQueue("/", "a"))
        store.add_queue(DurableQueue("/", "b"))
        store.publish(StoredMessage(1, "", "a", message(b"one").raw_properties, b"one", 3), [("/", "a")])
        store.publish(StoredMessage(2, "", "a", message(b"two").raw_properties, None, 3), [("/", "a")])
        store.publish(StoredMessage(3, "", "a", message(b"both").raw_properties, b"both", 4), [("/", "a"), ("/", "b")])
        recovered = store.open()
        alone = recovered.messages[("/", "a")][:2]
        prepared = [restored_message(record) for record in alone]
        for record, made in zip(alone, prepared):
            record.prepared = made
        persistence = Persistence(store)
        broker = Broker(persistence=persistence)
        broker.restore(recovered)
        queues = broker.vhosts["/"].queues
        in_a = [entry[1] for entry in queues["a"].messages]
        self.assertEqual(in_a[:2], prepared)
        self.assertIs(in_a[0], prepared[0])
        both = in_a[2], next(iter(queues["b"].messages))[1]
        self.assertIsNot(both[0], both[1])
        self.assertEqual([m.tracking.holders for m in both if m.tracking], [1, 1])
        self.assertEqual([(m.body, m.size, m.tracking.store_id if m.tracking else 0) for m in in_a],
                         [(b"one", 3, 1), (None, 3, 2), (b"both", 4, 3)])
        self.assertEqual((persistence.resident_bytes, persistence.paged_bytes), (3 + 4 + 4, 3))
