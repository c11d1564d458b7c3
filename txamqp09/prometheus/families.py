"""The metric families, by RabbitMQ's names, and where their values come from.

RabbitMQ's ``rabbitmq_prometheus`` plugin groups its metrics in *tables*
(``queue_coarse_metrics``, ``channel_exchange_metrics``, ...): the
``family`` parameter of ``/metrics/detailed`` names them. A :class:`Table`
here is one of them: its metrics (name, type and help text as RabbitMQ's),
the label names of one object's row, and a function reading the rows from
the broker's counters when a scrape asks. ``/metrics`` sums the rows into
one unlabelled sample per metric (channel counters come from the broker's
totals instead, which keep what closed channels counted);
``/metrics/per-object`` and ``/metrics/detailed`` give one sample per row.

Where this broker counts less finely than RabbitMQ, a table's label names
are fewer than RabbitMQ's: channels count messages per channel, not per
channel and exchange (or queue), so those rows are labelled by channel and
virtual host only; queues count messages published to them, not per
channel and exchange. docs/management.rst lists these differences.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Optional

from txamqp09.broker.model import Queue
from txamqp09.broker.model.stats import ChannelCounters
from txamqp09.broker.model.stream import StreamQueue
from txamqp09.management.views import channel_name, connection_name, consumer_utilisation

if TYPE_CHECKING:
    from txamqp09.broker.channel import ServerChannel
    from txamqp09.broker.disk import DiskMonitor
    from txamqp09.management.node import Node

__all__ = ["CLUSTER_TABLES", "Metric", "OWN_TABLES", "RABBITMQ_TABLES", "Row", "Source", "Table"]

#: One object's label values and its metrics' values (None: no sample).
Row = tuple[tuple[str, ...], tuple[Optional[float], ...]]


class Source:
    """What one scrape reads: the broker, read once per scrape where costly.

    :param node: the broker facade.
    :param disk: the disk monitor (free space and its limit), if any.
    :param vhosts: the virtual hosts whose queues ``/metrics/detailed``
        reports (None: every one).
    """

    def __init__(self, node: Node, disk: Optional[DiskMonitor] = None, vhosts: Optional[set[str]] = None) -> None:
        self.node = node
        self.disk = disk
        self.vhosts = vhosts
        self._unacked: Optional[dict[Queue, tuple[int, int]]] = None

    @property
    def unacked(self) -> dict[Queue, tuple[int, int]]:
        """Delivered, unacknowledged messages and their bytes, by queue."""
        if self._unacked is None:
            self._unacked = self.node.unacked()
        return self._unacked

    def queues(self) -> Iterator[Queue]:
        """Every queue (of the chosen virtual hosts)."""
        for vhost in self.node.broker.vhosts.values():
            if self.vhosts is None or vhost.name in self.vhosts:
                yield from vhost.queues.values()

    def channels(self) -> Iterator[ServerChannel]:
        """Every open channel."""
        for connection in self.node.connections:
            yield from connection.channels.values()

    def totals(self) -> ChannelCounters:
        """The broker's channel counters, closed channels' included."""
        return self.node.stats.totals()


@dataclass(frozen=True)
class Metric:
    """One metric of a table.

    :ivar name: its name after the ``rabbitmq_`` (or ``rabbitmq_detailed_``) prefix.
    :ivar kind: ``counter``, ``gauge`` or ``untyped``.
    :ivar help: its help text.
    :ivar per_object: reported per object only (a sum means nothing).
    """

    name: str
    kind: str
    help: str
    per_object: bool = False


@dataclass(frozen=True)
class Table:
    """A group of metrics read together, one row per object.

    :ivar name: RabbitMQ's table name (``/metrics/detailed?family=...``).
    :ivar labels: the label names of a row.
    :ivar metrics: the metrics, in the order of a row's values.
    :ivar rows: reads the rows.
    :ivar totals: reads the unlabelled values ``/metrics`` reports, when
        they are not the sums of the rows.
    :ivar by_vhost: ``/metrics/detailed``'s ``vhost`` parameter chooses the rows.
    """

    name: str
    labels: tuple[str, ...]
    metrics: tuple[Metric, ...]
    rows: Callable[[Source], Iterable[Row]]
    totals: Optional[Callable[[Source], tuple[Optional[float], ...]]] = None
    by_vhost: bool = False

    def gather(self, source: Source, per_object: bool) -> list[Row]:
        """The rows one scrape reports: each object's, or one unlabelled row."""
        if per_object:
            return list(self.rows(source))
        if self.totals is not None:
            return [((), self.totals(source))]
        sums: list[Optional[float]] = [None] * len(self.metrics)
        for _, values in self.rows(source):
            for index, value in enumerate(values):
                if value is not None:
                    sums[index] = (sums[index] or 0) + value
        return [((), tuple(sums))]


