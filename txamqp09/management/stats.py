"""Rates, totals and sample histories over the broker's counters, for the management API.

The broker only bumps integers (:mod:`txamqp09.broker.model.stats`). A
:class:`Statistics` object samples them on a timer (every 5 seconds, as
RabbitMQ's ``collect_statistics_interval``) and keeps, for each object, a
:class:`Series`: the last sample, the per-second rates between the last two
samples, and a bounded history of up to :data:`HISTORY` seconds of samples
(only samples that differ from the one before are stored, so an idle object
keeps one). Rates and histories therefore cost nothing per message.

Besides counters objects, the sampler records figures the broker does not
count: each queue's lengths (ready, unacknowledged, total), each vhost's
lengths and bytes received and sent, and the node's resources (memory, file
descriptors, sockets, free disk).

The JSON shapes are RabbitMQ 3.10's: each figure ``x`` comes with
``x_details: {"rate": r}``; with a range in the query (``msg_rates_age``
and ``msg_rates_incr``, ``lengths_*``, ``data_rates_*``, ``node_stats_*``,
see :class:`Ranges`) the details also carry ``samples`` (newest first,
``{"sample": value, "timestamp": ms}``), ``avg_rate`` and ``avg``, and the
figure itself is its value at the range's end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional, Protocol
from weakref import WeakKeyDictionary

from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall

from txamqp09.broker.model import Queue, VirtualHost
from txamqp09.broker.model.stats import ChannelCounters, Counters, QueueCounters
from txamqp09.management.base import NodeLike

__all__ = [
    "DEFAULT_INTERVAL",
    "HISTORY",
    "LENGTHS",
    "MeasuredNode",
    "NODE_FIGURES",
    "NO_RANGES",
    "TRAFFIC",
    "Range",
    "RangeError",
    "Ranges",
    "Series",
    "Statistics",
    "with_details",
]

#: Seconds between two samples.
DEFAULT_INTERVAL = 5.0
#: Seconds of samples each object's history keeps.
HISTORY = 3600
#: RabbitMQ's bound on the points of one range (age / incr).
MAX_RANGE_POINTS = 500
#: A queue's or vhost's lengths, in the order its series stores them.
LENGTHS = ("messages_ready", "messages_unacknowledged", "messages")
#: A vhost's bytes received and sent (the sum of its connections').
TRAFFIC = ("recv_oct", "send_oct")
#: The node's resources sampled with the counters.
NODE_FIGURES = ("mem_used", "fd_used", "sockets_used", "disk_free")
#: Channel counters whose sum RabbitMQ shows as ``deliver_get``.
_DELIVER_GET = ("deliver", "deliver_no_ack", "get", "get_no_ack")

#: A history point: (timestamp in ms, values).
Point = tuple[int, tuple[float, ...]]


class RangeError(ValueError):
    """Range parameters RabbitMQ refuses (its text is the message)."""


@dataclass(frozen=True)
class Range:
    """The sample points a history is shown at: every *incr* ms from
    *first* to *last*, both included (RabbitMQ's ``#range{}``)."""

    first: int
    last: int
    incr: int

    def points(self) -> range:
        """The points' timestamps, oldest first."""
        return range(self.first, self.last + 1, self.incr)


def _range(query: Mapping[str, str], prefix: str, now_ms: int, ceil: bool) -> Optional[Range]:
    """The range ``PREFIX_age`` / ``PREFIX_incr`` (seconds) ask for, ending
    at *now_ms* rounded down (up with *ceil*) to the increment; None
    unless both are integers, as RabbitMQ reads them.

    :raises RangeError: a zero or negative value, or more than 500 points.
    """
    try:
        age, incr = int(query[f"{prefix}_age"]), int(query[f"{prefix}_incr"])
    except (KeyError, ValueError):
        return None
    if not (age > 0 and incr > 0 and age // incr <= MAX_RANGE_POINTS):
        raise RangeError(f"Invalid range parameters: age {age}, incr {incr}")
    age_ms, incr_ms = age * 1000, incr * 1000
    last = now_ms // incr_ms * incr_ms
    if ceil and last != now_ms:
        last += incr_ms
    return Range(last - age_ms, last, incr_ms)


@dataclass(frozen=True)
class Ranges:
    """The histories a request asks for, one range per kind of figure (None: none).

    :ivar lengths: queue and vhost lengths, and ``churn_rates`` in the overview.
    :ivar msg_rates: ``message_stats``.
    :ivar data_rates: a connection's or vhost's bytes.
    :ivar node_stats: the node's resources and ``churn_rates``.
    """

    lengths: Optional[Range] = None
    msg_rates: Optional[Range] = None
    data_rates: Optional[Range] = None
    node_stats: Optional[Range] = None

    @classmethod
    def from_query(cls, query: Mapping[str, str], now: float, *, ceil_lengths: bool = False) -> Ranges:
        """The ranges of a request's query string at time *now* (seconds).

        :param ceil_lengths: round the lengths' range up rather than down,
            as RabbitMQ does for queues so that the last length is the current one.
        :raises RangeError: as RabbitMQ refuses a range.
        """
        now_ms = int(now * 1000)
        return cls(
            _range(query, "lengths", now_ms, ceil_lengths),
            _range(query, "msg_rates", now_ms, False),
            _range(query, "data_rates", now_ms, False),
            _range(query, "node_stats", now_ms, False),
        )


#: No history asked for.
NO_RANGES = Ranges()


class Series:
    """One object's sampled figures: the last sample, the rates between the
    last two samples, and up to :data:`HISTORY` seconds of history.

    The history stores a sample only when it differs from the one before
    (an object's value at a time is its latest stored sample at or before
    it), and keeps the newest sample older than :data:`HISTORY` seconds as
    the value the kept ones start from.

    :param size: how many figures each sample has.
    """

    __slots__ = ("at", "values", "rates", "history")

    def __init__(self, size: int) -> None:
        #: When the last sample was taken (seconds), None before the first.
        self.at: Optional[float] = None
        self.values: tuple[float, ...] = (0,) * size
        self.rates: tuple[float, ...] = (0.0,) * size
        self.history: list[Point] = []

    def add(self, at: float, values: tuple[float, ...]) -> None:
        """Record the sample *values* taken at *at* (seconds)."""
        if self.at is not None and at > self.at:
            if values == self.values:
                if any(self.rates):
                    self.rates = (0.0,) * len(values)
            else:
                elapsed = at - self.at
                self.rates = tuple((new - old) / elapsed for new, old in zip(values, self.values))
        history = self.history
        at_ms = int(at * 1000)
        if not history or history[-1][1] != values:
            history.append((at_ms, values))
        horizon = at_ms - HISTORY * 1000
        if len(history) > 1 and history[1][0] <= horizon:
            kept = next(index for index, (taken, _) in enumerate(history) if taken > horizon) - 1
            del history[:kept]
        self.at, self.values = at, values

    def points(self, span: Range) -> list[Point]:
        """The values at each of *span*'s points, oldest first (zeros before the first sample)."""
        history = self.history
        stored = 0
        current: tuple[float, ...] = (0,) * len(self.values)
        found: list[Point] = []
        for at in span.points():
            while stored < len(history) and history[stored][0] <= at:
                current = history[stored][1]
                stored += 1
            found.append((at, current))
        return found


def with_details(values: Mapping[str, float], rates: Optional[Mapping[str, float]] = None) -> dict[str, Any]:
    """RabbitMQ's shape without history: each value with ``name_details: {"rate": ...}``."""
    shaped: dict[str, Any] = {}
    for name, value in values.items():
        shaped[name] = value
        shaped[f"{name}_details"] = {"rate": (rates or {}).get(name, 0.0)}
    return shaped


def with_history(fields: Sequence[str], points: list[Point]) -> dict[str, Any]:
    """RabbitMQ's shape with history: each figure's value at the range's end,
    and details with the rate over the last increment, the ``samples``
    (newest first), ``avg_rate`` (first to last) and ``avg``."""
    shaped: dict[str, Any] = {}
    (first_at, first), (last_at, last) = points[0], points[-1]
    before_at, before = points[-2] if len(points) > 1 else points[-1]
    for index, name in enumerate(fields):
        details: dict[str, Any] = {
            "rate": (last[index] - before[index]) * 1000 / (last_at - before_at) if last_at > before_at else 0.0,
            "samples": [{"sample": values[index], "timestamp": at} for at, values in reversed(points)],
        }
        if len(points) > 1:
            details["avg_rate"] = (last[index] - first[index]) * 1000 / (last_at - first_at)
            details["avg"] = sum(values[index] for _, values in points) / len(points)
        shaped[name] = last[index]
        shaped[f"{name}_details"] = details
    return shaped


def _summed(tuples: Iterable[tuple[float, ...]], size: int) -> tuple[float, ...]:
    total: list[float] = [0] * size
    for values in tuples:
        for index, value in enumerate(values):
            total[index] += value
    return tuple(total)


def _with_deliver_get(fields: tuple[str, ...]) -> tuple[tuple[str, ...], Callable[[tuple[float, ...]], tuple[float, ...]]]:
    """Channel-like fields with RabbitMQ's derived ``deliver_get`` added, and
    the function that extends a values (or rates) tuple likewise."""
    indices = [fields.index(name) for name in _DELIVER_GET]

    def extend(values: tuple[float, ...]) -> tuple[float, ...]:
        return values + (sum(values[index] for index in indices),)

    return fields + ("deliver_get",), extend


class Statistics:
    """Samples a node's figures and answers with values, rates and histories.

    :param node: the broker whose objects are sampled.
    :param clock: drives the sampling timer; its time stamps the samples.
    :param interval: seconds between samples.
    """

    def __init__(self, node: NodeLike, clock: IReactorTime, interval: float = DEFAULT_INTERVAL) -> None:
        self.node = node
        self.clock = clock
        self.interval = interval
        #: How many samples have been taken (a snapshot's generation).
        self.generation = 0
        self._counters: WeakKeyDictionary[Counters, Series] = WeakKeyDictionary()
        #: Each queue's lengths, by its counters object (which lives as long as it).
        self._lengths: WeakKeyDictionary[QueueCounters, Series] = WeakKeyDictionary()
        self._vhost_lengths: dict[str, Series] = {}
        self._vhost_traffic: dict[str, Series] = {}
        self._resources = Series(len(NODE_FIGURES))
        #: Per-vhost totals, refreshed at each sample and on demand.
        self._vhost_totals: dict[str, ChannelCounters] = {}
        self._node_totals = ChannelCounters()
        self._loop = LoopingCall(self.sample)
        self._loop.clock = clock

    def start(self) -> None:
        """Sample every :attr:`interval` seconds."""
        if not self._loop.running:
            self._loop.start(self.interval, now=True)

    def stop(self) -> None:
        """Stop sampling."""
        if self._loop.running:
            self._loop.stop()

    # -- sampling ------------------------------------------------------------

    def sample(self) -> None:
        """Take one sample of every figure the node has."""
        now = self.clock.seconds()
        node, broker = self.node, self.node.broker
        held = node.unacked()
        traffic: dict[str, list[tuple[float, ...]]] = {}
        for connection in node.connections:
            self._take(connection.stats, now)
            stats = connection.stats
            traffic.setdefault(connection.vhost or "", []).append((stats.recv_oct, stats.send_oct))
            for session in connection.client.sessions:
                self._take(session.stats, now)
        for name, vhost in broker.vhosts.items():
            self._take(vhost.churn, now)
            ready_total = unacked_total = 0
            for queue in vhost.queues.values():
                self._take(queue.stats, now)
                ready, unacked = queue.message_count, held.get(queue, (0, 0))[0]
                ready_total += ready
                unacked_total += unacked
                self._series(self._lengths, queue.stats, len(LENGTHS)).add(now, (ready, unacked, ready + unacked))
            for exchange in vhost.exchanges.values():
                self._take(exchange.stats, now)
            lengths = (ready_total, unacked_total, ready_total + unacked_total)
            self._series(self._vhost_lengths, name, len(LENGTHS)).add(now, lengths)
            self._series(self._vhost_traffic, name, len(TRAFFIC)).add(
                now, _summed(traffic.get(name, ()), len(TRAFFIC)))
            self._take(self.vhost(name), now)
        for gone in set(self._vhost_lengths) - set(broker.vhosts):
            del self._vhost_lengths[gone], self._vhost_traffic[gone]
        self._take(broker.churn, now)
        self._take(self.totals(), now)
        resources = node.resources()
        self._resources.add(now, tuple(resources[name] for name in NODE_FIGURES))
        self.generation += 1

    @staticmethod
    def _series(table: Any, key: Any, size: int) -> Series:
        series = table.get(key)
        if series is None:
            series = table[key] = Series(size)
        return series  # type: ignore[no-any-return]

    def _take(self, counters: Counters, now: float) -> None:
        self._series(self._counters, counters, len(counters.FIELDS)).add(now, counters.values())

    # -- answers -------------------------------------------------------------

    def rates(self, counters: Counters) -> dict[str, float]:
        """The per-second rates of *counters* between the last two samples."""
        series = self._counters.get(counters)
        if series is None:
            return {}
        return dict(zip(counters.FIELDS, series.rates))

    def rates_of(self, counters: Counters) -> Optional[tuple[float, ...]]:
        """The rates of *counters* from the last sample, as kept (the same
        object until they change), or None before the first sample."""
        series = self._counters.get(counters)
        return series.rates if series is not None else None

    def length_rates(self, counters: QueueCounters) -> Optional[tuple[float, ...]]:
        """Like :meth:`rates_of`, for the lengths of the queue counting with *counters*."""
        series = self._lengths.get(counters)
        return series.rates if series is not None else None

    def last_change(self, counters: Counters) -> Optional[float]:
        """When a sample of *counters* last differed from the one before (seconds), or None."""
        series = self._counters.get(counters)
        return series.history[-1][0] / 1000 if series is not None and series.history else None

    def _figures(
        self,
        fields: tuple[str, ...],
        series: list[Optional[Series]],
        span: Optional[Range],
        live: Optional[tuple[float, ...]] = None,
        derive: Optional[Callable[[tuple[float, ...]], tuple[float, ...]]] = None,
    ) -> dict[str, Any]:
        """*fields* of the sum of *series*: without a *span*, the values
        (*live* ones when given, else the last samples') and rates; with
        one, the history at its points. *derive* extends each values or
        rates tuple (a derived figure's fields are in *fields* already)."""
        size = len(fields) - (1 if derive is not None else 0)
        kept = [one for one in series if one is not None]
        extend = derive or (lambda values: values)
        if span is None:
            values = live if live is not None else _summed((one.values for one in kept), size)
            rates = _summed((one.rates for one in kept), size)
            return with_details(dict(zip(fields, extend(values))), dict(zip(fields, extend(rates))))
        grids = [one.points(span) for one in kept]
        points = [
            (at, extend(_summed((grid[index][1] for grid in grids), size)))
            for index, at in enumerate(span.points())
        ]
        return with_history(fields, points)

    def details(self, counters: Counters, span: Optional[Range] = None) -> dict[str, Any]:
        """*counters* in RabbitMQ's shape, with their rates (or history over *span*)."""
        return self._figures(counters.FIELDS, [self._counters.get(counters)], span, counters.values())

    def channel_stats(self, counters: Counters, span: Optional[Range] = None) -> dict[str, Any]:
        """RabbitMQ's ``message_stats`` of a channel or queue (with ``deliver_get``)."""
        fields, extend = _with_deliver_get(counters.FIELDS)
        return self._figures(fields, [self._counters.get(counters)], span, counters.values(), extend)

    def message_stats(self, totals: Iterable[ChannelCounters], span: Optional[Range] = None) -> dict[str, Any]:
        """RabbitMQ's ``message_stats`` of the sum of *totals* (vhost totals)."""
        totals = list(totals)
        fields, extend = _with_deliver_get(ChannelCounters.FIELDS)
        live = _summed((counters.values() for counters in totals), len(ChannelCounters.FIELDS))
        return self._figures(fields, [self._counters.get(counters) for counters in totals], span, live, extend)

    def vhost_message_stats(self, vhost: VirtualHost, span: Optional[Range] = None) -> dict[str, Any]:
        """RabbitMQ's ``message_stats`` of one vhost."""
        return self.message_stats([self.vhost(vhost.name)], span)

    def churn_rates(self, span: Optional[Range] = None) -> dict[str, Any]:
        """RabbitMQ's ``churn_rates``."""
        return self.details(self.node.broker.churn, span)

    def queue_lengths(self, queue: Queue, unacked: int, span: Optional[Range] = None) -> dict[str, Any]:
        """A queue's ``messages``, ``messages_ready`` and
        ``messages_unacknowledged`` (current values) with their rates or history.

        :param unacked: its delivered, unacknowledged messages now.
        """
        ready = queue.message_count
        live = (ready, unacked, ready + unacked) if span is None else None
        return self._figures(LENGTHS, [self._lengths.get(queue.stats)], span, live)

    def queue_totals(self, vhosts: Iterable[VirtualHost], span: Optional[Range] = None) -> dict[str, Any]:
        """The ready, unacknowledged and total messages of *vhosts*' queues
        (current values) with their rates or history."""
        vhosts = list(vhosts)
        live = None
        if span is None:
            held = self.node.unacked()
            ready = sum(queue.message_count for vhost in vhosts for queue in vhost.queues.values())
            unacked = sum(held.get(queue, (0, 0))[0] for vhost in vhosts for queue in vhost.queues.values())
            live = (ready, unacked, ready + unacked)
        return self._figures(LENGTHS, [self._vhost_lengths.get(vhost.name) for vhost in vhosts], span, live)

    def vhost_traffic(self, vhost: str, span: Optional[Range] = None) -> dict[str, Any]:
        """The bytes *vhost*'s open connections received and sent (current
        values) with their rates or history."""
        live = None
        if span is None:
            live = _summed(((connection.stats.recv_oct, connection.stats.send_oct)
                            for connection in self.node.connections if connection.vhost == vhost), len(TRAFFIC))
        return self._figures(TRAFFIC, [self._vhost_traffic.get(vhost)], span, live)

    def resources(self, live: Mapping[str, float], span: Optional[Range] = None) -> dict[str, Any]:
        """The node's resources: *live* values with the sampled rates, or the history over *span*."""
        return self._figures(NODE_FIGURES, [self._resources], span, tuple(live[name] for name in NODE_FIGURES))

    # -- totals --------------------------------------------------------------

    def vhost(self, name: str) -> ChannelCounters:
        """The totals of vhost *name*: closed channels' and live ones' counters."""
        totals = self._vhost_totals.get(name)
        if totals is None:
            totals = self._vhost_totals[name] = ChannelCounters()
        vhost = self.node.broker.vhosts.get(name)
        fresh = ChannelCounters()
        if vhost is not None:
            fresh.add(vhost.retired)
            for connection in self.node.connections:
                for session in connection.client.sessions:
                    if session.vhost is vhost:
                        fresh.add(session.stats)
        totals.replace(fresh)
        return totals

    def totals(self) -> ChannelCounters:
        """The broker's totals (every vhost's)."""
        fresh = ChannelCounters()
        for name in self.node.broker.vhosts:
            fresh.add(self.vhost(name))
        self._node_totals.replace(fresh)
        return self._node_totals


class MeasuredNode(NodeLike, Protocol):
    """A broker with its statistics, as the views of its objects read it."""

    @property
    def stats(self) -> Statistics:
        """Its sampled figures."""
