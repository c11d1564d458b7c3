"""Consumer utilisation: how much of the time a queue's consumers could take its messages.

RabbitMQ's ``consumer_utilisation`` (also ``consumer_capacity``) is not a
snapshot: each queue keeps whether its consumers are *active* (a waiting
message can go to one of them at once) or *blocked* (messages wait and
every consumer is held back by its prefetch window or by flow control),
and a moving average of the active share of the time, weighted so that a
second ago counts half as much as now (a half-life of one second).

:class:`ConsumerUse` keeps that state for one queue. The queue tells it
only of transitions (blocked when a message has to wait while consumers
exist, active when the backlog drains or a consumer is added); nothing
happens per message, and the average is computed when it is asked for.
"""

from __future__ import annotations

import math

from txamqp09.broker.model.clock import Clock

__all__ = ["HALF_LIFE", "ConsumerUse", "moving_average"]

#: Seconds after which a share of time weighs half as much (RabbitMQ's
#: ``USE_AVG_HALF_LIFE``, one second).
HALF_LIFE = 1.0
_DECAY = math.log(0.5) / HALF_LIFE


def moving_average(active: float, blocked: float, previous: float) -> float:
    """The average after *active* then *blocked* seconds, starting from
    *previous*: the new period's active share, weighted by how long it lasted."""
    total = active + blocked
    if total <= 0:
        return previous
    weight = math.exp(total * _DECAY)
    return active / total * (1 - weight) + previous * weight


class ConsumerUse:
    """Whether a queue's consumers are active or blocked, and since when
    (see the module's text).

    :param clock: the time source (the virtual host's).
    """

    __slots__ = ("clock", "blocked", "since", "active", "average")

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        #: Messages wait that no consumer can take now.
        self.blocked = False
        #: When the current state began (clock seconds).
        self.since = clock.seconds()
        #: While blocked: how long the active state before it lasted.
        self.active = 0.0
        #: The average up to the last active state that ended.
        self.average = 1.0

    def block(self) -> bool:
        """A message waits and no consumer can take it; whether that is new."""
        if self.blocked:
            return False
        now = self.clock.seconds()
        self.blocked = True
        self.active, self.since = now - self.since, now
        return True

    def unblock(self) -> bool:
        """Consumers can take messages again; whether that is new."""
        if not self.blocked:
            return False
        now = self.clock.seconds()
        self.blocked = False
        self.average = moving_average(self.active, now - self.since, self.average)
        self.since = now
        return True

    def utilisation(self) -> float:
        """The share of time, up to now, the consumers could take messages at once."""
        elapsed = self.clock.seconds() - self.since
        if self.blocked:
            return moving_average(self.active, elapsed, self.average)
        return moving_average(elapsed, 0.0, self.average)
