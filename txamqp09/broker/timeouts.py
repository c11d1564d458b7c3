"""The consumer timeout: deliveries left unacknowledged too long, as RabbitMQ 3.10's.

RabbitMQ's ``consumer_timeout`` (default 30 minutes) closes a channel whose
oldest unacknowledged delivery is older than the timeout, with 406
PRECONDITION_FAILED and the text ``delivery acknowledgement on channel 1
timed out. Timeout value used: 1800000 ms. This timeout value can be
configured, see consumers doc guide to learn more``; closing the channel
requeues what it had unacknowledged. Deliveries of consumers and of
basic.get alike count; deliveries made with no-ack never do.

:class:`AckTimeouts` looks at every open channel a few times per timeout
(at most once a second) and remembers the oldest unacknowledged delivery
tag of each channel with the time it first saw it: a channel is closed
when the same tag is still the oldest ``timeout`` seconds later. No time is
taken per delivery; a delivery is found overdue between ``timeout`` and
``timeout`` plus two intervals between looks after it was made.
"""

from __future__ import annotations

from typing import Callable, Iterable, Protocol

from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall

from txamqp09.broker import oplog
from txamqp09.wire.errors import PreconditionFailed

__all__ = ["DEFAULT_CONSUMER_TIMEOUT", "AckTimeouts", "TimedChannel", "timeout_error"]

#: RabbitMQ 3.10's default consumer_timeout, in seconds.
DEFAULT_CONSUMER_TIMEOUT = 1800.0
#: The longest interval between two looks, in seconds.
_LONGEST_LOOK = 1.0


class TimedChannel(Protocol):
    """What :class:`AckTimeouts` needs of a channel."""

    @property
    def number(self) -> int:
        """The channel number."""

    def oldestUnacked(self) -> int | None:
        """The delivery tag of the oldest unacknowledged delivery, or None."""

    def ackTimedOut(self, error: PreconditionFailed) -> None:
        """Close the channel with *error* (its unacknowledged messages are requeued)."""


def timeout_error(channel: int, timeout: float) -> PreconditionFailed:
    """RabbitMQ 3.10's error for a delivery on *channel* unacknowledged for *timeout* seconds."""
    return PreconditionFailed(
        f"delivery acknowledgement on channel {channel} timed out. Timeout value used: "
        f"{round(timeout * 1000)} ms. This timeout value can be configured, see consumers "
        "doc guide to learn more"
    )


class AckTimeouts:
    """Closes channels whose oldest unacknowledged delivery is older than *timeout*.

    :param clock: the reactor's time (a ``Clock`` in tests).
    :param timeout: seconds a delivery may stay unacknowledged; 0 turns
        the timeout off.
    :param channels: returns the open channels, each with a name for the
        log (the connection's peer).
    """

    def __init__(
        self,
        clock: IReactorTime,
        timeout: float,
        channels: Callable[[], Iterable[tuple[str, TimedChannel]]],
    ) -> None:
        self.clock = clock
        self.timeout = timeout
        self.channels = channels
        #: The interval between two looks.
        self.interval = min(timeout / 4, _LONGEST_LOOK)
        #: channel -> (oldest unacknowledged tag, when it was first seen oldest).
        self._oldest: dict[TimedChannel, tuple[int, float]] = {}
        self._loop = LoopingCall(self.check)
        self._loop.clock = clock

    def start(self) -> None:
        """Look every :attr:`interval` seconds (unless the timeout is off)."""
        if self.timeout > 0 and not self._loop.running:
            self._loop.start(self.interval, now=False)

    def stop(self) -> None:
        """Stop looking."""
        if self._loop.running:
            self._loop.stop()
        self._oldest = {}

    def check(self) -> None:
        """Close the channels whose oldest unacknowledged delivery is overdue."""
        now = self.clock.seconds()
        seen: dict[TimedChannel, tuple[int, float]] = {}
        overdue: list[tuple[str, TimedChannel]] = []
        for peer, channel in self.channels():
            tag = channel.oldestUnacked()
            if tag is None:
                continue
            previous = self._oldest.get(channel)
            since = previous[1] if previous is not None and previous[0] == tag else now
            if now - since >= self.timeout:
                overdue.append((peer, channel))
            else:
                seen[channel] = (tag, since)
        self._oldest = seen
        for peer, channel in overdue:
            oplog.consumer_timeout(peer, channel.number, self.timeout)
            channel.ackTimedOut(timeout_error(channel.number, self.timeout))
