"""Holding publishers back while the broker holds too many messages.

:class:`PublisherThrottle` looks at the bytes of ready messages in every
queue a few times a second. Above the high watermark it blocks every
connection that has published: a 0-9-1 client that advertises the
``connection.blocked`` capability receives connection.blocked, any other
client receives channel.flow(active=false) on each of its channels, and the
broker stops reading from the connection. Once the bytes fall to the low
watermark (consumers drained the queues) the connections are released with
connection.unblocked or channel.flow(active=true). Consumers and acks on
connections that never published go on meanwhile. Each look also tells the
broker's persistence how many bytes are held, for its memory budget.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Optional, Protocol

from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall

from txamqp09.broker.model import Broker

__all__ = ["PublisherThrottle", "ThrottledConnection", "ready_bytes"]


def ready_bytes(broker: Broker) -> int:
    """Body bytes of the ready messages of every queue of *broker* held in
    memory (paged-out bodies do not count)."""
    ready = sum(
        queue.ready_bytes for vhost in broker.vhosts.values() for queue in vhost.queues.values()
    )
    paged = broker.persistence.paged_bytes if broker.persistence is not None else 0
    return max(ready - paged, 0)


class ThrottledConnection(Protocol):
    """A connection as the throttle sees it (a
    :class:`~txamqp09.broker.server.ServerConnection`)."""

    @property
    def published(self) -> bool:
        """The client has published on a channel still open."""

    @property
    def publishing_blocked(self) -> bool:
        """The throttle blocked it."""

    def blockPublishing(self, reason: str) -> None:
        """Tell the client to stop publishing, and stop reading from it."""

    def unblockPublishing(self) -> None:
        """Let the client publish again, and read from it again."""


class PublisherThrottle:
    """Blocks publishing connections between two watermarks of held bytes.

    :param connections: the live connections (a factory's set).
    :param high_watermark: block publishers at this many ready bytes.
    :param low_watermark: release them at this many (default: 80 % of high).
    :param interval: seconds between two looks.
    """

    def __init__(
        self,
        broker: Broker,
        connections: Collection[ThrottledConnection],
        clock: IReactorTime,
        high_watermark: int,
        low_watermark: Optional[int] = None,
        interval: float = 0.2,
    ) -> None:
        self.broker = broker
        self.connections = connections
        self.high_watermark = high_watermark
        self.low_watermark = low_watermark if low_watermark is not None else high_watermark * 4 // 5
        self.interval = interval
        self.blocked = False
        self._loop = LoopingCall(self.check)
        self._loop.clock = clock

    def start(self) -> None:
        """Start looking."""
        if not self._loop.running:
            self._loop.start(self.interval, now=False)

    def stop(self) -> None:
        """Stop looking."""
        if self._loop.running:
            self._loop.stop()

    def check(self) -> None:
        """Compare the held bytes with the watermarks; block or release."""
        held = ready_bytes(self.broker)
        if self.broker.persistence is not None:
            self.broker.persistence.sample(held)
        if held >= self.high_watermark:
            self.blocked = True
            reason = (
                f"broker holds {held} bytes of ready messages, above its high watermark "
                f"of {self.high_watermark}"
            )
            for connection in list(self.connections):
                if connection.published and not connection.publishing_blocked:
                    connection.blockPublishing(reason)
        elif self.blocked and held <= self.low_watermark:
            self.blocked = False
            for connection in list(self.connections):
                if connection.publishing_blocked:
                    connection.unblockPublishing()
