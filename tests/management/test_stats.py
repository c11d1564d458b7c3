"""Counters sampled into rates on a clock, and totals over live and closed channels."""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.broker.model.stats import ChannelCounters, QueueCounters
from txamqp09.broker.server import ServerFactory
from txamqp09.management.cache import ComputeCache
from txamqp09.management.direct import DirectSession
from txamqp09.management.node import Node
from txamqp09.management.stats import with_details


class StatisticsTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.node = Node(ServerFactory(self.clock))
        self.vhost = self.node.broker.vhosts["/"]

    def test_rates_are_the_change_between_two_samples(self) -> None:
        queue = self.vhost.declare_queue("q", DirectSession(self.vhost).client)
        self.node.start()
        queue.stats.deliver += 50
        self.clock.advance(5)
        self.assertEqual(self.node.stats.rates(queue.stats)["deliver"], 10.0)
        self.clock.advance(5)
        self.assertEqual(self.node.stats.rates(queue.stats)["deliver"], 0.0)
        self.node.stop()

    def test_a_closed_sessions_counts_stay_in_its_vhosts_totals(self) -> None:
        with DirectSession(self.vhost) as session:
            session.declare_queue("q")
            session.session.stats.publish += 3
        self.assertEqual(self.vhost.retired.publish, 3)
        self.assertEqual(self.node.stats.vhost("/").publish, 3)
        self.assertEqual(self.node.stats.totals().publish, 3)

    def test_shapes(self) -> None:
        self.assertEqual(with_details({"ack": 2}, {"ack": 0.5}), {"ack": 2, "ack_details": {"rate": 0.5}})
        stats = self.node.stats.message_stats([ChannelCounters()])
        self.assertEqual(stats["deliver_get"], 0)
        self.assertIn("deliver_get_details", stats)

    def test_counter_fields(self) -> None:
        self.assertEqual(QueueCounters().as_dict()["dead_lettered"], 0)
        self.assertIn("confirm", ChannelCounters.FIELDS)
        self.assertNotIn("confirm", QueueCounters.FIELDS)


class ComputeCacheTests(SynchronousTestCase):
    def test_a_value_lives_five_times_its_computing_time(self) -> None:
        now = [0.0]
        cache = ComputeCache(clock=lambda: now[0])
        computed: list[int] = []

        def compute() -> int:
            now[0] += 0.2  # computing takes 0.2 s
            computed.append(len(computed))
            return len(computed)

        self.assertEqual(cache.fetch("k", compute), 1)
        now[0] += 0.9
        self.assertEqual(cache.fetch("k", compute), 1)
        self.assertEqual(cache.fetch("other", compute), 2)
        now[0] += 0.2
        self.assertEqual(cache.fetch("k", compute), 3)
