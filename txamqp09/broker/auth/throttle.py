"""Slowing down password guessing without holding back correct logins.

Every login is checked as soon as it arrives, so a correct password is let
in at once however many failures its user or its host has had. What is
slowed down is the answer to a *wrong* one:

- A refused login's reply waits ``base * 2 ** (failures - 1)`` seconds, at
  most ``cap``, where ``failures`` counts the recent failures of that user
  name from that host (a user from a source), this one included. One misconfigured client
  therefore slows itself down, not the other clients on its host, and not
  other hosts' clients of the same user. A (user, host) that has not failed
  for ``window`` seconds starts afresh; a successful login does not clear
  the count (it would reset it for a guesser who knows one password).
- While its reply waits, a refused login's connection stays open, held by
  the throttle: at most ``max_pending`` per host. An attempt from a host
  that already holds that many is refused unchecked. So one host can make
  the broker check at most ``max_pending / base`` passwords a second (far
  fewer as its delays grow), and keep at most ``max_pending`` refused
  connections open; a client that fails one login at a time never comes
  near the bound.
- A client that logged in from a host before is still checked while that
  host holds ``max_pending`` refusals: the throttle remembers a keyed digest
  (HMAC with a key of this process) of the last secret each (user, host)
  logged in with, and a login presenting the same secret is admitted to the
  real check. A guesser cannot get past the bound without the password, and
  comparing a digest costs next to nothing, so a flood from a host no longer
  shuts out that host's correct clients.
- At most ``max_records`` (user, host) pairs are remembered in each table
  (the least recent are forgotten first), so a flood of names or addresses
  cannot grow memory without bound.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Optional

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import deferLater

__all__ = ["LoginThrottle"]

#: Whom a failure is counted against: the user name (None when the
#: response named none: malformed, or an unoffered mechanism) and the host.
_Key = tuple[Optional[str], str]


@dataclass
class _Record:
    failures: int
    last: float


class LoginThrottle:
    """Delays the refusals of repeated failed logins per (user, host).

    :param clock: the reactor's time and scheduling (a ``Clock`` in tests).
    :param base: delay of the refusal after a first failure, in seconds.
    :param cap: the longest delay, in seconds.
    :param window: seconds without failures after which a (user, host) is forgiven.
    :param max_pending: refused logins per host whose reply may wait at once.
    :param max_records: how many (user, host) pairs are remembered at most.
    """

    def __init__(
        self,
        clock: IReactorTime,
        *,
        base: float = 0.5,
        cap: float = 8.0,
        window: float = 300.0,
        max_pending: int = 16,
        max_records: int = 10_000,
    ) -> None:
        self.clock = clock
        self.base = base
        self.cap = cap
        self.window = window
        self.max_pending = max_pending
        self.max_records = max_records
        self._records: OrderedDict[_Key, _Record] = OrderedDict()
        self._pending: Counter[str] = Counter()
        self._known: OrderedDict[_Key, bytes] = OrderedDict()
        self._digest_key = os.urandom(32)

    def _recent(self, key: _Key) -> _Record | None:
        record = self._records.get(key)
        if record is not None and self.clock.seconds() - record.last > self.window:
            del self._records[key]
            return None
        return record

    def delay(self, user: Optional[str], host: str) -> float:
        """Seconds the refusal of the last failed login by *user* from *host*
        waited (0 without recent failures); the next one waits twice as long,
        up to ``cap``."""
        record = self._recent((user, host))
        if record is None:
            return 0.0
        return min(self.cap, self.base * 2 ** min(record.failures - 1, 64))

    def pending(self, host: str) -> int:
        """Refused logins from *host* whose reply is waiting."""
        return self._pending[host]

    def admits(self, host: str) -> bool:
        """Whether a login from *host* may be checked now: False while the host
        holds ``max_pending`` refusals waiting for their reply."""
        return self._pending[host] < self.max_pending

    def admits_known(self, user: Optional[str], host: str, secret: Optional[bytes]) -> bool:
        """Whether a login may be checked now: :meth:`admits`, or *secret* is
        the one *user* last logged in with from *host* (see :meth:`succeeded`)."""
        if self.admits(host):
            return True
        known = self._known.get((user, host))
        return known is not None and secret is not None and hmac.compare_digest(known, self._digest(secret))

    def succeeded(self, user: str, host: str, secret: Optional[bytes]) -> None:
        """Remember that *user* logged in from *host* with *secret* (None for
        mechanisms without one, which are then not remembered)."""
        key = (user, host)
        self._known.pop(key, None)
        if secret is None:
            return
        self._known[key] = self._digest(secret)
        while len(self._known) > self.max_records:
            self._known.popitem(last=False)

    def _digest(self, secret: bytes) -> bytes:
        return hmac.new(self._digest_key, secret, hashlib.sha256).digest()

    def failed(self, user: Optional[str], host: str) -> Deferred[None]:
        """Record a failed login by *user* from *host*.

        :return: a Deferred that fires when its refusal may be sent, after
            :meth:`delay`. Until then, or until it is cancelled (the
            connection was lost), it counts against the host's ``max_pending``.
        """
        key = (user, host)
        record = self._recent(key)
        self._records.pop(key, None)
        self._records[key] = _Record(record.failures + 1 if record is not None else 1, self.clock.seconds())
        while len(self._records) > self.max_records:
            self._records.popitem(last=False)
        self._pending[host] += 1
        waited = deferLater(self.clock, self.delay(user, host), lambda: None)
        return waited.addBoth(self._released, host)

    def _released(self, result: object, host: str) -> object:
        self._pending[host] -= 1
        if not self._pending[host]:
            del self._pending[host]
        return result
