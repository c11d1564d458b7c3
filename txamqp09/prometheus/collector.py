"""One scrape: read the broker into rows.

:func:`gather` only reads the broker's counters into plain rows (a few
microseconds per object); :mod:`.exposition` turns them into
``prometheus_client`` families (:func:`table_family`) and encodes them.
"""

from __future__ import annotations

import enum
import hashlib
import platform
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Callable, Iterable, Optional

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric as Family,
    UnknownMetricFamily,
)
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from txamqp09 import __version__
from txamqp09.broker.model.arguments import CLASSIC, QUORUM, STREAM
from txamqp09.broker.model.stats import QueueCounters
from txamqp09.management.endpoints.overview import API_VERSION
from txamqp09.management.group import serving
from txamqp09.prometheus.families import CLUSTER_TABLES, OWN_TABLES, RABBITMQ_TABLES, Row, Source, Table
from txamqp09.prometheus.group import group_families
from txamqp09.store.distribution import Distribution

if TYPE_CHECKING:
    from txamqp09.broker.disk import DiskMonitor
    from txamqp09.management.node import Node

__all__ = ["Scope", "Scrape", "TABLE_NAMES", "Value", "gather", "table_family"]

#: One object's label values and one metric's value.
Value = tuple[tuple[str, ...], Optional[float]]

#: Every table ``/metrics/detailed?family=`` may name.
TABLE_NAMES = frozenset(table.name for table in RABBITMQ_TABLES + CLUSTER_TABLES)


class Scope(enum.Enum):
    """What a path reports, as RabbitMQ's plugin serves it.

    ``AGGREGATED`` (``/metrics``): one unlabelled sample per metric, the
    alarms and this broker's own metrics. ``PER_OBJECT``
    (``/metrics/per-object``): one sample per queue, channel, connection.
    ``DETAILED`` (``/metrics/detailed``): the chosen tables per object,
    prefixed ``rabbitmq_detailed_`` (``rabbitmq_cluster_`` for the cluster tables).
    """

    AGGREGATED = "aggregated"
    PER_OBJECT = "per-object"
    DETAILED = "detailed"


class Scrape:
    """What one scrape read: tables of rows, and families built already.

    :ivar tables: each table with its prefix, whether it is per object, and its rows.
    :ivar families: the other families (totals, alarms, identity, the store's histograms).
    """

    def __init__(self) -> None:
        self.tables: list[tuple[Table, str, bool, list[Row]]] = []
        self.families: list[Family] = []

    def add_table(self, table: Table, prefix: str, per_object: bool, rows: list[Row]) -> None:
        """Report *table*'s *rows* under *prefix* (labelled when *per_object*)."""
        self.tables.append((table, prefix, per_object, rows))

    def add(self, family: Family) -> None:
        """Report a family built already."""
        self.families.append(family)


_FAMILY_TYPES: dict[str, type] = {
    "counter": CounterMetricFamily,
    "gauge": GaugeMetricFamily,
    "untyped": UnknownMetricFamily,
}


def table_family(table: Table, prefix: str, index: int, values: Iterable[Value]) -> Family:
    """The family of *table*'s metric *index* with a sample for each of
    *values* but None ones (labelled by the row's label values, if any)."""
    metric = table.metrics[index]
    family = _FAMILY_TYPES[metric.kind](prefix + metric.name, metric.help, labels=table.labels)
    name = family.name + "_total" if metric.kind == "counter" else family.name
    family.samples = [
        Sample(name, dict(zip(table.labels, labels)), value) for labels, value in values if value is not None
    ]
    return family


