"""One broker's role in its group, as a Twisted service.

:class:`GroupService` runs a :class:`~txamqp09.group.keeper.Keeper` and acts
on what it reports, in the reactor thread:

- Starting, the broker is a **standby**: it serves no AMQP (its broker side
  keeps the AMQP listeners closed and a copy of the store's database
  current; management and metrics answer with the role).
- When the keeper takes the lease, the broker becomes **active**: it opens
  the serving window until the lease's local deadline and asks the broker
  side to serve (restore the store from what changed since its copy, open
  the listeners).
- Every renewal moves the deadline: the time the renewal was *sent*, plus
  the lease period, less a margin (:data:`DEADLINE_MARGIN` of the period).
  The database counts the lease from a later instant (its statement
  starts after it was sent), so the broker's deadline always falls before
  any standby can see the lease expire.
- When the deadline passes without a renewal, or the keeper reports the
  lease lost, the broker is **fenced**: its broker side stops serving at
  once (closes the AMQP listeners, closes every connection with 320
  CONNECTION_FORCED, confirms nothing more), and the process exits with
  status :data:`EXIT_FENCED` shortly after, for its supervisor to start it
  again as a standby (a fresh broker, restored from the database at its
  next takeover).
- Stopping cleanly, an active broker's side closes first (its store
  writes everything), then the lease is released, so that a standby takes
  over at once.

Each role change is one operator log line (:func:`txamqp09.broker.oplog.group_role`).
:meth:`GroupService.status` is what the operations layer reads.
"""

from __future__ import annotations

import enum
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol, Sequence

from twisted.application.service import Service
from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IDelayedCall

from txamqp09.broker import oplog
from txamqp09.broker.serving import ServingWindow
from txamqp09.group.keeper import Keeper, LeaseTiming
from txamqp09.group.records import Identity, Lease, Member, iso_moment

__all__ = [
    "DEADLINE_MARGIN",
    "EXIT_FENCED",
    "exit_fenced",
    "GroupBroker",
    "GroupService",
    "GroupStatus",
    "Role",
]

#: The exit status of a fenced broker (EX_TEMPFAIL: start it again).
EXIT_FENCED = 75
#: The part of the lease period by which the broker's own deadline comes
#: before the lease expires (timer lateness, clock rates).
DEADLINE_MARGIN = 1 / 6
#: Seconds a fenced broker lets its connections' close frames leave before it exits.
EXIT_DELAY = 0.5


class Role(enum.Enum):
    """A broker's part in its group.

    ::

        STANDBY --lease taken--> ACTIVE --lease lost, deadline passed--> FENCED
        STANDBY, ACTIVE --stopped--> STOPPED

    A fenced broker exits; it rejoins as a new process.
    """

    STANDBY = "standby"
    ACTIVE = "active"
    FENCED = "fenced"
    STOPPED = "stopped"


class FencedStore(Protocol):
    """A message store that tells when its guard refused a write."""

    fenced: bool

    def add_failure_listener(self, listener: Callable[[Optional[str]], None]) -> None:
        """Call *listener* when writes fail (with a description) or work again (None)."""


class GroupBroker(Protocol):
    """What the group asks of the broker it runs."""

    def serve(self) -> None:
        """Start serving: restore from the store, open the AMQP listeners.

        :raises Exception: it cannot (the broker is then fenced).
        """

    def stop_serving(self, reason: str) -> None:
        """Stop serving at once: close the AMQP listeners and every
        connection (320 with *reason*), deliver and confirm nothing more."""

    def addresses(self) -> Sequence[tuple[str, str, int]]:
        """Where the broker listens now, as (protocol, host, port): AMQP
        (``amqp``, ``amqp/ssl``), management, metrics."""


