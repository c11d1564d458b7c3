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

from operator import attrgetter
from typing import Callable, ClassVar, Optional

__all__ = [
    "ChannelCounters",
    "ChurnCounters",
    "ConnectionCounters",
    "Counters",
    "DeliveryCounters",
    "ExchangeCounters",
    "QueueCounters",
]


class Counters:
    """A fixed set of integer counters, all starting at 0.

    Subclasses declare their counters as ``int`` annotations; :attr:`FIELDS`
    lists them in declaration order.
    """

    FIELDS: ClassVar[tuple[str, ...]] = ()
    #: Reads :attr:`FIELDS` into a tuple.
    _read: ClassVar[Callable[[Counters], tuple[int, ...]]]

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        fields: list[str] = []
        for klass in reversed(cls.__mro__):
            fields += [name for name, kind in vars(klass).get("__annotations__", {}).items()
                       if not str(kind).startswith("ClassVar")]
        cls.FIELDS = tuple(fields)
        getter = attrgetter(*fields)
        cls._read = staticmethod(getter if len(fields) > 1 else lambda counters: (getter(counters),))

    def __init__(self) -> None:
        for name in self.FIELDS:
            setattr(self, name, 0)

    def refresh(self) -> None:
        """Bring the counters derived from other figures up to date (none here)."""

    def values(self) -> tuple[int, ...]:
        """The counters, in :attr:`FIELDS` order (derived ones refreshed)."""
        self.refresh()
        return type(self)._read(self)

    def as_dict(self) -> dict[str, int]:
        """The counters by name."""
        return dict(zip(self.FIELDS, self.values()))

    def add(self, other: Counters) -> None:
        """Add *other*'s counters (of the same kind) to these."""
        for name in self.FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def replace(self, other: Counters) -> None:
        """Take *other*'s counters (of the same kind) as these."""
        for name in self.FIELDS:
            setattr(self, name, getattr(other, name))


class DeliveryCounters(Counters):
    """How messages left: ``deliver`` / ``deliver_no_ack``: deliveries to
    consumers needing an ack or not; ``get`` / ``get_no_ack`` /
    ``get_empty``: basic.get answers; ``redeliver``: deliveries flagged
    redelivered; ``ack``: messages acknowledged; ``reject``: messages
    rejected or nacked."""

    deliver: int
    deliver_no_ack: int
    get: int
    get_no_ack: int
    get_empty: int
    redeliver: int
    ack: int
    reject: int


class ChannelCounters(DeliveryCounters):
    """What one channel did (also the per-vhost and broker totals):
    :class:`DeliveryCounters` and ``publish``: messages published;
    ``confirm``: publisher acks sent; ``return_unroutable`` /
    ``drop_unroutable``: unroutable messages returned (mandatory) or
    dropped."""

    publish: int
    confirm: int
    return_unroutable: int
    drop_unroutable: int


class QueueCounters(DeliveryCounters):
    """What happened to one queue's messages: :class:`DeliveryCounters` and
    ``publish``: messages routed to the queue; ``dead_lettered`` /
    ``expired``: messages dead-lettered from it / that expired in it.

    :param published: how many messages entered the queue: ``publish`` is
        read from it (the queue numbers its messages anyway), so publishing
        costs no increment.
    """

    publish: int
    dead_lettered: int
    expired: int

    def __init__(self, published: Optional[Callable[[], int]] = None) -> None:
        super().__init__()
        self._published = published

    def refresh(self) -> None:
        if self._published is not None:
            self.publish = self._published()


class ExchangeCounters(Counters):
    """``publish_in``: messages published to the exchange; ``publish_out``:
    messages it routed to at least one queue (derived from the unroutable
    ones, :attr:`unroutable`, so that routing costs one increment)."""

    publish_in: int
    publish_out: int

    def __init__(self) -> None:
        super().__init__()
        #: Messages published to the exchange that reached no queue.
        self.unroutable = 0

    def refresh(self) -> None:
        self.publish_out = self.publish_in - self.unroutable


class ConnectionCounters(Counters):
    """Bytes and reads/writes of one connection."""

    recv_oct: int
    recv_cnt: int
    send_oct: int
    send_cnt: int


class ChurnCounters(Counters):
    """How many connections, channels and queues came and went (RabbitMQ's
    ``churn_rates``)."""

    connection_created: int
    connection_closed: int
    channel_created: int
    channel_closed: int
    queue_declared: int
    queue_created: int
    queue_deleted: int