def _node_row(*values: Optional[float]) -> Iterator[Row]:
    yield (), values


# -- node-wide ------------------------------------------------------------------


def _churn(source: Source) -> Iterator[Row]:
    churn = source.node.broker.churn
    return _node_row(churn.connection_created, churn.connection_closed, churn.channel_created,
                     churn.channel_closed, churn.queue_declared, churn.queue_created, churn.queue_deleted)


def _node_coarse(source: Source) -> Iterator[Row]:
    used = source.node.resources()
    return _node_row(used["fd_used"], used["sockets_used"], used["mem_used"], used["disk_free"])


def _node(source: Source) -> Iterator[Row]:
    fd_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    memory = source.node.factory.memory
    disk_limit = source.disk.limit if source.disk is not None else None
    return _node_row(fd_limit, fd_limit, memory.watermark, disk_limit)


# -- queues -------------------------------------------------------------------------


def _queue_coarse(source: Source) -> Iterator[Row]:
    held = source.unacked
    for queue in source.queues():
        ready = queue.message_count
        unacked = held.get(queue, (0, 0))[0]
        yield (queue.vhost.name, queue.name), (ready, unacked, ready + unacked)


def _queue(source: Source) -> Iterator[Row]:
    held = source.unacked
    for queue in source.queues():
        consumers = list(queue.consumers)
        utilisation = consumer_utilisation(queue, consumers)
        ready_bytes = queue.ready_bytes
        unacked_bytes = held.get(queue, (0, 0))[1]
        yield (queue.vhost.name, queue.name), (
            len(consumers), utilisation, utilisation, ready_bytes + unacked_bytes, ready_bytes, unacked_bytes,
        )


def _queue_published(source: Source) -> Iterator[Row]:
    for queue in source.queues():
        yield (queue.vhost.name, queue.name), (queue.published(),)


# -- channels and connections ----------------------------------------------------


def _channel(source: Source) -> Iterator[Row]:
    for channel in source.channels():
        session = channel.session
        yield (channel_name(channel),), (
            len(session.consumers), len(session.unacked), len(session.tx.publishes), len(session.tx.settlements),
            session.consumer_prefetch_count, session.prefetch.count,
        )


def _exchange_counters(counters: ChannelCounters) -> tuple[Optional[float], ...]:
    return counters.publish, counters.confirm, counters.return_unroutable, counters.drop_unroutable


def _queue_counters(counters: ChannelCounters) -> tuple[Optional[float], ...]:
    return (counters.get, counters.get_no_ack, counters.deliver, counters.deliver_no_ack, counters.redeliver,
            counters.ack, counters.get_empty)


def _channel_exchange(source: Source) -> Iterator[Row]:
    for channel in source.channels():
        yield (channel_name(channel), channel.vhost.name), _exchange_counters(channel.session.stats)


def _channel_queue(source: Source) -> Iterator[Row]:
    for channel in source.channels():
        yield (channel_name(channel), channel.vhost.name), _queue_counters(channel.session.stats)


def _connection_coarse(source: Source) -> Iterator[Row]:
    for connection in source.node.connections:
        stats = connection.stats
        yield (connection_name(connection),), (stats.recv_oct, stats.send_oct)


def _connection(source: Source) -> Iterator[Row]:
    for connection in source.node.connections:
        stats = connection.stats
        yield (connection_name(connection),), (stats.recv_cnt, stats.send_cnt, len(connection.channels))


# -- the cluster tables of /metrics/detailed -------------------------------------


def _vhost_status(source: Source) -> Iterator[Row]:
    for vhost in source.node.vhosts():
        yield (vhost.name,), (1,)


