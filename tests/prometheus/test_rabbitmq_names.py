"""The same traffic against a private RabbitMQ 3.10 (rabbitmq_prometheus) and
this broker: every ``rabbitmq_`` metric this broker serves, RabbitMQ serves
too, with the same type, help text and label names.

This broker counts channel traffic per channel, not per channel and exchange
(or queue), and queue publishes per queue, not per channel and exchange:
those families' label names are a subset of RabbitMQ's (:data:`COARSER`;
docs/management.rst lists them).
"""

from __future__ import annotations

from typing import Any

from prometheus_client.metrics_core import Metric
from twisted.internet import reactor
from twisted.internet.defer import Deferred, gatherResults, inlineCallbacks
from twisted.trial.unittest import TestCase

from txamqp09.client.connection import connect
from txamqp09.prometheus.collector import TABLE_NAMES
from txamqp09.testing.rabbitmq import rabbitmq_missing, shared_rabbitmq
from txamqp09.testing.waiting import eventually
from tests.prometheus.support import MetricsBroker, Scraped, scrape

QUEUE = "names-q"
#: Families whose rows this broker labels with fewer names than RabbitMQ.
COARSER = frozenset({
    "channel_messages_published", "channel_messages_confirmed", "channel_messages_unroutable_returned",
    "channel_messages_unroutable_dropped", "channel_get_ack", "channel_get", "channel_messages_delivered_ack",
    "channel_messages_delivered", "channel_messages_redelivered", "channel_messages_acked", "channel_get_empty",
    "queue_messages_published",
})
PATHS = ("/metrics", "/metrics/per-object",
         "/metrics/detailed?vhost=%2F&" + "&".join(f"family={name}" for name in sorted(TABLE_NAMES)))


@inlineCallbacks
def drive(test: TestCase, amqp_port: int) -> Any:
    """A queue, 5 confirmed publishes and an unroutable one, a get acknowledged
    and one not, and a consumer holding 2 messages unacknowledged."""
    connection = yield connect(reactor, f"amqp://guest:guest@127.0.0.1:{amqp_port}/")
    test.addCleanup(connection.disconnect)
    channel = yield connection.channel()
    yield channel.confirm_select()
    yield channel.queue_declare(QUEUE, auto_delete=True)
    yield gatherResults([channel.basic_publish(b"12345", "", QUEUE) for _ in range(5)]
                        + [channel.basic_publish(b"lost", "amq.topic", "nowhere")])
    got = yield channel.basic_get(QUEUE)
    got.ack()
    yield channel.basic_get(QUEUE, no_ack=True)
    yield channel.basic_qos(prefetch_count=2)
    yield channel.basic_consume(QUEUE, lambda message: None)


def label_names(family: Metric) -> set[frozenset[str]]:
    """The label-name sets of a family's samples (histogram ``le`` aside)."""
    return {frozenset(sample.labels) - {"le"} for sample in family.samples}


def short(name: str) -> str:
    """A family's name without its prefix."""
    for prefix in ("rabbitmq_detailed_", "rabbitmq_cluster_", "rabbitmq_"):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


class NameComparisonTests(TestCase):
    skip = rabbitmq_missing()
    timeout = 180

    @inlineCallbacks
    def setUp(self) -> Any:
        node = shared_rabbitmq(prometheus=True)
        assert node.prometheus_port is not None
        self.theirs_port = node.prometheus_port
        self.broker = MetricsBroker()
        yield self.broker.start()
        self.addCleanup(self.broker.stop)
        yield drive(self, node.port)
        yield drive(self, self.broker.amqp_port)

        def emitted() -> Deferred[Any]:
            # RabbitMQ's channels and queues emit their statistics every 5 s.
            return scrape(self.theirs_port, "/metrics/per-object").addCallback(
                lambda scraped: scraped.value("rabbitmq_queue_messages_unacked", queue=QUEUE) == 2
                and scraped.samples("rabbitmq_channel_messages_published_total"))

        yield eventually(emitted, reactor, timeout=60, interval=0.5, what="RabbitMQ's statistics emitted")

    @inlineCallbacks
    def test_names_types_help_and_labels(self) -> Any:
        labelled = 0
        for path in PATHS:
            theirs: Scraped = yield scrape(self.theirs_port, path)
            ours: Scraped = yield self.broker.scrape(path)
            self.assertEqual((ours.status, theirs.status), (200, 200), path)
            served = {name for name in ours.families if name.startswith("rabbitmq_")}
            self.assertEqual(sorted(served - set(theirs.families)), [], f"{path}: names RabbitMQ does not serve")
            for name in sorted(served):
                mine, reference = ours.families[name], theirs.families[name]
                where = f"{path} {name}"
                self.assertEqual((mine.type, mine.documentation), (reference.type, reference.documentation), where)
                if not mine.samples or not reference.samples:
                    continue
                if short(name) in COARSER:
                    [labels] = label_names(reference)
                    self.assertTrue(all(mine_labels <= labels for mine_labels in label_names(mine)), where)
                else:
                    self.assertEqual(label_names(mine), label_names(reference), where)
                labelled += any(sample.labels for sample in mine.samples)
        self.assertGreater(labelled, 40)

    @inlineCallbacks
    def test_the_issue_names_are_served_by_both(self) -> Any:
        theirs: Scraped = yield scrape(self.theirs_port, "/metrics")
        ours: Scraped = yield self.broker.scrape("/metrics")
        names = {
            "rabbitmq_identity_info", "rabbitmq_build_info", "rabbitmq_connections", "rabbitmq_connections_opened",
            "rabbitmq_connections_closed", "rabbitmq_channels", "rabbitmq_channels_opened", "rabbitmq_channels_closed",
            "rabbitmq_queues", "rabbitmq_queues_declared", "rabbitmq_queues_created", "rabbitmq_queues_deleted",
            "rabbitmq_consumers", "rabbitmq_queue_messages", "rabbitmq_queue_messages_ready",
            "rabbitmq_queue_messages_unacked", "rabbitmq_queue_messages_bytes", "rabbitmq_queue_consumers",
            "rabbitmq_channel_messages_published", "rabbitmq_channel_messages_confirmed",
            "rabbitmq_channel_messages_unroutable_dropped", "rabbitmq_channel_messages_unroutable_returned",
            "rabbitmq_channel_messages_delivered", "rabbitmq_channel_messages_delivered_ack",
            "rabbitmq_channel_messages_acked", "rabbitmq_channel_messages_redelivered", "rabbitmq_channel_get",
            "rabbitmq_connection_incoming_bytes", "rabbitmq_connection_outgoing_bytes",
            "rabbitmq_process_resident_memory_bytes", "rabbitmq_resident_memory_limit_bytes",
            "rabbitmq_disk_space_available_bytes", "rabbitmq_disk_space_available_limit_bytes",
            "rabbitmq_alarms_memory_used_watermark", "rabbitmq_alarms_free_disk_space_watermark",
            "rabbitmq_process_open_fds", "rabbitmq_process_max_fds",
        }
        self.assertEqual(sorted(names - set(ours.families)), [])
        self.assertEqual(sorted(names - set(theirs.families)), [])
        theirs = yield scrape(self.theirs_port, "/metrics/per-object")
        ours = yield self.broker.scrape("/metrics/per-object")
        for name in ("rabbitmq_queue_messages_ready", "rabbitmq_queue_messages_unacked", "rabbitmq_queue_messages",
                     "rabbitmq_queue_messages_bytes", "rabbitmq_queue_consumers"):
            self.assertEqual(ours.value(name, vhost="/", queue=QUEUE), theirs.value(name, vhost="/", queue=QUEUE), name)
