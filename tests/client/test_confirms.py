"""The client's tracking of publisher confirms."""

from __future__ import annotations

from twisted.internet.defer import Deferred
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

    def test_the_given_deferred_is_the_one_fired(self) -> None:
        tracker = ConfirmTracker()
        mine: Deferred[int] = Deferred()
        self.assertIs(tracker.published(mine), mine)
        tracker.acked(1, False)
        self.assertEqual(self.successResultOf(mine), 1)

    def test_the_channel_end_offers_each_unconfirmed_deferred_in_order(self) -> None:
        tracker = ConfirmTracker()
        offered: list[Deferred[int]] = []
        published = [tracker.published() for _ in range(4)]
        tracker.acked(2, False)

        def take_odd_tags(error: BaseException, deferred: Deferred[int]) -> bool:
            offered.append(deferred)
            return published.index(deferred) % 2 == 0

        tracker.handover = take_odd_tags
        tracker.failAll(ValueError("gone"))
        self.assertEqual(offered, [published[0], published[2], published[3]])
        self.assertNoResult(published[0])
        self.assertNoResult(published[2])
        self.failureResultOf(published[3], ValueError)
        self.assertEqual(tracker.unconfirmed, 0)


class ConfirmGroupTests(SynchronousTestCase):
    """One Deferred for messages published together (``published_group``)."""

    def test_group_fires_once_every_message_is_acked(self) -> None:
        tracker = ConfirmTracker()
        before = tracker.published()
        group = tracker.published_group(3)
        after = tracker.published()
        self.assertEqual(tracker.unconfirmed, 5)
        tracker.acked(3, True)
        self.assertEqual((self.successResultOf(before), tracker.unconfirmed), (1, 2))
        self.assertNoResult(group)
        tracker.acked(5, False)
        self.assertEqual((self.successResultOf(after), tracker.unconfirmed), (5, 1))
        self.assertNoResult(group)
        tracker.acked(4, True)
        self.assertEqual((self.successResultOf(group), tracker.unconfirmed), (4, 0))

    def test_single_acks_in_any_order(self) -> None:
        tracker = ConfirmTracker()
        group = tracker.published_group(3)
        for tag in (3, 1):
            tracker.acked(tag, False)
            self.assertNoResult(group)
        tracker.acked(2, False)
        self.assertEqual((self.successResultOf(group), tracker.unconfirmed), (3, 0))

    def test_a_nack_fails_the_group_once_all_are_settled(self) -> None:
        tracker = ConfirmTracker()
        group = tracker.published_group(4)
        tracker.nacked(3, False)
        tracker.acked(2, True)
        self.assertNoResult(group)
        tracker.nacked(4, False)
        self.assertEqual(self.failureResultOf(group, MessageNacked).value.delivery_tag, 3)

    def test_ack_of_everything(self) -> None:
        tracker = ConfirmTracker()
        groups = [tracker.published_group(2), tracker.published_group(1)]
        tracker.acked(0, True)
        self.assertEqual([self.successResultOf(group) for group in groups], [2, 3])
        self.assertEqual(tracker.unconfirmed, 0)

    def test_channel_end_fails_groups(self) -> None:
        tracker = ConfirmTracker()
        group = tracker.published_group(2)
        tracker.acked(1, False)
        tracker.failAll(RuntimeError("gone"))
        self.failureResultOf(group, RuntimeError)
        self.assertEqual(tracker.unconfirmed, 0)
