"""Quorum queues in the model: RabbitMQ 3.10's ``x-delivery-count`` on the
messages they hand out again, the delivery limit, and the declaration rules."""

from __future__ import annotations

from typing import Any, Optional

from twisted.trial.unittest import SynchronousTestCase

from tests.broker.model.support import World, headers_of
from tests.broker.support import RecordingSink
from txamqp09.broker.model import Consumer, Message, Queue
from txamqp09.wire.errors import PreconditionFailed

QUORUM = {"x-queue-type": b"quorum"}


class HeaderSink(RecordingSink):
    """A recording sink that also keeps each delivery's x-delivery-count (None: absent)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: list[tuple[bool, Optional[int]]] = []

    def deliver(self, consumer: Consumer, delivery_tag: int, redelivered: bool, message: Message) -> None:
        super().deliver(consumer, delivery_tag, redelivered, message)
        self.counts.append((redelivered, headers_of(message).get("x-delivery-count")))


class DeliveryCountTests(SynchronousTestCase):
    """What RabbitMQ 3.10.8 answers (tests/broker/dialects/ checks the same
    through pika against a node): a consumer sees no header on the first
    delivery, then 1, 2...; basic.get sees 0, 1, 2..."""

    def setUp(self) -> None:
        self.world = World()
        self.sink = self.world.session.sink = HeaderSink()

    def quorum_queue(self, **arguments: Any) -> Queue:
        self.world.vhost.declare_exchange("dlx", "fanout")
        self.world.declare("dead")
        self.world.vhost.bind_queue("dead", "dlx", "", {}, self.world.client)
        queue: Queue = self.world.declare(
            "qq", {**QUORUM, "x-dead-letter-exchange": b"dlx", **arguments}, durable=True
        )
        return queue

    def test_a_consumer_sees_the_count_once_the_message_came_back(self) -> None:
        queue = self.quorum_queue(**{"x-delivery-limit": 2})
        self.world.publish("qq", b"poison", headers={"app": "x"})
        self.world.session.consume(queue, "c").start()
        for _ in range(3):
            self.world.session.reject(self.sink.deliveries[-1][1], requeue=True)
        self.assertEqual(self.sink.counts, [(False, None), (True, 1), (True, 2)])
        self.assertEqual(self.sink.bodies(), [b"poison"] * 3)
        got = self.world.get("dead")
        assert got is not None
        dead = got[1]
        self.assertEqual(dead.body, b"poison")
        self.assertNotIn("x-delivery-count", dead.headers)
        self.assertEqual(dead.headers["app"], b"x")

    def test_basic_get_sees_the_count_from_zero(self) -> None:
        self.quorum_queue()
        self.world.publish("qq", b"m", headers={"app": "x"})
        counts = []
        for _ in range(4):
            got = self.world.get("qq", no_ack=False)
            assert got is not None
            headers = headers_of(got[1])
            counts.append(headers["x-delivery-count"])
            self.assertEqual(headers["app"], b"x")
            self.world.session.nack(got[0], False, requeue=True)
        self.assertEqual(counts, [0, 1, 2, 3])
        self.assertEqual(self.world.bodies("qq"), [b"m"], "no delivery limit: it stays")

    def test_the_count_is_a_long(self) -> None:
        """RabbitMQ writes x-delivery-count as a signed 64-bit value ('l')."""
        self.quorum_queue()
        self.world.publish("qq", b"m")
        got = self.world.get("qq", no_ack=True)
        assert got is not None
        self.assertIn(b"\x10x-delivery-countl" + (0).to_bytes(8, "big"), got[1].raw_properties)

    def test_a_closed_channel_returns_its_deliveries(self) -> None:
        queue = self.quorum_queue()
        self.world.publish("qq", b"m")
        self.world.session.consume(queue, "c").start()
        self.world.session.close()
        other = World(self.world.vhost)
        got = other.get("qq", no_ack=True)
        assert got is not None
        self.assertEqual(headers_of(got[1])["x-delivery-count"], 1)

    def test_a_consumer_without_acknowledgement_takes_the_count_along(self) -> None:
        queue = self.quorum_queue()
        self.world.publish("qq", b"m")
        got = self.world.get("qq", no_ack=False)
        assert got is not None
        self.world.session.reject(got[0], requeue=True)
        self.world.session.consume(queue, "c", no_ack=True).start()
        self.assertEqual(self.sink.counts, [(True, 1)])
        self.assertEqual(queue.take_returns(0), 0, "the count of a settled message is forgotten")

    def test_recover_without_requeue_sends_the_same_count(self) -> None:
        queue = self.quorum_queue()
        self.world.publish("qq", b"m")
        self.world.session.consume(queue, "c").start()
        self.world.session.reject(self.sink.deliveries[-1][1], requeue=True)
        self.world.session.recover(requeue=False)
        self.assertEqual(self.sink.counts, [(False, None), (True, 1), (True, 1)])

    def test_classic_queues_add_no_header(self) -> None:
        queue = self.world.declare("classic")
        self.world.publish("classic", b"m")
        self.world.session.consume(queue, "c").start()
        self.world.session.reject(self.sink.deliveries[-1][1], requeue=True)
        self.assertEqual(self.sink.counts, [(False, None), (True, None)])


class DeclarationTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.world = World()

    def test_properties_are_checked_in_rabbitmqs_order(self) -> None:
        """auto-delete, then exclusive, then non-durable (rabbit_quorum_queue:declare)."""
        for flags, refused in (
            ({"auto_delete": True, "exclusive": True}, "auto-delete"),
            ({"exclusive": True}, "exclusive-owner"),
            ({}, "non-durable"),
        ):
            error = self.assertRaises(PreconditionFailed, self.world.declare, "qq", QUORUM, **flags)
            self.assertEqual(error.reply_text, f"invalid property '{refused}' for queue 'qq' in vhost '/'")
