"""The metrics listener over loopback: every scrape parsed by prometheus_client,
values that move with AMQP traffic, the three paths and both formats."""

from __future__ import annotations

from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import gatherResults, inlineCallbacks
from twisted.trial.unittest import TestCase

from txamqp09.client.connection import connect
from txamqp09.testing.waiting import eventually
from tests.prometheus.support import MetricsBroker, Scraped

QUEUE = "metrics-q"


class MetricsTests(TestCase):
    timeout = 60

    @inlineCallbacks
    def setUp(self) -> Any:
        self.broker = MetricsBroker()
        yield self.broker.start()
        self.addCleanup(self.broker.stop)

    @inlineCallbacks
    def traffic(self) -> Any:
        """One connection and channel: a queue, 6 confirmed publishes (one
        unroutable), a get acknowledged and one without acknowledgement;
        returns (connection, channel) still open."""
        connection = yield connect(reactor, self.broker.url)
        self.addCleanup(connection.disconnect)
        channel = yield connection.channel()
        yield channel.confirm_select()
        yield channel.queue_declare(QUEUE)
        confirms = [channel.basic_publish(b"12345", "", QUEUE) for _ in range(5)]
        confirms.append(channel.basic_publish(b"lost", "amq.topic", "nowhere"))
        yield gatherResults(confirms)
        got = yield channel.basic_get(QUEUE)
        got.ack()
        yield channel.basic_get(QUEUE, no_ack=True)
        return connection, channel

    @inlineCallbacks
    def test_aggregated_counters_move_with_traffic(self) -> Any:
        before: Scraped = yield self.broker.scrape()
        self.assertEqual(before.status, 200)
        self.assertEqual(before.value("rabbitmq_channel_messages_published_total"), 0)
        yield self.traffic()
        after: Scraped = yield self.broker.scrape()
        expected = {
            "rabbitmq_channel_messages_published_total": 6,
            "rabbitmq_channel_messages_confirmed_total": 6,
            "rabbitmq_channel_messages_unroutable_dropped_total": 1,
            "rabbitmq_channel_messages_unroutable_returned_total": 0,
            "rabbitmq_channel_get_ack_total": 1,
            "rabbitmq_channel_get_total": 1,
            "rabbitmq_channel_messages_acked_total": 1,
            "rabbitmq_connections_opened_total": 1,
            "rabbitmq_channels_opened_total": 1,
            "rabbitmq_queues_declared_total": 1,
            "rabbitmq_queues_created_total": 1,
            "rabbitmq_queue_messages_ready": 3,
            "rabbitmq_queue_messages_bytes": 15,
            "rabbitmq_queue_messages_published_total": 5,
            "rabbitmq_connections": 1,
            "rabbitmq_channels": 1,
            "rabbitmq_queues": 1,
        }
        self.assertEqual({name: after.value(name) for name in expected}, expected)
        self.assertGreater(after.value("rabbitmq_connection_incoming_bytes_total") or 0, 0)
        self.assertGreater(after.value("rabbitmq_process_resident_memory_bytes") or 0, 0)
        self.assertEqual(after.families["rabbitmq_channel_messages_published"].type, "counter")
        self.assertEqual(after.families["rabbitmq_queue_messages_ready"].type, "gauge")
        self.assertEqual(after.families["rabbitmq_identity_info"].type, "unknown")
        self.assertEqual(after.samples("rabbitmq_queue_messages_ready")[0].labels, {})

    @inlineCallbacks
    def test_counters_keep_what_closed_channels_counted(self) -> Any:
        connection, _ = yield self.traffic()
        yield connection.disconnect()

        def closed() -> Any:
            return self.broker.scrape().addCallback(
                lambda scraped: scraped if scraped.value("rabbitmq_connections_closed_total") == 1 else None)

        after: Scraped = yield eventually(closed, reactor, timeout=10, what="the connection counted closed")
        self.assertEqual(after.value("rabbitmq_channel_messages_published_total"), 6)
        self.assertEqual(after.value("rabbitmq_channels_closed_total"), 1)
        self.assertEqual(after.value("rabbitmq_connections"), 0)

    @inlineCallbacks
    def test_per_object_rows(self) -> Any:
        connection, channel = yield self.traffic()
        yield channel.basic_qos(prefetch_count=2)
        held: list[Any] = []
        yield channel.basic_consume(QUEUE, held.append)
        yield eventually(lambda: len(held) == 2, reactor, what="two deliveries")
        scraped: Scraped = yield self.broker.scrape("/metrics/per-object")
        queue = {"vhost": "/", "queue": QUEUE}
        self.assertEqual(scraped.value("rabbitmq_queue_messages_ready", **queue), 1)
        self.assertEqual(scraped.value("rabbitmq_queue_messages_unacked", **queue), 2)
        self.assertEqual(scraped.value("rabbitmq_queue_messages_unacked_bytes", **queue), 10)
        self.assertEqual(scraped.value("rabbitmq_queue_consumers", **queue), 1)
        [published] = scraped.samples("rabbitmq_channel_messages_published_total")
        self.assertEqual(set(published.labels), {"channel", "vhost"})
        self.assertEqual(published.value, 6)
        self.assertTrue(published.labels["channel"].endswith(" (1)"), published.labels)
        [unacked] = scraped.samples("rabbitmq_channel_messages_unacked")
        self.assertEqual((unacked.labels, unacked.value), ({"channel": published.labels["channel"]}, 2))
        [incoming] = scraped.samples("rabbitmq_connection_incoming_bytes_total")
        self.assertEqual(set(incoming.labels), {"channel"})
        self.assertEqual(scraped.value("rabbitmq_queues"), 1)
        self.assertIsNone(scraped.value("rabbitmq_alarms_memory_used_watermark"))

    @inlineCallbacks
    def test_detailed_reports_the_chosen_families_of_the_chosen_vhosts(self) -> Any:
        yield self.traffic()
        path = "/metrics/detailed?family=queue_coarse_metrics&family=exchange_bindings&family=nonsense&vhost=%2F"
        scraped: Scraped = yield self.broker.scrape(path)
        self.assertEqual(scraped.value("rabbitmq_detailed_queue_messages_ready", vhost="/", queue=QUEUE), 3)
        self.assertEqual(
            scraped.value("rabbitmq_cluster_exchange_bindings", vhost="/", exchange="amq.topic", type="topic"), 0)
        self.assertEqual(
            {name for name in scraped.families if not name.endswith("_info")},
            {"rabbitmq_detailed_queue_messages_ready", "rabbitmq_detailed_queue_messages_unacked",
             "rabbitmq_detailed_queue_messages", "rabbitmq_cluster_exchange_bindings"},
        )
        elsewhere: Scraped = yield self.broker.scrape("/metrics/detailed?family=queue_coarse_metrics&vhost=nowhere")
        self.assertEqual(elsewhere.samples("rabbitmq_detailed_queue_messages_ready"), [])
        self.assertIn("rabbitmq_identity_info", elsewhere.families)

    @inlineCallbacks
    def test_openmetrics_when_asked_and_gzip_when_accepted(self) -> Any:
        yield self.traffic()
        scraped: Scraped = yield self.broker.scrape(
            "/metrics", {"Accept": "application/openmetrics-text; version=1.0.0", "Accept-Encoding": "gzip"})
        self.assertTrue(scraped.headers["content-type"].startswith("application/openmetrics-text"))
        self.assertEqual(scraped.headers["content-encoding"], "gzip")
        self.assertTrue(scraped.text.endswith("# EOF\n"))
        self.assertEqual(scraped.value("rabbitmq_channel_messages_published_total"), 6)
        plain: Scraped = yield self.broker.scrape("/metrics")
        self.assertTrue(plain.headers["content-type"].startswith("text/plain; version=0.0.4"))

    @inlineCallbacks
    def test_stream_log_sizes(self) -> Any:
        connection = yield connect(reactor, self.broker.url)
        self.addCleanup(connection.disconnect)
        channel = yield connection.channel()
        yield channel.confirm_select()
        yield channel.queue_declare("metrics-stream", durable=True, arguments={"x-queue-type": "stream"})
        yield gatherResults([channel.basic_publish(b"0123456789", "", "metrics-stream") for _ in range(3)])
        scraped: Scraped = yield self.broker.scrape("/metrics/per-object")
        stream = {"vhost": "/", "queue": "metrics-stream"}
        self.assertEqual(scraped.value("txamqp09_stream_log_bytes", **stream), 30)
        self.assertEqual(scraped.value("txamqp09_stream_log_messages", **stream), 3)

    @inlineCallbacks
    def test_unknown_paths(self) -> Any:
        unknown: Scraped = yield self.broker.scrape("/metrics/everything")
        self.assertEqual((unknown.status, unknown.text), (404, "Unknown Registry\n"))
        elsewhere: Scraped = yield self.broker.scrape("/api/overview")
        self.assertEqual(elsewhere.status, 404)
