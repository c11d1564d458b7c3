"""The queue features in the model, on a Clock: no sockets, no sleeping."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from tests.broker.model.support import World
from tests.broker.support import message
from txamqp09.wire.errors import PreconditionFailed


class TTLTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.world = World()

    def test_queue_ttl_expires_messages_at_their_deadline(self) -> None:
        self.world.declare("q", {"x-message-ttl": 1000})
        self.world.publish("q", b"a")
        self.world.clock.advance(0.5)
        self.world.publish("q", b"b")
        self.world.clock.advance(0.5)
        self.assertEqual(self.world.bodies("q"), [b"b"])
        self.world.clock.advance(0.5)
        self.assertEqual(self.world.bodies("q"), [])
        self.assertEqual(self.world.clock.getDelayedCalls(), [])

    def test_message_expiration_and_the_shorter_ttl_wins(self) -> None:
        self.world.declare("q", {"x-message-ttl": 1000})
        self.world.publish("q", b"short", expiration="200")
        self.world.publish("q", b"long", expiration="5000")
        self.world.clock.advance(0.2)
        self.assertEqual(self.world.bodies("q"), [b"long"])
        self.world.clock.advance(0.8)
        self.assertEqual(self.world.bodies("q"), [])

    def test_expired_message_is_never_delivered(self) -> None:
        """Looking at the head drops what expired, even before the timer runs."""
        self.world.declare("q")
        self.world.publish("q", b"old", expiration="100")
        self.world.publish("q", b"new")
        self.world.clock.rightNow += 1  # time passes, no timer has run yet
        got = self.world.get("q")
        assert got is not None
        self.assertEqual(got[1].body, b"new")

    def test_expiry_only_at_the_head(self) -> None:
        """A short-lived message behind a long-lived head waits for the head, as in RabbitMQ."""
        self.world.declare("q")
        self.world.publish("q", b"head", expiration="10000")
        self.world.publish("q", b"behind", expiration="10")
        self.world.clock.advance(1)
        self.assertEqual(self.world.bodies("q"), [b"head", b"behind"])
        got = self.world.get("q")
        assert got is not None
        self.assertEqual(got[1].body, b"head")
        self.assertIsNone(self.world.get("q"))

    def test_one_timer_per_queue(self) -> None:
        self.world.declare("q", {"x-message-ttl": 1000})
        for index in range(100):
            self.world.publish("q", b"%d" % index)
        self.assertEqual(len(self.world.clock.getDelayedCalls()), 1)

    def test_ttl_zero_delivers_to_a_ready_consumer_only(self) -> None:
        self.world.declare("q", {"x-message-ttl": 0})
        self.world.publish("q", b"dropped")
        self.assertEqual(self.world.bodies("q"), [])
        consumer = self.world.session.consume(self.world.vhost.queues["q"], "c", no_ack=True)
        consumer.start()
        self.world.publish("q", b"delivered")
        self.assertEqual(self.world.sink.bodies(), [b"delivered"])

    def test_requeued_message_keeps_its_deadline(self) -> None:
        self.world.declare("q", {"x-message-ttl": 1000})
        self.world.publish("q", b"a")
        got = self.world.get("q", no_ack=False)
        assert got is not None
        self.world.clock.advance(2)
        self.world.session.reject(got[0], requeue=True)
        self.assertIsNone(self.world.get("q"))

    def test_invalid_expiration_is_refused_before_routing(self) -> None:
        self.world.declare("q")
        for expiration in ("abc", "-5", "1.5"):
            error = self.assertRaises(
                PreconditionFailed, self.world.publish, "q", b"x", expiration=expiration
            )
            self.assertIn(f"invalid expiration {expiration!r}", error.reply_text)
        self.assertEqual(self.world.bodies("q"), [])

    def test_invalid_expiration_is_refused_at_publish_in_a_transaction(self) -> None:
        self.world.declare("q")
        self.world.session.tx_select()
        self.assertRaises(PreconditionFailed, self.world.publish, "q", b"x", expiration="soon")
        self.world.session.tx_commit()
        self.assertEqual(self.world.bodies("q"), [])


class QueueExpiryTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.world = World()

    def test_unused_queue_is_deleted(self) -> None:
        self.world.declare("q", {"x-expires": 1000})
        self.world.clock.advance(0.9)
        self.world.declare("q", {"x-expires": 1000})  # redeclaring renews the lease
        self.world.clock.advance(0.9)
        self.world.get("q")  # so does basic.get
        self.world.clock.advance(0.9)
        self.assertIn("q", self.world.vhost.queues)
        self.world.clock.advance(0.1)
        self.assertNotIn("q", self.world.vhost.queues)

    def test_queue_with_a_consumer_stays(self) -> None:
        queue = self.world.declare("q", {"x-expires": 100})
        self.world.session.consume(queue, "c")
        self.world.clock.advance(10)
        self.assertIn("q", self.world.vhost.queues)
        self.world.session.cancel("c")
        self.world.clock.advance(0.1)
        self.assertNotIn("q", self.world.vhost.queues)
        self.assertEqual(self.world.clock.getDelayedCalls(), [])


class DeadLetterTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.world = World()
        self.world.clock.advance(1_700_000_000)
        self.world.vhost.declare_exchange("dlx", "fanout")
        self.world.declare("dead")
        self.world.vhost.bind_queue("dead", "dlx", "", {}, self.world.client)

    def dead(self) -> Any:
        got = self.world.get("dead")
        assert got is not None, "nothing was dead-lettered"
        return got[1]

    def test_rejected_message_gets_an_x_death_header(self) -> None:
        self.world.declare("q", {"x-dead-letter-exchange": "dlx"})
        self.world.publish("q", b"m", expiration="60000", headers={"h": 1}, priority=3)
        for _ in range(2):
            got = self.world.get("q", no_ack=False)
            assert got is not None
            self.world.session.reject(got[0], requeue=False)
            dead = self.dead()
            self.world.session.publish("", _republish(dead, "q"), False, False)
        properties = dead.properties
        self.assertEqual((dead.exchange, dead.routing_key, dead.body), ("dlx", "q", b"m"))
        self.assertIsNone(properties.expiration)
        self.assertEqual(properties.priority, 3)
        headers = properties.headers
        self.assertEqual(headers["h"], 1)
        self.assertEqual(headers["x-first-death-reason"], b"rejected")
        self.assertEqual(headers["x-first-death-queue"], b"q")
        self.assertEqual(headers["x-first-death-exchange"], b"")
        [death] = headers["x-death"]
        self.assertEqual(death["count"], 2)
        self.assertEqual(death["reason"], b"rejected")
        self.assertEqual(death["queue"], b"q")
        self.assertEqual(death["exchange"], b"")
        self.assertEqual(death["routing-keys"], [b"q"])
        self.assertEqual(death["original-expiration"], b"60000")
        self.assertEqual(death["time"], datetime.fromtimestamp(1_700_000_000, timezone.utc))

    def test_expired_message_with_dead_letter_routing_key(self) -> None:
        self.world.vhost.declare_exchange("direct-dlx", "direct")
        self.world.declare("keyed")
        self.world.vhost.bind_queue("keyed", "direct-dlx", "rk", {}, self.world.client)
        self.world.declare(
            "q", {"x-dead-letter-exchange": "direct-dlx", "x-dead-letter-routing-key": "rk", "x-message-ttl": 10}
        )
        self.world.publish("q", b"m")
        self.world.clock.advance(0.01)
        got = self.world.get("keyed")
        assert got is not None
        self.assertEqual(got[1].routing_key, "rk")
        [death] = got[1].properties.headers["x-death"]
        self.assertEqual((death["reason"], death["routing-keys"]), (b"expired", [b"q"]))
        self.assertNotIn("original-expiration", death)

    def test_overflow_dead_letters_with_reason_maxlen(self) -> None:
        self.world.declare("q", {"x-dead-letter-exchange": "dlx", "x-max-length": 1})
        self.world.publish("q", b"a")
        self.world.publish("q", b"b")
        self.assertEqual(self.dead().body, b"a")
        self.assertEqual(self.world.bodies("q"), [b"b"])

    def test_reject_publish_dlx_nacks_and_dead_letters(self) -> None:
        self.world.declare(
            "q", {"x-dead-letter-exchange": "dlx", "x-max-length": 1, "x-overflow": "reject-publish-dlx"}
        )
        self.world.session.confirm_select()
        self.world.publish("q", b"a")
        self.world.publish("q", b"b")
        self.assertEqual(self.world.sink.confirms, [(1, True), (2, False)])
        dead = self.dead()
        self.assertEqual((dead.body, dead.properties.headers["x-death"][0]["reason"]), (b"b", b"maxlen"))
        self.assertEqual(self.world.bodies("q"), [b"a"])

    def test_reject_publish_does_not_dead_letter(self) -> None:
        self.world.declare(
            "q", {"x-dead-letter-exchange": "dlx", "x-max-length": 1, "x-overflow": "reject-publish"}
        )
        self.world.publish("q", b"a")
        self.world.publish("q", b"b")
        self.assertIsNone(self.world.get("dead"))

    def test_automatic_cycle_is_dropped(self) -> None:
        """A queue dead-lettering expired messages to itself drops them."""
        self.world.declare("loop", {"x-dead-letter-exchange": "", "x-message-ttl": 10})
        self.world.publish("loop", b"m")
        self.world.clock.advance(0.01)
        self.assertEqual(self.world.bodies("loop"), [])
        self.assertEqual(self.world.clock.getDelayedCalls(), [])

    def test_a_rejection_breaks_a_cycle(self) -> None:
        self.world.declare("loop", {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "loop"})
        self.world.publish("loop", b"m")
        for count in (1, 2, 3):
            got = self.world.get("loop", no_ack=False)
            assert got is not None
            self.world.session.reject(got[0], requeue=False)
            [death] = self.world.vhost.queues["loop"].messages[0][1].properties.headers["x-death"]
            self.assertEqual(death["count"], count)

    def test_missing_dead_letter_exchange_drops(self) -> None:
        self.world.declare("q", {"x-dead-letter-exchange": "absent"})
        self.world.publish("q", b"m")
        got = self.world.get("q", no_ack=False)
        assert got is not None
        self.world.session.nack(got[0], False, False)
        self.assertEqual(self.world.bodies("q"), [])


def _republish(dead: Any, routing_key: str) -> Any:
    """A message with *dead*'s body and properties published to the default exchange."""
    return message(dead.body, routing_key, **{
        name: getattr(dead.properties, name) for name, _ in dead.properties.FIELDS
    })


class PriorityTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.world = World()

    def test_higher_priority_first_fifo_within_one(self) -> None:
        self.world.declare("q", {"x-max-priority": 5})
        for body, priority in ((b"a0", None), (b"b9", 9), (b"c3", 3), (b"d5", 5), (b"e3", 3), (b"f0", 0)):
            self.world.publish("q", body, priority=priority)
        # 9 counts as the maximum, 5, and came before d5.
        self.assertEqual(self.world.bodies("q"), [b"b9", b"d5", b"c3", b"e3", b"a0", b"f0"])

    def test_requeued_message_returns_to_its_place_in_its_priority(self) -> None:
        self.world.declare("q", {"x-max-priority": 2})
        for body, priority in ((b"a1", 1), (b"b1", 1), (b"c2", 2)):
            self.world.publish("q", body, priority=priority)
        first = self.world.get("q", no_ack=False)
        second = self.world.get("q", no_ack=False)
        assert first is not None and second is not None
        self.world.session.nack(second[0], True, True)
        self.assertEqual(self.world.bodies("q"), [b"c2", b"a1", b"b1"])

    def test_priorities_with_a_length_limit(self) -> None:
        self.world.declare("q", {"x-max-priority": 2, "x-max-length": 2})
        for body, priority in ((b"low", 0), (b"high", 2), (b"mid", 1)):
            self.world.publish("q", body, priority=priority)
        self.assertEqual(self.world.bodies("q"), [b"mid", b"low"])


class AlternateExchangeTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.world = World()
        self.world.vhost.declare_exchange("ae", "fanout")
        self.world.declare("unrouted")
        self.world.vhost.bind_queue("unrouted", "ae", "", {}, self.world.client)
        self.world.vhost.declare_exchange("main", "direct", arguments={"alternate-exchange": "ae"})
        self.world.declare("routed")
        self.world.vhost.bind_queue("routed", "main", "known", {}, self.world.client)

    def test_unroutable_goes_to_the_alternate_and_is_not_returned(self) -> None:
        self.world.session.publish("main", message(b"x", "unknown", "main"), True, False)
        self.world.session.publish("main", message(b"y", "known", "main"), True, False)
        self.assertEqual(self.world.bodies("unrouted"), [b"x"])
        self.assertEqual(self.world.bodies("routed"), [b"y"])
        self.assertEqual(self.world.sink.returns, [])

    def test_alternate_chain_and_cycle(self) -> None:
        self.world.vhost.declare_exchange("a", "direct", arguments={"alternate-exchange": "b"})
        self.world.vhost.declare_exchange("b", "direct", arguments={"alternate-exchange": "a"})
        self.world.session.publish("a", message(b"lost", "k", "a"), True, False)
        self.assertEqual([code for code, _, _ in self.world.sink.returns], [312])
        self.world.vhost.declare_exchange("c", "direct", arguments={"alternate-exchange": "main"})
        self.world.session.publish("c", message(b"z", "other", "c"), True, False)
        self.assertEqual(self.world.bodies("unrouted"), [b"z"])

    def test_missing_alternate_means_unroutable(self) -> None:
        self.world.vhost.declare_exchange("lonely", "direct", arguments={"alternate-exchange": "nowhere"})
        self.world.session.publish("lonely", message(b"x", "k", "lonely"), True, False)
        self.assertEqual(len(self.world.sink.returns), 1)

    def test_redeclare_with_another_alternate_is_refused(self) -> None:
        error = self.assertRaises(
            PreconditionFailed, self.world.vhost.declare_exchange, "main", "direct",
            arguments={"alternate-exchange": "other"},
        )
        self.assertIn("inequivalent arg 'alternate-exchange' for exchange 'main'", error.reply_text)
        error = self.assertRaises(
            PreconditionFailed, self.world.vhost.declare_exchange, "bad", "direct",
            arguments={"alternate-exchange": 5},
        )
        self.assertIn("invalid arg 'alternate-exchange'", error.reply_text)


class ConsumerTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.world = World()

    def consume(self, queue: Any, tag: str, **options: Any) -> Any:
        consumer = self.world.session.consume(queue, tag, **options)
        consumer.start()
        return consumer

    def tags(self) -> list[str]:
        return [tag for tag, _, _, _ in self.world.sink.deliveries]

    def test_single_active_consumer_and_handover(self) -> None:
        queue = self.world.declare("q", {"x-single-active-consumer": True})
        self.consume(queue, "first", no_ack=True)
        self.consume(queue, "second", no_ack=True)
        self.consume(queue, "third", no_ack=True, arguments={"x-priority": 5})
        for _ in range(3):
            self.world.publish("q")
        self.assertEqual(self.tags(), ["first"] * 3)
        self.world.session.cancel("first")
        self.world.publish("q")
        self.assertEqual(self.tags()[-1], "third")  # the waiting consumer of highest priority

    def test_single_active_consumer_gets_waiting_messages_on_handover(self) -> None:
        queue = self.world.declare("q", {"x-single-active-consumer": True})
        self.world.session.qos(0, 1, False)
        self.consume(queue, "first")
        self.consume(queue, "second")
        for _ in range(3):
            self.world.publish("q")
        self.assertEqual(self.tags(), ["first"])
        self.world.session.cancel("first")
        self.assertEqual(self.tags(), ["first", "second"])

    def test_consumer_priorities_with_prefetch(self) -> None:
        queue = self.world.declare("q")
        self.world.session.qos(0, 2, False)
        self.consume(queue, "low-a", arguments={"x-priority": -1})
        self.consume(queue, "high-a", arguments={"x-priority": 10})
        self.consume(queue, "high-b", arguments={"x-priority": 10})
        self.consume(queue, "low-b", arguments={"x-priority": -1})
        for _ in range(6):
            self.world.publish("q")
        self.assertEqual(self.tags(), ["high-a", "high-b", "high-a", "high-b", "low-a", "low-b"])

    def test_invalid_consumer_priority(self) -> None:
        queue = self.world.declare("q")
        error = self.assertRaises(
            PreconditionFailed, self.world.session.consume, queue, "c", arguments={"x-priority": b"high"}
        )
        self.assertIn("invalid arg 'x-priority'", error.reply_text)


