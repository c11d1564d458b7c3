"""The client's tracking of publisher confirms."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from txamqp09.client.confirms import ConfirmTracker
from txamqp09.client.errors import MessageNacked


class ConfirmTrackerTests(SynchronousTestCase):
    def test_out_of_order_single_acks(self) -> None:
        tracker = ConfirmTracker()
        first, second, third = (tracker.published() for _ in range(3))
        tracker.acked(2, False)
        tracker.nacked(1, False)
        self.assertEqual(self.successResultOf(second), 2)
        self.failureResultOf(first, MessageNacked)
        tracker.acked(3, True)
        self.assertEqual((self.successResultOf(third), tracker.unconfirmed), (3, 0))

    def test_unknown_tags_are_ignored(self) -> None:
        tracker = ConfirmTracker()
        waiting = tracker.published()
        tracker.acked(5, False)
        self.assertNoResult(waiting)

    def test_callbacks_publishing_more_are_not_settled_by_the_same_ack(self) -> None:
        tracker = ConfirmTracker()
        later = []
        tracker.published().addCallback(lambda _: later.append(tracker.published()))
        tracker.acked(0, True)
        self.assertNoResult(later[0])
