"""The seam between the broker model and storage.

The model tells a :class:`Store` about durable definitions as they change; a
store that keeps them can rebuild them after a restart (persistent messages
join this interface with durability). :class:`TransientStore`, the default,
keeps nothing: every exchange, queue and message lives in memory only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from txamqp09.broker.model.exchange import Binding, Exchange
    from txamqp09.broker.model.queue import Queue
    from txamqp09.broker.model.vhost import VirtualHost

__all__ = ["Store", "TransientStore"]


class Store:
    """Where durable exchanges, queues and bindings are kept.

    Every method does nothing here; a store overrides those it needs.
    """

    def exchange_added(self, vhost: VirtualHost, exchange: Exchange) -> None:
        """A durable exchange was declared."""

    def exchange_removed(self, vhost: VirtualHost, exchange: Exchange) -> None:
        """A durable exchange was deleted."""

    def queue_added(self, vhost: VirtualHost, queue: Queue) -> None:
        """A durable queue was declared."""

    def queue_removed(self, vhost: VirtualHost, queue: Queue) -> None:
        """A durable queue was deleted, with every message it kept."""

    def binding_added(self, vhost: VirtualHost, binding: Binding) -> None:
        """A binding between durable entities was made."""

    def binding_removed(self, vhost: VirtualHost, binding: Binding) -> None:
        """A binding between durable entities was removed."""


class TransientStore(Store):
    """A store that keeps nothing: the broker's state is lost when it stops."""
