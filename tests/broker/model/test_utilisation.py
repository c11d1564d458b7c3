"""Consumer utilisation as RabbitMQ measures it: the share of time, averaged
with a one-second half-life, in which a queue could hand a waiting message
to a consumer at once; driven by a Clock."""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from tests.broker.model.support import World
from txamqp09.broker.model.utilisation import ConsumerUse, moving_average


class ConsumerUseTests(SynchronousTestCase):
    """The state and its average on their own."""

    def setUp(self) -> None:
        self.clock = Clock()
        self.use = ConsumerUse(self.clock)

    def test_starts_active(self) -> None:
        self.clock.advance(30)
        self.assertEqual(self.use.utilisation(), 1.0)

    def test_half_life_of_one_second(self) -> None:
        """Blocked for one second after a long active time: half of the old
        average is left, and the blocked second's share (0) makes the other half."""
        self.clock.advance(100)
        self.use.block()
        self.assertEqual(self.use.utilisation(), 1.0)
        self.clock.advance(1)
        # 100 s active then 1 s blocked: 100/101 of the period was active,
        # weighted by 1 - 0.5 ** 101; the previous average (1.0) by 0.5 ** 101.
        self.assertAlmostEqual(self.use.utilisation(), 100 / 101, places=9)
        self.use.unblock()
        self.clock.advance(1)
        # The first period is now the average (100/101); one active second
        # weighs half: (1 + 100/101) / 2.
        self.assertAlmostEqual(self.use.utilisation(), (1 + 100 / 101) / 2, places=9)

    def test_transitions_to_the_same_state_change_nothing(self) -> None:
        self.clock.advance(2)
        self.use.unblock()
        self.use.block()
        self.clock.advance(3)
        self.use.block()
        self.assertAlmostEqual(self.use.utilisation(), moving_average(2, 3, 1.0))
        self.assertAlmostEqual(moving_average(2, 3, 1.0), 0.4 * (1 - 0.5 ** 5) + 0.5 ** 5)


class QueueUtilisationTests(SynchronousTestCase):
    """A queue tells its ConsumerUse of the transitions."""

    def setUp(self) -> None:
        self.world = World()
        self.queue = self.world.declare("q")
        self.world.session.qos(0, 1, False)
        self.world.session.consume(self.queue, "c").start()

    def utilisation(self) -> float:
        return self.queue.consumer_utilisation()

    def test_blocked_by_prefetch_then_free(self) -> None:
        self.world.publish("q", b"1")
        self.world.publish("q", b"2")
        self.assertEqual((self.world.sink.bodies(), self.queue.message_count), ([b"1"], 1))
        self.world.clock.advance(20)
        self.assertLess(self.utilisation(), 0.001)
        self.world.session.ack(1)
        self.assertEqual((self.world.sink.bodies(), self.queue.message_count), ([b"1", b"2"], 0))
        self.world.clock.advance(20)
        self.assertGreater(self.utilisation(), 0.999)

    def test_time_weighted_over_the_window(self) -> None:
        """Blocked half of the time in short spells: about 0.5, whenever it is
        asked (a snapshot would say 0.0 while blocked and 1.0 while not)."""
        tag = 0
        for _ in range(50):
            self.world.publish("q", b"a")
            self.world.publish("q", b"b")
            self.world.clock.advance(0.1)
            if _ == 49:
                self.assertEqual(self.queue.message_count, 1)
                self.assertLess(abs(self.utilisation() - 0.5), 0.05)
            tag += 1
            self.world.session.ack(tag)
            self.world.clock.advance(0.1)
            tag += 1
            self.world.session.ack(tag)
        self.assertLess(abs(self.utilisation() - 0.5), 0.05)
        self.assertEqual(len(self.world.sink.bodies()), 100)

    def test_messages_taken_otherwise_end_the_blocked_state(self) -> None:
        self.world.publish("q", b"1")
        self.world.publish("q", b"2")
        self.world.clock.advance(1)
        self.queue.purge()
        self.world.clock.advance(20)
        self.assertGreater(self.utilisation(), 0.999)

    def test_a_new_consumer_with_room_ends_the_blocked_state(self) -> None:
        self.world.publish("q", b"1")
        self.world.publish("q", b"2")
        self.world.clock.advance(20)
        self.assertLess(self.utilisation(), 0.001)
        self.world.session.consume(self.queue, "d").start()
        self.assertEqual(self.queue.message_count, 0)
        self.world.clock.advance(20)
        self.assertGreater(self.utilisation(), 0.999)


class StateWatcherTests(SynchronousTestCase):
    """A queue tells its state watchers when consumers come or go and when
    messages start or stop waiting for them, and at no other time."""

    def setUp(self) -> None:
        self.world = World()
        self.queue = self.world.declare("q")
        self.told: list[tuple[int, int]] = []
        self.queue.state_watchers = (lambda: self.told.append((self.queue.consumer_count,
                                                               self.queue.message_count)),)

    def test_transitions_only(self) -> None:
        self.world.publish("q", b"0")  # no consumer: nothing waits for one
        self.assertEqual(self.told, [])
        self.world.session.qos(0, 1, False)
        self.world.session.consume(self.queue, "c").start()
        # Told of the consumer; the waiting message went to it.
        self.assertEqual(self.told, [(1, 1), (1, 0)])
        self.world.publish("q", b"1")
        self.world.publish("q", b"2")
        self.assertEqual(self.told[2:], [(1, 1)])  # the window is full: messages wait
        self.world.session.ack(1)
        self.assertEqual(self.told[3:], [])  # one went out, one still waits
        self.world.session.ack(2)
        self.assertEqual(self.told[3:], [(1, 0)])  # none waits
        self.world.session.ack(3)
        self.world.session.cancel("c")
        self.assertEqual(self.told[4:], [(0, 0)])