def _exchanges(source: Source, value: Callable[..., int]) -> Iterator[Row]:
    """One row per exchange but the default and internal ones, as RabbitMQ lists them."""
    for vhost in source.node.vhosts():
        for exchange in vhost.exchanges.values():
            if exchange.name and not exchange.internal:
                yield (vhost.name, exchange.name, exchange.kind), (value(exchange),)


def _exchange_bindings(source: Source) -> Iterator[Row]:
    return _exchanges(source, lambda exchange: len(exchange.bindings))


def _exchange_names(source: Source) -> Iterator[Row]:
    return _exchanges(source, lambda exchange: 1)


# -- this broker's own ------------------------------------------------------------


def _streams(source: Source) -> Iterator[Row]:
    for queue in source.queues():
        if isinstance(queue, StreamQueue):
            yield (queue.vhost.name, queue.name), (queue.log_bytes, queue.committed_offset - queue.first_offset)


_COUNTER, _GAUGE = "counter", "gauge"
_QUEUE_LABELS = ("vhost", "queue")

#: RabbitMQ's tables, in the order its plugin reports them.
RABBITMQ_TABLES: tuple[Table, ...] = (
    Table("connection_churn_metrics", (), (
        Metric("connections_opened_total", _COUNTER, "Total number of connections opened"),
        Metric("connections_closed_total", _COUNTER, "Total number of connections closed or terminated"),
        Metric("channels_opened_total", _COUNTER, "Total number of channels opened"),
        Metric("channels_closed_total", _COUNTER, "Total number of channels closed"),
        Metric("queues_declared_total", _COUNTER, "Total number of queues declared"),
        Metric("queues_created_total", _COUNTER, "Total number of queues created"),
        Metric("queues_deleted_total", _COUNTER, "Total number of queues deleted"),
    ), _churn),
    Table("node_coarse_metrics", (), (
        Metric("process_open_fds", _GAUGE, "Open file descriptors"),
        Metric("process_open_tcp_sockets", _GAUGE, "Open TCP sockets"),
        Metric("process_resident_memory_bytes", _GAUGE, "Memory used in bytes"),
        Metric("disk_space_available_bytes", _GAUGE, "Disk space available in bytes"),
    ), _node_coarse),
    Table("node_metrics", (), (
        Metric("process_max_fds", _GAUGE, "Open file descriptors limit"),
        Metric("process_max_tcp_sockets", _GAUGE, "Open TCP sockets limit"),
        Metric("resident_memory_limit_bytes", _GAUGE, "Memory high watermark in bytes"),
        Metric("disk_space_available_limit_bytes", _GAUGE, "Free disk space low watermark in bytes"),
    ), _node),
    Table("queue_coarse_metrics", _QUEUE_LABELS, (
        Metric("queue_messages_ready", _GAUGE, "Messages ready to be delivered to consumers"),
        Metric("queue_messages_unacked", _GAUGE, "Messages delivered to consumers but not yet acknowledged"),
        Metric("queue_messages", _GAUGE, "Sum of ready and unacknowledged messages - total queue depth"),
    ), _queue_coarse, by_vhost=True),
    Table("queue_metrics", _QUEUE_LABELS, (
        Metric("queue_consumers", _GAUGE, "Consumers on a queue"),
        Metric("queue_consumer_capacity", _GAUGE, "Consumer capacity", per_object=True),
        Metric("queue_consumer_utilisation", _GAUGE, "Same as consumer capacity", per_object=True),
        Metric("queue_messages_bytes", _GAUGE, "Size in bytes of ready and unacknowledged messages"),
        Metric("queue_messages_ready_bytes", _GAUGE, "Size in bytes of ready messages"),
        Metric("queue_messages_unacked_bytes", _GAUGE, "Size in bytes of all unacknowledged messages"),
    ), _queue, by_vhost=True),
    Table("channel_metrics", ("channel",), (
        Metric("channel_consumers", _GAUGE, "Consumers on a channel"),
        Metric("channel_messages_unacked", _GAUGE, "Delivered but not yet acknowledged messages"),
        Metric("channel_messages_uncommitted", _GAUGE, "Messages received in a transaction but not yet committed"),
        Metric("channel_acks_uncommitted", _GAUGE, "Message acknowledgements in a transaction not yet committed"),
        Metric("consumer_prefetch", _GAUGE, "Limit of unacknowledged messages for each consumer"),
        Metric("channel_prefetch", _GAUGE, "Total limit of unacknowledged messages for all consumers on a channel"),
    ), _channel),
    Table("channel_exchange_metrics", ("channel", "vhost"), (
        Metric("channel_messages_published_total", _COUNTER,
               "Total number of messages published into an exchange on a channel"),
        Metric("channel_messages_confirmed_total", _COUNTER,
               "Total number of messages published into an exchange and confirmed on the channel"),
        Metric("channel_messages_unroutable_returned_total", _COUNTER,
               "Total number of messages published as mandatory into an exchange and returned to the "
               "publisher as unroutable"),
        Metric("channel_messages_unroutable_dropped_total", _COUNTER,
               "Total number of messages published as non-mandatory into an exchange and dropped as unroutable"),
    ), _channel_exchange, totals=lambda source: _exchange_counters(source.totals())),
    Table("channel_queue_metrics", ("channel", "vhost"), (
        Metric("channel_get_ack_total", _COUNTER,
               "Total number of messages fetched with basic.get in manual acknowledgement mode"),
        Metric("channel_get_total", _COUNTER,
               "Total number of messages fetched with basic.get in automatic acknowledgement mode"),
        Metric("channel_messages_delivered_ack_total", _COUNTER,
               "Total number of messages delivered to consumers in manual acknowledgement mode"),
        Metric("channel_messages_delivered_total", _COUNTER,
               "Total number of messages delivered to consumers in automatic acknowledgement mode"),
        Metric("channel_messages_redelivered_total", _COUNTER, "Total number of messages redelivered to consumers"),
        Metric("channel_messages_acked_total", _COUNTER, "Total number of messages acknowledged by consumers"),
        Metric("channel_get_empty_total", _COUNTER, "Total number of times basic.get operations fetched no message"),
    ), _channel_queue, totals=lambda source: _queue_counters(source.totals())),
    Table("connection_coarse_metrics", ("channel",), (
        Metric("connection_incoming_bytes_total", _COUNTER, "Total number of bytes received on a connection"),
        Metric("connection_outgoing_bytes_total", _COUNTER, "Total number of bytes sent on a connection"),
    ), _connection_coarse),
    Table("connection_metrics", ("channel",), (
        Metric("connection_incoming_packets_total", _COUNTER, "Total number of packets received on a connection"),
        Metric("connection_outgoing_packets_total", _COUNTER, "Total number of packets sent on a connection"),
        Metric("connection_channels", _GAUGE, "Channels on a connection"),
    ), _connection),
    Table("channel_queue_exchange_metrics", ("queue_vhost", "queue"), (
        Metric("queue_messages_published_total", _COUNTER, "Total number of messages published to queues"),
    ), _queue_published),
)

#: The tables only ``/metrics/detailed`` reports (``rabbitmq_cluster_`` prefix).
CLUSTER_TABLES: tuple[Table, ...] = (
    Table("vhost_status", ("vhost",), (
        Metric("vhost_status", _GAUGE, "Whether a given vhost is running"),
    ), _vhost_status),
    Table("exchange_bindings", ("vhost", "exchange", "type"), (
        Metric("exchange_bindings", _GAUGE, "Number of bindings for an exchange. This value is cluster-wide."),
    ), _exchange_bindings),
    Table("exchange_names", ("vhost", "exchange", "type"), (
        Metric("exchange_name", _GAUGE, "Enumerates exchanges without any additional info. This value is "
               "cluster-wide. A cheaper alternative to `exchange_bindings`"),
    ), _exchange_names),
)

#: This broker's own tables (``txamqp09_`` prefix).
OWN_TABLES: tuple[Table, ...] = (
    Table("stream_metrics", _QUEUE_LABELS, (
        Metric("stream_log_bytes", _GAUGE, "Bytes of message bodies in a stream's log"),
        Metric("stream_log_messages", _GAUGE, "Messages in a stream's log (committed, not yet removed by retention)"),
    ), _streams),
)
