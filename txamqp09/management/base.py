"""The broker as the modules below the node see it, at the bottom of the package.

The management package stands in layers: the statistics, then the JSON
views and the kept queue rows built from them, then the
:class:`~txamqp09.management.node.Node` that makes and holds them all,
then the API framework, the endpoints and HTTP. A module below the node
sees it only through :class:`NodeLike` (each adding what it needs as a
``Protocol`` of its own, such as
:class:`~txamqp09.management.stats.MeasuredNode`), never by importing it.
:class:`~txamqp09.management.node.Node` satisfies them all, which mypy
checks where it hands itself down.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from twisted.internet.interfaces import IReactorTime

if TYPE_CHECKING:
    from txamqp09.broker.model import Broker, Queue
    from txamqp09.broker.server import ServerConnection

__all__ = ["NodeLike"]


class NodeLike(Protocol):
    """One broker, as the statistics and the views read it."""

    @property
    def name(self) -> str:
        """The node name RabbitMQ's JSON shows (``txamqp09@host``)."""

    @property
    def clock(self) -> IReactorTime:
        """The broker's clock: it times the samples and schedules work."""

    @property
    def broker(self) -> Broker:
        """The broker's model: its virtual hosts and their counters."""

    @property
    def connections(self) -> list[ServerConnection]:
        """The AMQP connections that are open (negotiation finished)."""

    def unacked(self) -> dict[Queue, tuple[int, int]]:
        """Delivered, unacknowledged messages and their body bytes, by queue."""

    def resources(self) -> dict[str, int]:
        """What the process uses now (``mem_used``, ``fd_used``,
        ``sockets_used``, ``disk_free``)."""
