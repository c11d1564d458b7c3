"""eventually(): waits on a condition, on the clock it is given."""

from __future__ import annotations

from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.testing.waiting import NeverHappened, eventually


class EventuallyTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()

    def test_a_condition_already_true_fires_at_once(self) -> None:
        self.assertEqual(self.successResultOf(eventually(lambda: "ready", self.clock)), "ready")

    def test_looks_again_every_interval_until_true(self) -> None:
        looks: list[float] = []

        def condition() -> bool:
            looks.append(self.clock.seconds())
            return len(looks) == 3

        waiting = eventually(condition, self.clock, timeout=10, interval=2)
        self.assertNoResult(waiting)
        self.clock.advance(2)
        self.assertNoResult(waiting)
        self.clock.advance(2)
        self.assertIs(self.successResultOf(waiting), True)
        self.assertEqual(looks, [0, 2, 4])

    def test_awaits_a_deferred_condition(self) -> None:
        answers = [succeed(None), succeed({"body": b"x"})]
        waiting = eventually(lambda: answers.pop(0), self.clock, interval=1)
        self.clock.advance(1)
        self.assertEqual(self.successResultOf(waiting), {"body": b"x"})

    def test_a_pending_deferred_condition_is_waited_for(self) -> None:
        answer: Deferred[str] = Deferred()
        waiting = eventually(lambda: answer, self.clock)
        self.assertNoResult(waiting)
        answer.callback("late")
        self.assertEqual(self.successResultOf(waiting), "late")

    def test_gives_up_after_the_timeout_naming_what(self) -> None:
        waiting = eventually(lambda: 0, self.clock, timeout=3, interval=1, what="the queue to drain")
        self.clock.pump([1, 1])
        self.assertNoResult(waiting)
        self.clock.advance(1)
        failure = self.failureResultOf(waiting, NeverHappened)
        self.assertIn("the queue to drain did not hold within 3 s", str(failure.value))

    def test_a_failing_condition_fails_the_wait(self) -> None:
        def condition() -> bool:
            raise ValueError("broken probe")

        self.failureResultOf(eventually(condition, self.clock), ValueError)