class PausedTransportTests(SynchronousTestCase):
    """While the connection's transport is paused (its buffer is full), a
    consumer that a prefetch window bounds goes on taking the room each
    acknowledgement makes; one without a window waits until it drains."""

    def setUp(self) -> None:
        self.world = World()
        self.queue = self.world.declare("q")

    def consumed(self, session: Any = None, **options: Any) -> list[int]:
        """Consume the queue on *session*; its delivery tags so far, kept up to date."""
        session = session or self.world.session
        session.consume(self.queue, "c", **options).start()
        return session.unacked  # type: ignore[no-any-return]

    def publish(self, count: int) -> None:
        for number in range(count):
            self.world.publish("q", b"%d" % number)

    def test_acks_make_room_at_once_within_the_prefetch_count(self) -> None:
        session = self.world.session
        session.qos(0, 2, False)
        unacked = self.consumed()
        self.publish(5)
        self.world.client.set_writable(False)
        session.ack(next(iter(unacked)))
        self.assertEqual(self.world.sink.bodies(), [b"0", b"1", b"2"])
        session.ack(max(unacked), multiple=True)
        self.assertEqual(self.world.sink.bodies(), [b"0", b"1", b"2", b"3", b"4"])
        self.assertEqual(len(unacked), 2, "the prefetch count still bounds what is unsettled")

    def test_a_size_window_bounds_too(self) -> None:
        session = self.world.session
        session.qos(2, 0, False)  # bytes: two of these one-byte bodies
        unacked = self.consumed()
        self.publish(4)
        self.assertEqual(self.world.sink.bodies(), [b"0", b"1"])
        self.world.client.set_writable(False)
        session.ack(next(iter(unacked)))
        self.assertEqual(self.world.sink.bodies(), [b"0", b"1", b"2"])

    def test_a_connection_wide_window_bounds_too(self) -> None:
        session = self.world.session
        session.per_consumer_qos = False
        session.qos(0, 1, True)
        self.consumed()
        self.publish(2)
        self.world.client.set_writable(False)
        session.ack(1)
        self.assertEqual(self.world.sink.bodies(), [b"0", b"1"])

    def test_a_window_opened_while_paused_is_used(self) -> None:
        session = self.world.session
        session.per_consumer_qos = False  # 0-8 and 0-9: basic.qos sets the channel's window
        session.qos(0, 1, False)
        self.consumed()
        self.publish(3)
        self.world.client.set_writable(False)
        session.qos(0, 3, False)
        self.assertEqual(self.world.sink.bodies(), [b"0", b"1", b"2"])

    def test_consumers_without_a_window_wait_for_the_transport(self) -> None:
        for options in ({"no_ack": True}, {}):
            world = self.world = World()
            self.queue = world.declare("q")
            self.consumed(**options)
            world.client.set_writable(False)
            self.publish(2)
            self.assertEqual(world.sink.bodies(), [], options)
            world.client.set_writable(True)
            self.assertEqual(world.sink.bodies(), [b"0", b"1"], options)

    def test_flow_holds_a_windowed_consumer_and_releases_it_while_paused(self) -> None:
        session = self.world.session
        session.qos(0, 1, False)
        unacked = self.consumed()
        self.publish(3)
        self.world.client.set_writable(False)
        session.flow(False)
        session.ack(next(iter(unacked)))
        self.assertEqual(self.world.sink.bodies(), [b"0"])
        session.flow(True)
        self.assertEqual(self.world.sink.bodies(), [b"0", b"1"])

    def test_a_closed_channel_takes_nothing(self) -> None:
        session = self.world.session
        session.qos(0, 1, False)
        consumer = session.consume(self.queue, "c")
        self.world.client.set_writable(False)
        session.close()
        self.assertFalse(consumer.can_take(message(b"x", "q")))


class DeclarationTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.world = World()

    def test_invalid_arguments(self) -> None:
        cases = [
            # RabbitMQ's reason, then the hint in plain words.
            ({"x-message-ttl": -1}, "invalid arg 'x-message-ttl' for queue 'q' in vhost '/': "
             "{value_negative,-1}; expected a non-negative integer"),
            ({"x-message-ttl": b"10"}, "\"expected integer, got longstr\"; got '10' (a string)"),
            ({"x-expires": 0}, "invalid arg 'x-expires' for queue 'q' in vhost '/': {value_zero,0}"),
            ({"x-overflow": b"foo"}, "invalid_overflow; expected one of drop-head, reject-publish, reject-publish-dlx"),
            ({"x-max-priority": 256}, "{max_value_exceeded,256}; at most 255"),
            ({"x-message-ttl": 315360000001}, "{value_too_large,315360000001}; at most 315360000000"),
            ({"x-dead-letter-exchange": 5}, "invalid arg 'x-dead-letter-exchange'"),
            ({"x-dead-letter-routing-key": b"k"},
             "routing_key_but_no_dlx_defined; a dead-letter routing key needs x-dead-letter-exchange too"),
            ({"x-single-active-consumer": b"yes"}, "{unacceptable_type,longstr}; expected a boolean"),
            ({"x-queue-mode": b"fast"}, "\"unsupported queue mode 'fast'\"; expected one of default, lazy"),
            ({"x-queue-type": b"fancy"}, "invalid arg 'x-queue-type'"),
        ]
        for arguments, text in cases:
            error = self.assertRaises(PreconditionFailed, self.world.declare, "q", arguments)
            self.assertEqual(error.reply_code, 406)
            self.assertIn(text, error.full_text)
        self.assertNotIn("q", self.world.vhost.queues)

    def test_redeclare_with_other_arguments(self) -> None:
        self.world.declare("q", {"x-message-ttl": 1000, "x-max-priority": 5, "x-custom": 1})
        self.world.declare("q", {"x-message-ttl": 1000, "x-max-priority": 5, "x-queue-type": b"classic"})
        for arguments, text in (
            ({"x-message-ttl": 2000, "x-max-priority": 5}, "inequivalent arg 'x-message-ttl' for queue 'q' in vhost '/': received '2000' but current is '1000'"),
            ({"x-max-priority": 5}, "received none but current is the value '1000' of type 'signedint'"),
            ({"x-message-ttl": 1000, "x-max-priority": 5, "x-expires": 10}, "inequivalent arg 'x-expires'"),
            ({"x-message-ttl": 1000, "x-max-priority": 5, "x-queue-type": b"quorum"}, "inequivalent arg 'x-queue-type'"),
        ):
            error = self.assertRaises(PreconditionFailed, self.world.declare, "q", arguments)
            self.assertIn(text, error.reply_text)

    def test_quorum_rules(self) -> None:
        quorum = {"x-queue-type": b"quorum"}
        for flags, text in (({}, "'non-durable'"), ({"durable": True, "exclusive": True}, "'exclusive-owner'"),
                            ({"durable": True, "auto_delete": True}, "'auto-delete'")):
            error = self.assertRaises(PreconditionFailed, self.world.declare, "qq", quorum, **flags)
            self.assertIn(text, error.reply_text)
        error = self.assertRaises(
            PreconditionFailed, self.world.declare, "qq", {**quorum, "x-max-priority": 3}, durable=True
        )
        self.assertEqual(
            error.full_text,
            "invalid arg 'x-max-priority' for queue 'qq' in vhost '/' of queue type rabbit_quorum_queue; "
            "quorum queues do not support it",
        )
        self.world.declare("qq", {**quorum, "x-overflow": b"reject-publish-dlx"}, durable=True)

    def test_arguments_of_other_queue_types_are_refused(self) -> None:
        for name, value in (("x-delivery-limit", 5), ("x-max-age", b"1D"), ("x-queue-leader-locator", b"balanced")):
            error = self.assertRaises(PreconditionFailed, self.world.declare, "q", {name: value})
            self.assertEqual(
                f"invalid arg {name!r} for queue 'q' in vhost '/' of queue type rabbit_classic_queue",
                error.reply_text,
            )

    def test_quorum_delivery_limit(self) -> None:
        self.world.vhost.declare_exchange("dlx", "fanout")
        self.world.declare("dead")
        self.world.vhost.bind_queue("dead", "dlx", "", {}, self.world.client)
        self.world.declare(
            "qq", {"x-queue-type": b"quorum", "x-delivery-limit": 1, "x-dead-letter-exchange": b"dlx"},
            durable=True,
        )
        self.world.publish("qq", b"poison")
        for _ in range(2):
            got = self.world.get("qq", no_ack=False)
            assert got is not None
            self.world.session.reject(got[0], requeue=True)
        self.assertEqual(self.world.bodies("qq"), [])
        dead = self.world.get("dead")
        assert dead is not None
        self.assertEqual(dead[1].properties.headers["x-death"][0]["reason"], b"delivery_limit")

    def quorum_queue_with_a_dead_letter_queue(self, limit: int) -> Any:
        """Quorum queue ``qq`` with x-delivery-limit *limit*, dead-lettering to queue ``dead``."""
        self.world.vhost.declare_exchange("dlx", "fanout")
        self.world.declare("dead")
        self.world.vhost.bind_queue("dead", "dlx", "", {}, self.world.client)
        self.world.declare(
            "qq", {"x-queue-type": b"quorum", "x-delivery-limit": limit, "x-dead-letter-exchange": b"dlx"},
            durable=True,
        )
        return self.world.vhost.queues["qq"]

    def test_quorum_delivery_limit_counts_each_message_through_a_consumer(self) -> None:
        queue = self.quorum_queue_with_a_dead_letter_queue(2)
        self.world.publish("qq", b"poison")
        self.world.publish("qq", b"fine")
        consumer = self.world.session.consume(queue, "c", no_ack=False)
        consumer.start()
        # Each round returns every delivery made so far: both messages come
        # back, and come again, until "poison" is over its limit of two
        # returns; "fine" is returned twice and then acknowledged.
        for _ in range(2):
            tags = [tag for _, tag, _, _ in self.world.sink.deliveries[-2:]]
            self.world.session.nack(tags[-1], multiple=True, requeue=True)
        poison_tag, fine_tag = [tag for _, tag, _, _ in self.world.sink.deliveries[-2:]]
        self.world.session.ack(fine_tag)
        self.world.session.reject(poison_tag, requeue=True)
        self.assertEqual(
            [(body, redelivered) for _, _, redelivered, body in self.world.sink.deliveries],
            [(b"poison", False), (b"fine", False), (b"poison", True), (b"fine", True), (b"poison", True), (b"fine", True)],
        )
        self.assertEqual(self.world.bodies("qq"), [])
        self.assertEqual(self.world.bodies("dead"), [b"poison"])
        self.assertEqual((queue.take_returns(0), queue.take_returns(1)), (0, 0), "no count outlives its message")

    def test_quorum_delivery_limit_forgets_the_counts_of_dropped_messages(self) -> None:
        queue = self.quorum_queue_with_a_dead_letter_queue(1000)
        for index in range(200):
            self.world.publish("qq", b"%d" % index)
        for _ in range(3):
            tags = []
            while (got := self.world.get("qq", no_ack=False)) is not None:
                tags.append(got[0])
            self.world.session.nack(tags[-1], multiple=True, requeue=True)
            queue.purge()
            for index in range(200):
                self.world.publish("qq", b"%d" % index)
        tags = []
        while (got := self.world.get("qq", no_ack=False)) is not None:
            tags.append(got[0])
        self.world.session.nack(tags[0], multiple=False, requeue=True)
        self.assertEqual(
            len([sequence for sequence in range(1000) if queue.take_returns(sequence)]), 1,
            "the counts of the purged messages are forgotten",
        )
