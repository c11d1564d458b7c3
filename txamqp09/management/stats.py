"""Rates and totals over the broker's counters, for the management API.

The broker only bumps integers (:mod:`txamqp09.broker.model.stats`). A
:class:`Statistics` object samples them on a timer (every 5 seconds, as
RabbitMQ's ``collect_statistics_interval``): for each counters object it
keeps the previous sample and the per-second rates between the last two,
so rates cost nothing per message. Per-vhost and broker totals are sums of
the live channels' counters and of what closed channels counted; they are
sampled like any other counters object.

The JSON shapes are RabbitMQ's: each counter ``x`` comes with
``x_details: {"rate": r}``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Optional
from weakref import WeakKeyDictionary

from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall

from txamqp09.broker.model import Queue, VirtualHost
from txamqp09.broker.model.stats import ChannelCounters, Counters

if TYPE_CHECKING:
    from txamqp09.management.node import Node

__all__ = ["DEFAULT_INTERVAL", "Statistics", "with_details"]

#: Seconds between two samples.
DEFAULT_INTERVAL = 5.0


class _Sample:
    """The last sample of one counters object and the rates it gave."""

    __slots__ = ("at", "values", "rates")

    def __init__(self, at: float, values: tuple[int, ...]) -> None:
        self.at = at
        self.values = values
        self.rates: tuple[float, ...] = (0.0,) * len(values)


def with_details(values: dict[str, int], rates: Optional[dict[str, float]] = None) -> dict[str, Any]:
    """RabbitMQ's shape: each value with ``name_details: {"rate": ...}``."""
    shaped: dict[str, Any] = {}
    for name, value in values.items():
        shaped[name] = value
        shaped[f"{name}_details"] = {"rate": (rates or {}).get(name, 0.0)}
    return shaped


class Statistics:
    """Samples a node's counters and answers with values and rates.

    :param node: the broker facade whose objects are sampled.
    :param clock: drives the sampling timer.
    :param interval: seconds between samples.
    """

    def __init__(self, node: Node, clock: IReactorTime, interval: float = DEFAULT_INTERVAL) -> None:
        self.node = node
        self.clock = clock
        self.interval = interval
        self._samples: WeakKeyDictionary[Counters, _Sample] = WeakKeyDictionary()
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
        """Take one sample of every counters object the node has."""
        now = self.clock.seconds()
        broker = self.node.broker
        for vhost in broker.vhosts.values():
            self._take(vhost.churn, now)
            for queue in vhost.queues.values():
                self._take(queue.stats, now)
            for exchange in vhost.exchanges.values():
                self._take(exchange.stats, now)
        for connection in self.node.connections:
            self._take(connection.stats, now)
            for session in connection.client.sessions:
                self._take(session.stats, now)
        self._take(broker.churn, now)
        for name in broker.vhosts:
            self._take(self.vhost(name), now)
        self._take(self.totals(), now)

    def _take(self, counters: Counters, now: float) -> None:
        values = counters.values()
        previous = self._samples.get(counters)
        sample = self._samples[counters] = _Sample(now, values)
        if previous is not None and now > previous.at:
            elapsed = now - previous.at
            sample.rates = tuple((new - old) / elapsed for new, old in zip(values, previous.values))

    def rates(self, counters: Counters) -> dict[str, float]:
        """The per-second rates of *counters* between the last two samples."""
        sample = self._samples.get(counters)
        if sample is None:
            return {}
        return dict(zip(counters.FIELDS, sample.rates))

    def details(self, counters: Counters) -> dict[str, Any]:
        """*counters* in RabbitMQ's shape, with their rates."""
        return with_details(counters.as_dict(), self.rates(counters))

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

    def message_stats(self, totals: Iterable[ChannelCounters]) -> dict[str, Any]:
        """RabbitMQ's ``message_stats`` of the sum of *totals* (vhost totals)."""
        summed = ChannelCounters()
        rates: dict[str, float] = {}
        for counters in totals:
            summed.add(counters)
            for name, rate in self.rates(counters).items():
                rates[name] = rates.get(name, 0.0) + rate
        return channel_message_stats(summed.as_dict(), rates)

    def channel_stats(self, counters: ChannelCounters) -> dict[str, Any]:
        """RabbitMQ's ``message_stats`` of one channel."""
        return channel_message_stats(counters.as_dict(), self.rates(counters))

    def churn_rates(self) -> dict[str, Any]:
        """RabbitMQ's ``churn_rates``."""
        return self.details(self.node.broker.churn)

    def queue_totals(self, queues: Iterable[Queue]) -> dict[str, Any]:
        """Ready, unacknowledged and total messages of *queues*."""
        ready = unacked = 0
        held = self.node.unacked()
        for queue in queues:
            ready += queue.message_count
            unacked += held.get(queue, (0, 0))[0]
        return with_details({"messages": ready + unacked, "messages_ready": ready, "messages_unacknowledged": unacked})

    def vhost_message_stats(self, vhost: VirtualHost) -> dict[str, Any]:
        """RabbitMQ's ``message_stats`` of one vhost."""
        return self.message_stats([self.vhost(vhost.name)])


def channel_message_stats(values: dict[str, int], rates: dict[str, float]) -> dict[str, Any]:
    """A channel-like ``message_stats`` with RabbitMQ's derived ``deliver_get``."""
    values = dict(values)
    values["deliver_get"] = values["deliver"] + values["deliver_no_ack"] + values["get"] + values["get_no_ack"]
    rates = dict(rates)
    rates["deliver_get"] = sum(rates.get(name, 0.0) for name in ("deliver", "deliver_no_ack", "get", "get_no_ack"))
    return with_details(values, rates)
