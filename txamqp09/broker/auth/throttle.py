"""Slowing down repeated failed logins from one address.

Each failed login from a host makes the next attempts from that host wait
longer before they are checked: ``base * 2 ** (failures - 1)`` seconds,
at most ``cap``. A host that has not failed for ``window`` seconds starts
afresh. A successful login does not clear the record: otherwise one account
an attacker knows would reset the count for guessing at every other. At most ``max_hosts``
hosts are remembered (the least recently failing are forgotten first), so a
flood of addresses cannot grow memory without bound.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import deferLater

__all__ = ["LoginThrottle"]


@dataclass
class _Record:
    failures: int
    last: float


class LoginThrottle:
    """Delays login attempts from hosts with recent failures.

    :param clock: the reactor's time and scheduling (a ``Clock`` in tests).
    :param base: delay after the first failure, in seconds.
    :param cap: the longest delay, in seconds.
    :param window: seconds without failures after which a host is forgiven.
    :param max_hosts: how many hosts are remembered at most.
    """

    def __init__(
        self,
        clock: IReactorTime,
        *,
        base: float = 0.5,
        cap: float = 8.0,
        window: float = 300.0,
        max_hosts: int = 10_000,
    ) -> None:
        self.clock = clock
        self.base = base
        self.cap = cap
        self.window = window
        self.max_hosts = max_hosts
        self._records: OrderedDict[str, _Record] = OrderedDict()

    def _recent(self, host: str) -> _Record | None:
        record = self._records.get(host)
        if record is not None and self.clock.seconds() - record.last > self.window:
            del self._records[host]
            return None
        return record

    def delay(self, host: str) -> float:
        """Seconds an attempt from ``host`` waits now (0 without recent failures)."""
        record = self._recent(host)
        if record is None:
            return 0.0
        return min(self.cap, self.base * 2 ** min(record.failures - 1, 64))

    def wait(self, host: str) -> Deferred[None]:
        """A Deferred that fires when an attempt from ``host`` may be checked (now, if no delay)."""
        delay = self.delay(host)
        if not delay:
            return succeed(None)
        return deferLater(self.clock, delay, lambda: None)

    def failed(self, host: str) -> None:
        """Record a failed login from ``host``."""
        record = self._recent(host)
        failures = record.failures + 1 if record is not None else 1
        self._records.pop(host, None)
        self._records[host] = _Record(failures, self.clock.seconds())
        while len(self._records) > self.max_hosts:
            self._records.popitem(last=False)
