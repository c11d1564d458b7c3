"""One scrape: read the broker, then write the exposition.

:func:`gather` runs on the reactor thread and only reads the broker's
counters into plain rows (a few microseconds per object); the
:class:`Scrape` it returns turns them into ``prometheus_client`` metric
families when :meth:`Scrape.collect` is called, which the listener does in
a worker thread together with the text (or OpenMetrics) encoding, so that
a large scrape does not hold up AMQP traffic.
"""

from __future__ import annotations

import enum
import hashlib
import platform
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Iterator, Optional

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric as Family,
    UnknownMetricFamily,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from txamqp09 import __version__
from txamqp09.management.endpoints.overview import API_VERSION
from txamqp09.prometheus.families import CLUSTER_TABLES, OWN_TABLES, RABBITMQ_TABLES, Row, Source, Table
from txamqp09.store.distribution import Distribution

if TYPE_CHECKING:
    from txamqp09.broker.disk import DiskMonitor
    from txamqp09.management.node import Node

__all__ = ["Scope", "Scrape", "TABLE_NAMES", "gather"]

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


class Scrape(Collector):
    """The rows one scrape read, as ``prometheus_client`` families (a
    collector that :func:`prometheus_client.generate_latest` accepts)."""

    def __init__(self) -> None:
        self._tables: list[tuple[Table, str, bool, list[Row]]] = []
        self._families: list[Family] = []

    def add_table(self, table: Table, prefix: str, per_object: bool, rows: list[Row]) -> None:
        """Report *table*'s *rows* under *prefix* (labelled when *per_object*)."""
        self._tables.append((table, prefix, per_object, rows))

    def add(self, family: Family) -> None:
        """Report a family built already."""
        self._families.append(family)

    def collect(self) -> Iterator[Family]:
        """Every family, tables first."""
        for table, prefix, per_object, rows in self._tables:
            labels = table.labels if per_object else ()
            for index, metric in enumerate(table.metrics):
                if metric.per_object and not per_object:
                    continue
                family = _FAMILY_TYPES[metric.kind](prefix + metric.name, metric.help, labels=labels)
                for values, row in rows:
                    value = row[index]
                    if value is not None:
                        family.add_metric(values, value)
                yield family
        yield from self._families


_FAMILY_TYPES: dict[str, type] = {
    "counter": CounterMetricFamily,
    "gauge": GaugeMetricFamily,
    "untyped": UnknownMetricFamily,
}


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
    """
    source = Source(node, disk, vhosts if scope is Scope.DETAILED else None)
    scrape = Scrape()
    per_object = scope is not Scope.AGGREGATED
    if scope is Scope.DETAILED:
        for tables, prefix in ((RABBITMQ_TABLES, "rabbitmq_detailed_"), (CLUSTER_TABLES, "rabbitmq_cluster_")):
            for table in tables:
                if table.name in families:
                    scrape.add_table(table, prefix, True, table.gather(source, True))
    else:
        for table in RABBITMQ_TABLES:
            scrape.add_table(table, "rabbitmq_", per_object, table.gather(source, per_object))
        for family in _totals(source):
            scrape.add(family)
        if scope is Scope.AGGREGATED:
            for family in _alarms(node):
                scrape.add(family)
        for table in OWN_TABLES:
            scrape.add_table(table, "txamqp09_", per_object, table.gather(source, per_object))
        for family in _store(node):
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