def gather(
    node: Node,
    scope: Scope,
    *,
    disk: Optional[DiskMonitor] = None,
    families: frozenset[str] = frozenset(),
    vhosts: Optional[set[str]] = None,
) -> Scrape:
    """Read what *scope* reports from *node* (on the reactor thread).

    :param disk: the disk monitor, for free space and its limit.
    :param families: the tables ``DETAILED`` reports (RabbitMQ's names).
    :param vhosts: the virtual hosts whose queues ``DETAILED`` reports (None: all).

    A member of a group that does not serve (a standby) reports only its
    group's families (:mod:`.group`) and its identity, on every path.
    """
    scrape = Scrape()
    if not serving(node):
        for family in group_families(node) + _identity(node):
            scrape.add(family)
        return scrape
    source = Source(node, disk, vhosts if scope is Scope.DETAILED else None)
    per_object = scope is not Scope.AGGREGATED
    if scope is Scope.DETAILED:
        for tables, prefix in ((RABBITMQ_TABLES, "rabbitmq_detailed_"), (CLUSTER_TABLES, "rabbitmq_cluster_")):
            for table in tables:
                if table.name in families:
                    scrape.add_table(table, prefix, True, table.gather(source, True))
    else:
        for table in RABBITMQ_TABLES:
            scrape.add_table(table, "rabbitmq_", per_object, table.gather(source, per_object))
        for family in _totals(source) + _global(source):
            scrape.add(family)
        if scope is Scope.AGGREGATED:
            for family in _alarms(node):
                scrape.add(family)
        for table in OWN_TABLES:
            scrape.add_table(table, "txamqp09_", per_object, table.gather(source, per_object))
        for family in _store(node) + group_families(node):
            scrape.add(family)
    for family in _identity(node):
        scrape.add(family)
    return scrape


def _gauge(name: str, help: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help, value=value)


def _totals(source: Source) -> list[Family]:
    """How many connections, channels, consumers and queues there are."""
    node = source.node
    connections = node.connections
    queues = list(source.queues())
    return [
        _gauge("rabbitmq_connections", "Connections currently open", len(connections)),
        _gauge("rabbitmq_channels", "Channels currently open",
               sum(len(connection.channels) for connection in connections)),
        _gauge("rabbitmq_consumers", "Consumers currently connected", sum(len(queue.consumers) for queue in queues)),
        _gauge("rabbitmq_queues", "Queues available", len(queues)),
    ]


#: RabbitMQ's names of the queue types, for the ``queue_type`` label.
_QUEUE_TYPE_LABELS = {CLASSIC: "rabbit_classic_queue", QUORUM: "rabbit_quorum_queue", STREAM: "rabbit_stream_queue"}
#: The ``protocol`` label: every AMQP version the broker speaks counts as RabbitMQ's AMQP.
_PROTOCOL = "amqp091"


def _global(source: Source) -> list[Family]:
    """RabbitMQ's ``rabbitmq_global_`` counters: messages received, routed,
    confirmed and unroutable (by protocol), and delivered, got, redelivered
    and acknowledged (by protocol and queue type), from the broker's totals."""
    channels = source.totals()
    by_protocol = [
        ("messages_received_total", "Total number of messages received from publishers", channels.publish),
        ("messages_routed_total", "Total number of messages routed to queues or streams",
         channels.publish - channels.drop_unroutable - channels.return_unroutable),
        ("messages_unroutable_dropped_total",
         "Total number of messages published as non-mandatory into an exchange and dropped as unroutable",
         channels.drop_unroutable),
        ("messages_unroutable_returned_total",
         "Total number of messages published as mandatory into an exchange and returned to the publisher "
         "as unroutable", channels.return_unroutable),
        ("messages_confirmed_total", "Total number of messages confirmed to publishers", channels.confirm),
    ]
    families: list[Family] = []
    for name, help, value in by_protocol:
        family = CounterMetricFamily(f"rabbitmq_global_{name}", help, labels=("protocol",))
        family.add_metric((_PROTOCOL,), value)
        families.append(family)
    consumers = GaugeMetricFamily("rabbitmq_global_consumers", "Current number of consumers", labels=("protocol",))
    consumers.add_metric((_PROTOCOL,), sum(len(queue.consumers) for queue in source.queues()))
    families.append(consumers)
    by_queue_type: list[tuple[str, str, Callable[[QueueCounters], int]]] = [
        ("messages_delivered_total", "Total number of messages delivered to consumers",
         lambda counters: counters.deliver + counters.deliver_no_ack + counters.get + counters.get_no_ack),
        ("messages_delivered_consume_manual_ack_total",
         "Total number of messages delivered to consumers using basic.consume with manual acknowledgment",
         lambda counters: counters.deliver),
        ("messages_delivered_consume_auto_ack_total",
         "Total number of messages delivered to consumers using basic.consume with automatic acknowledgment",
         lambda counters: counters.deliver_no_ack),
        ("messages_delivered_get_manual_ack_total",
         "Total number of messages delivered to consumers using basic.get with manual acknowledgment",
         lambda counters: counters.get),
        ("messages_delivered_get_auto_ack_total",
         "Total number of messages delivered to consumers using basic.get with automatic acknowledgment",
         lambda counters: counters.get_no_ack),
        ("messages_get_empty_total", "Total number of times basic.get operations fetched no message",
         lambda counters: counters.get_empty),
        ("messages_redelivered_total", "Total number of messages redelivered to consumers",
         lambda counters: counters.redeliver),
        ("messages_acknowledged_total", "Total number of messages acknowledged by consumers",
         lambda counters: counters.ack),
    ]
    queues = source.queue_totals()
    for name, help, read in by_queue_type:
        family = CounterMetricFamily(f"rabbitmq_global_{name}", help, labels=("protocol", "queue_type"))
        for queue_type, counters in queues.items():
            family.add_metric((_PROTOCOL, _QUEUE_TYPE_LABELS[queue_type]), read(counters))
        families.append(family)
    return families


