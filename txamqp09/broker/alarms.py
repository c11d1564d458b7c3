"""Resource alarms and the publishers they hold back, as RabbitMQ's.

:class:`ResourceAlarms` says which resources the broker is low on
(``"memory"``, ``"disk"``); the monitors raise and clear the alarms and
anything may subscribe to the changes.

While any alarm is active, every connection that publishes is blocked, as
RabbitMQ blocks them: a connection that has published since it was last
unblocked is blocked at once; any other connection at its next content
frame (a content header or body frame of basic.publish, mid-message
included). Blocking a connection sends connection.blocked with a reason
naming the resources ("low on memory", "low on memory & disk") to a
client that announced the ``connection.blocked`` capability, and stops
reading from its socket, so that TCP pushes back on the client whatever it
understands. Deliveries, acks and basic.get answers go on flowing to it;
connections that only consume are never blocked. Once every alarm has
cleared, the blocked connections receive connection.unblocked and are read
again.

Each connection has a :class:`PublishGate`, which also serves the ready
bytes throttle (:mod:`txamqp09.broker.flow`): its reading is paused while any
hold is on it.
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional, Protocol

__all__ = [
    "ALARM_HOLD",
    "GatedConnection",
    "PublishGate",
    "ResourceAlarms",
    "block_publishers",
    "blocked_reason",
]

#: The resources the broker watches, in the order reasons name them.
RESOURCES = ("memory", "disk")
#: The hold an active alarm puts on a blocked connection's reading.
ALARM_HOLD = "alarm"

AlarmListener = Callable[[frozenset[str]], None]


class ResourceAlarms:
    """The resources the broker is low on, and who wants to know.

    Raising an active alarm or clearing an inactive one changes nothing and
    notifies nobody.
    """

    def __init__(self) -> None:
        self._active: frozenset[str] = frozenset()
        self._listeners: list[AlarmListener] = []

    def raise_alarm(self, resource: str) -> None:
        """The broker is low on *resource* (``"memory"`` or ``"disk"``)."""
        if resource not in self._active:
            self._change(self._active | {resource})

    def clear_alarm(self, resource: str) -> None:
        """The broker is no longer low on *resource*."""
        if resource in self._active:
            self._change(self._active - {resource})

    def active(self) -> frozenset[str]:
        """The resources whose alarm is up."""
        return self._active

    def subscribe(self, listener: AlarmListener) -> None:
        """Call *listener* with the active alarms whenever they change."""
        self._listeners.append(listener)

    def unsubscribe(self, listener: AlarmListener) -> None:
        """Call *listener* no more."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _change(self, active: frozenset[str]) -> None:
        self._active = active
        for listener in list(self._listeners):
            listener(active)


def blocked_reason(resources: Iterable[str]) -> str:
    """connection.blocked's reason for *resources*, in RabbitMQ's words:
    ``low on memory``, ``low on disk``, ``low on memory & disk``."""
    names = sorted(resources, key=_resource_order)
    return "low on " + " & ".join(names)


def _resource_order(name: str) -> tuple[int, str]:
    """Known resources first, in :data:`RESOURCES` order, then others by name."""
    return (RESOURCES.index(name) if name in RESOURCES else len(RESOURCES), name)


class GatedConnection(Protocol):
    """What a :class:`PublishGate` needs of its connection."""

    def pauseReading(self) -> None:
        """Stop reading from the client."""

    def resumeReading(self) -> None:
        """Read from the client again (and handle what was read but not yet handled)."""

    def notifyBlocked(self, reason: Optional[str]) -> None:
        """Send connection.blocked with *reason*, or connection.unblocked for
        None, if the client announced the capability."""

    def publishCount(self) -> int:
        """A count that grows whenever the client publishes (basic.publish
        contents started or completed)."""


class PublishGate:
    """Whether one connection is read, and whether it is blocked by alarms.

    :ivar armed: alarms are active and the connection is not blocked yet:
        its next content frame blocks it (:meth:`contentReceived`).
    :ivar blocked: the connection is blocked by alarms.
    """

    __slots__ = ("_connection", "_alarms", "armed", "blocked", "_holds", "_unblocked_at")

    def __init__(self, connection: GatedConnection, alarms: ResourceAlarms) -> None:
        self._connection = connection
        self._alarms = alarms
        self.armed = bool(alarms.active())
        self.blocked = False
        self._holds: set[str] = set()
        #: The connection's publish count when it was last unblocked.
        self._unblocked_at = 0

    @property
    def paused(self) -> bool:
        """Reading is paused by some hold."""
        return bool(self._holds)

    def hold(self, reason: str) -> None:
        """Stop reading until :meth:`release` of *reason* (and of every other hold)."""
        if not self._holds:
            self._connection.pauseReading()
        self._holds.add(reason)

    def release(self, reason: str) -> None:
        """Drop the hold *reason*; reading resumes when none is left."""
        if reason in self._holds:
            self._holds.discard(reason)
            if not self._holds:
                self._connection.resumeReading()

    def alarmsChanged(self, active: frozenset[str]) -> None:
        """The active alarms are now *active*: block or unblock the connection."""
        if not active:
            self.armed = False
            if self.blocked:
                self.blocked = False
                self._unblocked_at = self._connection.publishCount()
                self._connection.notifyBlocked(None)
                self.release(ALARM_HOLD)
        elif not self.blocked:
            if self._connection.publishCount() != self._unblocked_at:
                self._block(active)
            else:
                self.armed = True

    def contentReceived(self) -> None:
        """The client sent a content frame while :attr:`armed`: block it."""
        if self.armed:
            self._block(self._alarms.active())

    def _block(self, active: frozenset[str]) -> None:
        self.armed = False
        self.blocked = True
        self._connection.notifyBlocked(blocked_reason(active))
        self.hold(ALARM_HOLD)


def block_publishers(alarms: ResourceAlarms, gates: Callable[[], Iterable[PublishGate]]) -> None:
    """Have the alarms of *alarms* block and unblock the connections whose
    gates *gates* returns (called at each change)."""

    def changed(active: frozenset[str]) -> None:
        for gate in list(gates()):
            gate.alarmsChanged(active)

    alarms.subscribe(changed)