@dataclass(frozen=True)
class GroupStatus:
    """The group as one member sees it.

    :ivar node: this member's node name.
    :ivar role: its role.
    :ivar lease: the lease as last read (None before the first read).
    :ivar members: every member's row as last read.
    :ivar session_error: why the lease session is down (None while it is up).
    :ivar deadline: seconds left before this broker must stop serving
        (None unless active).
    """

    node: str
    role: Role
    lease: Optional[Lease]
    members: tuple[Member, ...] = field(default_factory=tuple)
    session_error: Optional[str] = None
    deadline: Optional[float] = None

    def as_json(self) -> dict[str, Any]:
        """The status as JSON values (times as ISO 8601 strings)."""
        current = self.lease
        return {
            "node": self.node,
            "role": self.role.value,
            "lease": None if current is None else {
                "holder": current.holder,
                "epoch": current.epoch,
                "expires": iso_moment(current.expires),
                "expired": current.lapsed,
            },
            "members": [
                {
                    "node": member.node,
                    "role": member.role,
                    "addresses": [vars(address) for address in member.addresses],
                    "last_seen": iso_moment(member.last_seen),
                    "round_trip": member.round_trip,
                }
                for member in self.members
            ],
            "lease_session_error": self.session_error,
            "serving_deadline": self.deadline,
        }