def _untyped(name: str, help: str, value: float) -> UnknownMetricFamily:
    return UnknownMetricFamily(name, help, value=value)


def _alarms(node: Node) -> list[Family]:
    """1 for each resource alarm in effect."""
    active = node.alarms()
    return [
        _untyped("rabbitmq_alarms_free_disk_space_watermark", "is 1 if free disk space watermark alarm is in effect",
                 int("disk" in active)),
        _untyped("rabbitmq_alarms_memory_used_watermark", "is 1 if VM memory watermark alarm is in effect",
                 int("memory" in active)),
    ]


def _identity(node: Node) -> list[Family]:
    """``rabbitmq_build_info`` and ``rabbitmq_identity_info``, by RabbitMQ's labels."""
    try:
        client_version = version("prometheus_client")
    except PackageNotFoundError:
        client_version = "unknown"
    build = UnknownMetricFamily(
        "rabbitmq_build_info", "RabbitMQ & Erlang/OTP version info",
        labels=("rabbitmq_version", "prometheus_plugin_version", "prometheus_client_version", "erlang_version"),
    )
    build.add_metric((API_VERSION, __version__, client_version, platform.python_version()), 1)
    identity = UnknownMetricFamily(
        "rabbitmq_identity_info", "RabbitMQ node & cluster identity info",
        labels=("rabbitmq_node", "rabbitmq_cluster", "rabbitmq_cluster_permanent_id"),
    )
    digest = hashlib.sha256(node.name.encode("utf-8")).hexdigest()[:22]
    identity.add_metric((node.name, node.name, f"txamqp09-cluster-id-{digest}"), 1)
    return [build, identity]


def _histogram(name: str, help: str, distribution: Distribution) -> HistogramMetricFamily:
    counts, total = distribution.cumulative()
    bounds = [floatToGoString(bound) for bound in distribution.bounds] + ["+Inf"]
    return HistogramMetricFamily(name, help, buckets=list(zip(bounds, counts)), sum_value=total)


def _store(node: Node) -> list[Family]:
    """The message store's commit durations and batch sizes (a store that keeps them)."""
    commit_seconds: Optional[Distribution] = getattr(node.store, "commit_seconds", None)
    batch_messages: Optional[Distribution] = getattr(node.store, "batch_messages", None)
    if commit_seconds is None or batch_messages is None:
        return []
    return [
        _histogram("txamqp09_store_commit_seconds",
                   "Seconds the message store took to write and commit a batch (one fsync)", commit_seconds),
        _histogram("txamqp09_store_batch_messages",
                   "Messages (publishes and stream appends) the message store wrote per committed batch",
                   batch_messages),
    ]
