"""What the application declared through a client's recovering channels, to
declare it again on every new connection.

:class:`Topology` keeps one record per exchange, queue and binding (and per
declaration function registered with the client), in the order they were
first declared; deleting or unbinding forgets them. It also knows the names
the broker gave server-named queues on each new connection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from twisted.internet.defer import CancelledError, Deferred, maybeDeferred

from txamqp09.client.base import ChannelState
from txamqp09.client.channel import Channel
from txamqp09.client.errors import ConnectionClosed
from txamqp09.client.events import QueueRenamed, RecoveryEvent, RecoveryFailed

if TYPE_CHECKING:
    from txamqp09.client.connection import ClientConnection

__all__ = ["BindingRecord", "Declaration", "ExchangeRecord", "QueueRecord", "Record", "StepRecord", "Topology"]

#: One step of the topology the application registered as a function: it
#: declares something on the channel it is given.
Declaration = Callable[[Channel], "Deferred[Any]"]


@dataclass
class ExchangeRecord:
    """An exchange declared through the client."""

    name: str
    type: str
    options: dict[str, Any]

    def replay(self, channel: Channel, topology: Topology) -> Deferred[Any]:
        """Declare it on *channel*."""
        return channel.exchange_declare(self.name, self.type, **self.options)

    def __str__(self) -> str:
        return f"exchange {self.name!r}"


@dataclass
class QueueRecord:
    """A queue declared through the client.

    :ivar name: the name it was declared under, or the first name the
        server gave it.
    :ivar server_named: declared with an empty name: the server names it
        again on every connection.
    """

    name: str
    server_named: bool
    options: dict[str, Any]

    def replay(self, channel: Channel, topology: Topology) -> Deferred[Any]:
        """Declare it on *channel*; a server-named queue is renamed in *topology*."""
        if not self.server_named:
            return channel.queue_declare(self.name, **self.options)
        current = topology.name(self.name)
        declared = channel.queue_declare("", **self.options)
        return declared.addCallback(lambda ok: topology.rename(current, ok.queue))

    def __str__(self) -> str:
        return f"queue {self.name!r}"


@dataclass
class BindingRecord:
    """A queue bound to an exchange (*kind* ``queue``), or an exchange to an
    exchange (*kind* ``exchange``, RabbitMQ's exchange.bind)."""

    kind: str
    destination: str
    source: str
    routing_key: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def replay(self, channel: Channel, topology: Topology) -> Deferred[Any]:
        """Bind on *channel*."""
        return channel.request(f"{self.kind}.bind", **self.fields(topology))

    def fields(self, topology: Topology) -> dict[str, Any]:
        """The fields of its bind (or unbind) method, queue names translated."""
        if self.kind == "queue":
            ends = {"queue": topology.name(self.destination), "exchange": self.source}
        else:
            ends = {"destination": self.destination, "source": self.source}
        return {**ends, "routing_key": self.routing_key, "arguments": self.arguments}

    def same(self, other: BindingRecord, topology: Topology) -> bool:
        """Whether both bind the same ends with the same key and arguments."""
        return self.kind == other.kind and self.fields(topology) == other.fields(topology)

    def __str__(self) -> str:
        return f"binding of {self.kind} {self.destination!r} to {self.source!r} ({self.routing_key!r})"


@dataclass
class StepRecord:
    """A function the application registered to declare something."""

    step: Declaration

    def replay(self, channel: Channel, topology: Topology) -> Deferred[Any]:
        """Run the function on *channel*."""
        return maybeDeferred(self.step, channel)

    def __str__(self) -> str:
        return f"declaration {getattr(self.step, '__qualname__', self.step)!r}"


Record = Union[ExchangeRecord, QueueRecord, BindingRecord, StepRecord]


class Topology:
    """What the application declared through a client's channels, in order,
    and the names server-named queues have now.

    :param report: called with a :class:`QueueRenamed` or
        :class:`RecoveryFailed` as they happen.
    """

    def __init__(self, report: Callable[[RecoveryEvent], None]) -> None:
        self.records: list[Record] = []
        #: Every earlier name of a renamed server-named queue -> its name now.
        self.renamed: dict[str, str] = {}
        self._report = report

    def name(self, queue: str) -> str:
        """The name *queue* (perhaps a name of an earlier connection) has now."""
        return self.renamed.get(queue, queue)

    def rename(self, old: str, new: str) -> None:
        """The server named queue *old* *new* on a new connection."""
        if old == new:
            return
        for earlier, current in self.renamed.items():
            if current == old:
                self.renamed[earlier] = new
        self.renamed[old] = new
        self._report(QueueRenamed(old, new))

    def add(self, record: Record) -> None:
        """Remember *record*, in the place of the record of the same exchange, queue or binding."""
        for index, known in enumerate(self.records):
            if self._same(known, record):
                self.records[index] = record
                return
        self.records.append(record)

    def _same(self, known: Record, record: Record) -> bool:
        if isinstance(known, ExchangeRecord) and isinstance(record, ExchangeRecord):
            return known.name == record.name
        if isinstance(known, QueueRecord) and isinstance(record, QueueRecord):
            return self.name(known.name) == self.name(record.name)
        if isinstance(known, BindingRecord) and isinstance(record, BindingRecord):
            return known.same(record, self)
        return False

    def forget_exchange(self, name: str) -> None:
        """*name* was deleted: forget it and the bindings from or to it."""
        self.records = [
            record
            for record in self.records
            if not (
                (isinstance(record, ExchangeRecord) and record.name == name)
                or (
                    isinstance(record, BindingRecord)
                    and (record.source == name or (record.kind == "exchange" and record.destination == name))
                )
            )
        ]

    def forget_queue(self, name: str) -> None:
        """*name* was deleted: forget it and its bindings."""
        current = self.name(name)
        self.records = [
            record
            for record in self.records
            if not (
                (isinstance(record, QueueRecord) and self.name(record.name) == current)
                or (
                    isinstance(record, BindingRecord)
                    and record.kind == "queue"
                    and self.name(record.destination) == current
                )
            )
        ]

    def forget_binding(self, binding: BindingRecord) -> None:
        """*binding* was unbound."""
        self.records = [
            record
            for record in self.records
            if not (isinstance(record, BindingRecord) and record.same(binding, self))
        ]

    async def replay(self, connection: ClientConnection) -> None:
        """Declare everything again on *connection*, in order, on a channel of
        its own; what the broker refuses is reported and left out.

        :raises ConnectionClosed: the connection ended meanwhile.
        """
        channel: Optional[Channel] = None
        for record in list(self.records):
            if channel is None:
                channel = await connection.channel()
            try:
                await record.replay(channel, self)
            except (ConnectionClosed, CancelledError):
                raise
            except Exception as error:
                self._report(RecoveryFailed(str(record), error))
                if channel.state is not ChannelState.OPEN:
                    channel = None
        if channel is not None:
            await channel.close()
