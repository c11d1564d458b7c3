"""Counters sampled into rates on a clock, and totals over live and closed channels."""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.broker.model.stats import ChannelCounters, QueueCounters
from txamqp09.broker.server import ServerFactory
from txamqp09.management.direct import DirectSession
from txamqp09.management.node import Node
from txamqp09.management.stats import HISTORY, Range, RangeError, Ranges, Series, with_details


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


class HistoryTests(SynchronousTestCase):
    """Sample histories in RabbitMQ 3.10's shape (``msg_rates_age`` and friends)."""

    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(1000)
        self.node = Node(ServerFactory(self.clock))
        self.vhost = self.node.broker.vhosts["/"]
        self.queue = self.vhost.declare_queue("q", DirectSession(self.vhost).client)

    def test_ranges_are_read_as_rabbitmq_reads_them(self) -> None:
        now = 1003.5
        ranges = Ranges.from_query({"msg_rates_age": "60", "msg_rates_incr": "5", "lengths_age": "20",
                                    "lengths_incr": "10", "data_rates_age": "60"}, now, ceil_lengths=True)
        self.assertEqual(ranges.msg_rates, Range(940_000, 1_000_000, 5_000))
        self.assertEqual(ranges.lengths, Range(990_000, 1_010_000, 10_000))
        self.assertIsNone(ranges.data_rates)
        self.assertEqual(Ranges.from_query({"msg_rates_age": "x", "msg_rates_incr": "5"}, now), Ranges())
        for age, incr in (("0", "5"), ("60", "-5"), ("2505", "5")):
            with self.assertRaises(RangeError) as raised:
                Ranges.from_query({"msg_rates_age": age, "msg_rates_incr": incr}, now)
            self.assertEqual(str(raised.exception), f"Invalid range parameters: age {age}, incr {incr}")

    def test_message_rates_history(self) -> None:
        self.node.start()  # samples at 1000
        for published in (10, 10, 25):  # samples at 1005, 1010, 1015
            self.queue.stats.deliver += published
            self.clock.advance(5)
        stats = self.node.stats.channel_stats(self.queue.stats, Range(1000_000, 1015_000, 5_000))
        details = stats["deliver_details"]
        self.assertEqual(stats["deliver"], 45)
        self.assertEqual(details["samples"], [
            {"sample": 45, "timestamp": 1015_000}, {"sample": 20, "timestamp": 1010_000},
            {"sample": 10, "timestamp": 1005_000}, {"sample": 0, "timestamp": 1000_000}])
        self.assertEqual(details["rate"], 5.0)
        self.assertEqual(details["avg_rate"], 3.0)
        self.assertEqual(details["avg"], 75 / 4)
        self.assertEqual(stats["deliver_get_details"]["samples"][0], {"sample": 45, "timestamp": 1015_000})
        self.assertEqual(list(details), ["rate", "samples", "avg_rate", "avg"])
        self.node.stop()

    def test_points_between_samples_take_the_last_sample_before_them(self) -> None:
        self.node.start()
        self.queue.stats.ack += 7
        self.clock.advance(5)  # 1005: 7
        stats = self.node.stats.details(self.queue.stats, Range(996_000, 1008_000, 3_000))
        self.assertEqual([point["sample"] for point in stats["ack_details"]["samples"]], [7, 7, 0, 0, 0])
        self.node.stop()

    def test_lengths_history_of_queue_vhost_and_overview(self) -> None:
        self.node.start()
        with DirectSession(self.vhost) as session:
            for _ in range(3):
                session.publish("", "q", b"m")
        self.clock.advance(5)
        span = Range(1000_000, 1005_000, 5_000)
        queue = self.node.stats.queue_lengths(self.queue, 0, span)
        self.assertEqual(queue["messages_ready_details"]["samples"],
                         [{"sample": 3, "timestamp": 1005_000}, {"sample": 0, "timestamp": 1000_000}])
        totals = self.node.stats.queue_totals([self.vhost], span)
        self.assertEqual(totals["messages"], 3)
        self.assertEqual(totals["messages_details"]["rate"], 0.6)
        self.assertEqual(self.node.stats.queue_totals([self.vhost])["messages_ready"], 3)
        self.node.stop()

    def test_history_is_bounded_and_idle_objects_keep_one_sample(self) -> None:
        series = Series(1)
        for second in range(0, 2 * HISTORY, 5):
            series.add(float(second), (1,))
        self.assertEqual(len(series.history), 1)
        for second in range(2 * HISTORY, 4 * HISTORY, 5):
            series.add(float(second), (second,))
        self.assertLessEqual(len(series.history), HISTORY // 5 + 1)
        newest = 4 * HISTORY - 5
        self.assertEqual(series.points(Range((newest - HISTORY + 5) * 1000, newest * 1000, 5000))[0][1],
                         (newest - HISTORY + 5,))
