"""Holding back the answers to wrong passwords, never a correct login.

Every login is checked as soon as it arrives (a password check is one
salted SHA-256: microseconds), so a correct password is let in at once
however many wrong ones its user, its host or anybody else sent before or
sends meanwhile. What the throttle holds back is the answer to a *wrong*
one:

- A refused login's reply waits ``base * 2 ** (failures - 1)`` seconds, at
  most ``cap``, where ``failures`` counts the recent failures of that user
  name from that host, this one included. A client that waits for each
  answer before trying again (a misconfigured client, a script looping over
  passwords) is slowed down more and more; it slows down only itself, not
  the other clients on its host nor the same user's clients elsewhere. A
  (user, host) that has not failed for ``window`` seconds starts afresh; a
  successful login does not clear the count (it would reset it for a
  guesser who knows one password).
- While its reply waits, a refused connection stays open, held by the
  throttle: at most ``max_held_per_host`` from one host and ``max_held`` in
  all. A refusal beyond either bound is answered at once, and its reply text
  says why, so a flood holds a bounded number of connections open, and a
  correct login never waits behind it.
- At most ``max_records`` (user, host) pairs are remembered (the least
  recent are forgotten first), so a flood of names or addresses cannot grow
  memory without bound.

A guesser that does not wait for answers learns that a password was wrong
from its connection not being let in, which is how a correct login must be
treated; it is held back only by how fast it can open connections, as with
RabbitMQ, which holds no refusal back. Refusing such a host's logins
unchecked would slow it down, but would lock out that host's correct
clients too.
"""

from __future__ import annotations

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
    :param max_held_per_host: refusals from one host whose reply may wait at once.
    :param max_held: refusals whose reply may wait at once, from all hosts.
    :param max_records: how many (user, host) pairs are remembered at most.
    """

    def __init__(
        self,
        clock: IReactorTime,
        *,
        base: float = 0.5,
        cap: float = 8.0,
        window: float = 300.0,
        max_held_per_host: int = 16,
        max_held: int = 1024,
        max_records: int = 10_000,
    ) -> None:
        self.clock = clock
        self.base = base
        self.cap = cap
        self.window = window
        self.max_held_per_host = max_held_per_host
        self.max_held = max_held
        self.max_records = max_records
        self._records: OrderedDict[_Key, _Record] = OrderedDict()
        self._held: Counter[str] = Counter()

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

    def held(self, host: Optional[str] = None) -> int:
        """Refused logins whose reply is waiting: from *host*, or from all
        hosts when it is None."""
        if host is None:
            return self._held.total()
        return self._held[host]

    def may_hold(self, host: str) -> bool:
        """Whether one more refusal from *host* may wait for its reply (both
        bounds leave room for it)."""
        return self._held[host] < self.max_held_per_host and self._held.total() < self.max_held

    def failed(self, user: Optional[str], host: str) -> Optional[Deferred[None]]:
        """Record a failed login by *user* from *host*.

        :return: a Deferred that fires when its refusal may be sent, after
            :meth:`delay`; until then, or until it is cancelled (the
            connection was lost), it counts as held. None when the refusal
            may not wait (:meth:`may_hold` is False): answer it at once.
        """
        key = (user, host)
        record = self._recent(key)
        self._records.pop(key, None)
        self._records[key] = _Record(record.failures + 1 if record is not None else 1, self.clock.seconds())
        while len(self._records) > self.max_records:
            self._records.popitem(last=False)
        if not self.may_hold(host):
            return None
        self._held[host] += 1
        waited = deferLater(self.clock, self.delay(user, host), lambda: None)
        return waited.addBoth(self._released, host)

    def _released(self, result: object, host: str) -> object:
        self._held[host] -= 1
        if not self._held[host]:
            del self._held[host]
        return result
