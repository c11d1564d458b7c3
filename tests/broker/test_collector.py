"""The collector's survivors are frozen while the backlog is large, and thawed after."""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from tests.broker.model.support import message_for_store as message
from tests.broker.support import session
from txamqp09.broker.collector import DEFAULT_YOUNG_THRESHOLD, CollectorPolicy, queued_messages
from txamqp09.broker.model import Broker, Client


class FakeCollector:
    """Counts full passes as told, and records freezes and thaws."""

    def __init__(self) -> None:
        self.full_passes = 0
        self.calls: list[str] = []
        self.thresholds = (700, 10, 10)

    def get_threshold(self) -> tuple[int, int, int]:
        return self.thresholds

    def set_threshold(self, threshold0: int, threshold1: int = 10, threshold2: int = 10) -> None:
        self.thresholds = (threshold0, threshold1, threshold2)

    def get_stats(self) -> list[dict[str, Any]]:
        return [{"collections": 0}, {"collections": 0}, {"collections": self.full_passes}]

    def freeze(self) -> None:
        self.calls.append("freeze")

    def unfreeze(self) -> None:
        self.calls.append("unfreeze")

    def collect(self) -> int:
        self.calls.append("collect")
        self.full_passes += 1
        return 0


class CollectorPolicyTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.broker = Broker()
        self.vhost = self.broker.vhosts["/"]
        self.client = Client("c")
        self.vhost.declare_queue("q", self.client)
        self.publisher, _ = session(self.vhost, self.client)
        self.clock = Clock()
        self.gc = FakeCollector()
        self.policy = CollectorPolicy(self.broker, self.clock, threshold=10, collector=self.gc)
        self.policy.start()
        self.addCleanup(self.policy.stop)

    def queue(self, count: int) -> None:
        for n in range(count):
            self.publisher.publish("", message(b"%d" % n, "q"), False, False)

    def test_a_full_pass_over_a_large_backlog_freezes_its_survivors(self) -> None:
        self.queue(10)
        self.clock.advance(1)
        self.assertEqual(self.gc.calls, [])
        self.gc.full_passes += 1
        self.clock.advance(1)
        self.assertEqual(self.gc.calls, ["freeze"])
        self.clock.advance(1)
        self.assertEqual(self.gc.calls, ["freeze"])

    def test_a_full_pass_over_a_small_backlog_freezes_nothing(self) -> None:
        self.queue(9)
        self.gc.full_passes += 1
        self.clock.advance(1)
        self.assertEqual(self.gc.calls, [])

    def test_thawed_once_the_backlog_is_below_half_the_threshold(self) -> None:
        self.queue(12)
        self.gc.full_passes += 1
        self.clock.advance(1)
        self.vhost.purge_queue("q", self.client)
        self.queue(5)
        self.clock.advance(1)
        self.assertEqual(self.gc.calls, ["freeze"])
        self.vhost.purge_queue("q", self.client)
        self.queue(4)
        self.clock.advance(1)
        self.assertEqual(self.gc.calls, ["freeze", "unfreeze", "collect"])
        self.assertEqual(queued_messages(self.broker), 4)
        self.clock.advance(1)
        self.assertEqual(self.gc.calls, ["freeze", "unfreeze", "collect"])

    def test_a_drained_backlog_is_collected_once_even_if_never_frozen(self) -> None:
        """The cycles that died while the backlog was large are freed (with
        the memory they pinned) once it is drained, frozen or not."""
        self.queue(10)
        self.clock.advance(1)
        self.vhost.purge_queue("q", self.client)
        self.clock.advance(1)
        self.assertEqual(self.gc.calls, ["collect"])
        self.queue(9)
        self.clock.advance(1)
        self.vhost.purge_queue("q", self.client)
        self.clock.advance(1)
        self.assertEqual(self.gc.calls, ["collect"])

    def test_stopping_thaws_and_a_zero_threshold_never_looks(self) -> None:
        self.policy.freeze()
        self.policy.stop()
        self.assertEqual(self.gc.calls, ["freeze", "unfreeze"])
        idle = CollectorPolicy(self.broker, self.clock, threshold=0, collector=self.gc)
        idle.start()
        self.queue(50)
        self.gc.full_passes += 1
        self.clock.advance(5)
        self.assertEqual(self.gc.calls, ["freeze", "unfreeze"])


class YoungThresholdTests(SynchronousTestCase):
    """While the policy runs, young passes are rarer (the store's records
    of every publish need not be walked and promoted)."""

    def while_running(self, thresholds: tuple[int, int, int], **options: Any) -> tuple[int, int, int]:
        """The collector's thresholds while a policy with *options* runs,
        *thresholds* before; checks that stopping restores them."""
        collector = FakeCollector()
        collector.thresholds = thresholds
        policy = CollectorPolicy(Broker(), Clock(), collector=collector, **options)
        policy.start()
        policy.start()
        running = collector.thresholds
        policy.stop()
        self.assertEqual(collector.thresholds, thresholds)
        return running

    def test_raised_while_running_and_restored_after(self) -> None:
        self.assertEqual(self.while_running((700, 20, 30), young=50_000), (50_000, 20, 30))
        self.assertEqual(self.while_running((700, 10, 10))[0], DEFAULT_YOUNG_THRESHOLD)

    def test_a_larger_setting_is_kept_and_zero_changes_nothing(self) -> None:
        self.assertEqual(self.while_running((90_000, 10, 10), young=50_000), (90_000, 10, 10))
        self.assertEqual(self.while_running((700, 10, 10), young=0), (700, 10, 10))

    def test_raised_also_without_freezing(self) -> None:
        self.assertEqual(self.while_running((700, 10, 10), threshold=0)[0], DEFAULT_YOUNG_THRESHOLD)
