"""Message counters: plain integers the broker bumps as it works.

Each channel's session, queue and exchange has a counters object whose
fields are incremented where the event happens (``stats.publish += 1``);
nothing else happens on the hot path. Totals per virtual host and for the
broker are sums taken when someone asks (the management API), plus what
closed channels counted: a closing session adds its counters to its virtual
host's :attr:`~txamqp09.broker.model.vhost.VirtualHost.retired`. Rates are
computed elsewhere, by sampling these fields on a timer
(:mod:`txamqp09.management.stats`).

Field names are RabbitMQ's ``message_stats`` keys where it has one.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = ["ChannelCounters", "ChurnCounters", "ConnectionCounters", "Counters", "ExchangeCounters", "QueueCounters"]


class Counters:
    """A fixed set of integer counters, all starting at 0."""

    __slots__: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        for name in self.__slots__:
            setattr(self, name, 0)

    def values(self) -> tuple[int, ...]:
        """The counters, in :attr:`__slots__` order."""
        return tuple(getattr(self, name) for name in self.__slots__)

    def as_dict(self) -> dict[str, int]:
        """The counters by name."""
        return dict(zip(self.__slots__, self.values()))

    def add(self, other: Counters) -> None:
        """Add *other*'s counters (of the same kind) to these."""
        for name in self.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class ChannelCounters(Counters):
    """What one channel did (also the per-vhost and broker totals).

    ``publish``: messages published; ``confirm``: publisher acks sent;
    ``return_unroutable`` / ``drop_unroutable``: unroutable messages
    returned (mandatory) or dropped; ``deliver`` / ``deliver_no_ack``:
    deliveries to consumers needing an ack or not; ``get`` / ``get_no_ack``
    / ``get_empty``: basic.get answers; ``redeliver``: deliveries flagged
    redelivered; ``ack``: messages acknowledged; ``reject``: messages
    rejected or nacked.
    """

    __slots__ = (
        "publish", "confirm", "return_unroutable", "drop_unroutable", "deliver", "deliver_no_ack",
        "get", "get_no_ack", "get_empty", "redeliver", "ack", "reject",
    )


class QueueCounters(Counters):
    """What happened to one queue's messages.

    As :class:`ChannelCounters` for the fields of the same name (``publish``
    counts messages routed to the queue), and ``dead_lettered`` /
    ``expired``: messages dead-lettered from it / that expired in it.
    """

    __slots__ = (
        "publish", "deliver", "deliver_no_ack", "get", "get_no_ack", "get_empty", "redeliver",
        "ack", "reject", "dead_lettered", "expired",
    )


class ExchangeCounters(Counters):
    """``publish_in``: messages published to the exchange; ``publish_out``:
    messages it routed to at least one queue."""

    __slots__ = ("publish_in", "publish_out")


class ConnectionCounters(Counters):
    """Bytes and reads/writes of one connection (``recv_oct``, ``recv_cnt``,
    ``send_oct``, ``send_cnt``)."""

    __slots__ = ("recv_oct", "recv_cnt", "send_oct", "send_cnt")


class ChurnCounters(Counters):
    """How many connections, channels and queues came and went (RabbitMQ's
    ``churn_rates``)."""

    __slots__ = (
        "connection_created", "connection_closed", "channel_created", "channel_closed",
        "queue_declared", "queue_created", "queue_deleted",
    )
