"""The collector's survivors are frozen while the backlog is large, and thawed after."""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from tests.broker.model.support import message_for_store as message
from tests.broker.support import session
from txamqp09.broker.collector import CollectorPolicy, queued_messages
from txamqp09.broker.model import Broker, Client


class FakeCollector:
    """Counts full passes as told, and records freezes and thaws."""

    def __init__(self) -> None:
        self.full_passes = 0
        self.calls: list[str] = []

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
