"""Reusing expensive answers for a while, as RabbitMQ's management cache does.

Building the full rows of thousands of queues takes long enough that a
monitor polling it every second would take a large share of the broker's
time. :class:`ComputeCache` keeps a computed value for *multiplier* times
as long as computing it took (RabbitMQ's ``management_db_cache_multiplier``,
5 by default), so an answer that took 0.2 s is reused for the next second
and the broker spends at most a sixth of its time on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["ComputeCache", "DEFAULT_MULTIPLIER"]

#: How many times its computing time a value is reused for (RabbitMQ's default).
DEFAULT_MULTIPLIER = 5


class ComputeCache:
    """Values by key, each kept for *multiplier* times its computing time.

    :param clock: a monotonic clock in seconds.
    """

    def __init__(self, multiplier: float = DEFAULT_MULTIPLIER, clock: Callable[[], float] = time.monotonic) -> None:
        self.multiplier = multiplier
        self.clock = clock
        self._values: dict[Hashable, tuple[float, Any]] = {}

    def fetch(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The value cached under *key* while it is fresh, else ``compute()``'s."""
        now = self.clock()
        cached = self._values.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        value = compute()
        done = self.clock()
        self._values = {k: v for k, v in self._values.items() if v[0] > done}
        self._values[key] = (done + self.multiplier * (done - now), value)
        return value