def exit_fenced() -> None:
    """End the process with :data:`EXIT_FENCED` at once (after flushing its output)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_FENCED)


class GroupService(Service):
    """Runs one broker as a member of the group whose database is at *url*.

    :param identity: this member's node name and session name.
    :param timing: the lease period and renewal interval.
    :param broker: the broker side (serves, stops serving, tells its addresses).
    :param window: the broker's serving window (its deadline is moved here).
    :param reactor: the reactor (its clock and ``callFromThread``).
    :param exit: ends the process once fenced (tests give their own).
    :param connect_options: more libpq parameters for the lease session.
    """

    def __init__(
        self,
        url: str,
        identity: Identity,
        timing: LeaseTiming,
        broker: GroupBroker,
        window: ServingWindow,
        reactor: Any,
        exit: Callable[[], None] = exit_fenced,
        connect_options: Optional[dict[str, Any]] = None,
    ) -> None:
        self.url = url
        self.identity = identity
        self.timing = timing
        self.broker = broker
        self.window = window
        self.reactor = reactor
        self._exit = exit
        self._connect_options = connect_options
        self.role = Role.STANDBY
        self._lease: Optional[Lease] = None
        self._members: tuple[Member, ...] = ()
        self._session_error: Optional[str] = None
        self._deadline_call: Optional[IDelayedCall] = None
        self._keeper: Optional[Keeper] = None
        self._stopped: Optional[Deferred[None]] = None
        window.when_lapsed(self._deadline_passed)

    @property
    def serving(self) -> bool:
        """Whether this broker is the active one."""
        return self.role is Role.ACTIVE

    def status(self) -> GroupStatus:
        """The group as this member last saw it."""
        deadline = None
        if self.role is Role.ACTIVE:
            deadline = max(self.window.until - time.monotonic(), 0.0)
        return GroupStatus(
            self.identity.node, self.role, self._lease, self._members, self._session_error, deadline
        )

    # -- service -----------------------------------------------------------------

    def startService(self) -> None:
        """Join the group as a standby."""
        super().startService()
        self.window.until = 0.0
        oplog.group_role(Role.STANDBY.value, f"node {self.identity.node} joins the group; waiting for the lease")
        self._keeper = Keeper(
            self.url, self.identity, self.timing, self, self.reactor.callFromThread,
            self.broker.addresses, self._connect_options,
        )
        self._keeper.start()

    def stopService(self) -> Deferred[None]:
        """Leave the group cleanly: stop the keeper, releasing the lease if held."""
        super().stopService()
        return self.leave(clean=True)

    def leave(self, clean: bool) -> Deferred[None]:
        """Stop the keeper (when *clean*, ending this broker's lease if it
        holds it and removing its member row first); fires once its thread
        is done."""
        if self._stopped is not None:
            return self._stopped
        keeper, self._keeper = self._keeper, None
        if keeper is None:
            return succeed(None)
        self._cancel_deadline()
        stopped: Deferred[None] = Deferred()
        self._stopped = stopped
        if self.role is not Role.FENCED:
            released = clean and self.role is Role.ACTIVE
            self._change(Role.STOPPED, "the broker stops" + ("; lease released" if released else ""))
        keeper.stop(clean, lambda: stopped.callback(None))
        return stopped

    def watch_store(self, store: FencedStore) -> None:
        """Fence this broker when *store*'s guard refuses a write (another
        broker took the lease)."""

        def reported(error: Optional[str]) -> None:
            if store.fenced:
                self.fence(f"the message store refused to write: {error}")

        store.add_failure_listener(reported)

    # -- what the keeper reports -------------------------------------------------

    def lease_taken(self, taken: Lease, sent_at: float, previous: Lease, holder_gone: bool) -> None:
        """The keeper took the lease: serve until the deadline."""
        self._lease = taken
        if self.role is not Role.STANDBY:
            return
        self._extend(sent_at)
        self._change(Role.ACTIVE, f"took the lease (epoch {taken.epoch}): {_takeover_reason(previous, holder_gone)}")
        try:
            self.broker.serve()
        except Exception as error:
            self.fence(f"cannot serve: {error}")

    def lease_renewed(self, renewed: Lease, sent_at: float) -> None:
        """The keeper renewed the lease: move the deadline."""
        self._lease = renewed
        if self.role is Role.ACTIVE:
            self._extend(sent_at)

    def lease_lost(self, reason: str) -> None:
        """The keeper lost the lease (or failed): stop serving."""
        if self.role is Role.STANDBY:
            self._change(Role.FENCED, f"cannot take part in the group: {reason}", "critical")
            self._keeper = None
            self.reactor.callLater(0, self._exit)
        elif self.role is Role.ACTIVE:
            self.fence(reason)

    def observed(self, current: Lease, members: list[Member]) -> None:
        """The lease and members as the keeper last read them."""
        self._lease = current
        self._members = tuple(members)

    def session_changed(self, error: Optional[str]) -> None:
        """The lease session broke or is back: log the change."""
        if (error is None) != (self._session_error is None):
            oplog.group_session(error)
        self._session_error = error

    # -- serving and fencing -----------------------------------------------------

    def _extend(self, sent_at: float) -> None:
        """Serve until the deadline a lease statement sent at *sent_at* gives."""
        period = self.timing.period
        self.window.open_until(sent_at + period * (1 - DEADLINE_MARGIN))
        self._cancel_deadline()
        self._deadline_call = self.reactor.callLater(
            max(self.window.until - time.monotonic(), 0.0), self.window.is_open
        )

    def _cancel_deadline(self) -> None:
        call, self._deadline_call = self._deadline_call, None
        if call is not None and call.active():
            call.cancel()

    def _deadline_passed(self) -> None:
        """The serving window's deadline passed without a renewal."""
        if self.role is Role.ACTIVE:
            self.fence(
                f"the lease was not renewed within {self.timing.period * (1 - DEADLINE_MARGIN):g} s "
                f"(lease period {self.timing.period:g} s)"
            )

    def fence(self, reason: str) -> None:
        """Stop serving at once, stop the keeper (the lease is not
        released: it expires), and exit shortly."""
        if self.role is not Role.ACTIVE:
            return
        self._change(
            Role.FENCED,
            f"{reason}; stopped serving, exiting with status {EXIT_FENCED} to rejoin as a standby",
            "error",
        )
        self.window.lapsed = True
        self._cancel_deadline()
        self.broker.stop_serving(f"this broker lost its group lease: {reason}")
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.stop(False, lambda: None)
        self.reactor.callLater(EXIT_DELAY, self._exit)

    def _change(self, role: Role, detail: str, level: str = "info") -> None:
        """Become *role*, with its log line."""
        self.role = role
        oplog.group_role(role.value, detail, level)


def _takeover_reason(previous: Lease, holder_gone: bool) -> str:
    """Why the lease could be taken from *previous*, in words."""
    if previous.holder is None:
        return "nobody held it before"
    if holder_gone:
        return f"the lease session of {previous.holder} ended and its AMQP listeners refuse connections"
    return f"the lease of {previous.holder} (epoch {previous.epoch}) had expired or was released"
