"""The bottom of the classes: how they see their channel, their state, and dispatch.

A class sees its server channel as a :class:`ChannelLike` (the
:class:`~txamqp09.broker.channel.ServerChannel`, which stands above the
classes, satisfies it) and keeps its state of one channel in a
:class:`ClassState`. :class:`ChannelClasses` is created for a server
channel the first time one of these classes is used on it (and for every
0-9 channel, which gets a channel-id it can resume by), and
:class:`VhostClasses` holds what a virtual host keeps of them.
:func:`class_handler` gives the server channel's dispatch table, which the
channel builds, a handler for each method these classes serve.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, Protocol

from txamqp09.broker.base import ChannelBasics, ConnectionTerms
from txamqp09.broker.classes.staging import StagingArea
from txamqp09.broker.model import VirtualHost
from txamqp09.wire.base import Method, Properties
from txamqp09.wire.frames import Command, content_frames, method_frame

if TYPE_CHECKING:
    from txamqp09.broker.auth import AccessGuard
    from txamqp09.broker.model import Session
    from txamqp09.broker.publishing import Publisher
    from txamqp09.wire import methods
    from txamqp09.wire.versions import ProtocolVersion

__all__ = [
    "ChannelClasses", "ChannelLike", "ClassState", "ResumableChannel", "VhostClasses", "class_handler", "register",
    "vhost_classes",
]

#: Interrupted channels a virtual host remembers for channel.resume.
MAX_RESUMABLE_CHANNELS = 1024

class ChannelLike(ChannelBasics, ConnectionTerms, Protocol):
    """A server channel as the classes see it: its public interface, never
    its connection (whose terms it offers itself)."""

    #: The queue most recently declared on the channel (the empty-name shortcut).
    last_queue: str
    #: The channel's class states (None until a class is used on it).
    classes: Optional[ChannelClasses]

    @property
    def version(self) -> ProtocolVersion:
        """The connection's protocol version."""

    @property
    def spec(self) -> methods.Spec:
        """The generated module of that version."""

    @property
    def session(self) -> Session:
        """The channel's basic session."""

    @property
    def publisher(self) -> Publisher:
        """The channel's basic hot path (publishes, returns, counters)."""

    @property
    def guard(self) -> AccessGuard:
        """The connection's access guard."""

    @property
    def user_name(self) -> str:
        """The name of the user that opened the connection."""

    def build(self, name: str, **fields: Any) -> Method:
        """Method *name* of the channel's version with *fields*."""

    def reply(self, method: Method) -> None:
        """Answer the current method, once what it wrote to the store is durable."""

    def write(self, frames: bytes) -> None:
        """Write *frames* now, ahead of any answer held for the store."""

    def queue_name(self, name: str) -> str:
        """*name*, or the queue last declared on the channel when it is empty."""

    def transaction(self, verb: str) -> None:
        """``select``, ``commit`` or ``rollback`` the transaction of every class in use."""


class ClassState:
    """One class's state on one server channel.

    Subclasses name their class in :attr:`AMQP_CLASS` and handle its
    methods in ``<class>_<method>`` methods taking the method (or, for a
    method with content, the :class:`~txamqp09.wire.frames.Command`).

    :ivar channel: the server channel.
    """

    AMQP_CLASS = ""

    def __init__(self, channel: ChannelLike) -> None:
        self.channel = channel

    def interrupted(self) -> None:
        """The channel ended; release what this class holds for it."""

    def cut_off(self, command: Command) -> None:
        """The connection broke while *command*'s content arrived; *command*
        holds the body received so far (this class may keep it)."""

    def kept(self) -> Any:
        """What channel.resume gives back of this class's state (None: nothing)."""
        return None

    def resume(self, kept: Any) -> None:
        """channel.resume: take over what :meth:`kept` returned on the interrupted channel."""

    def flow(self, active: bool) -> None:
        """channel.flow from the client."""

    def tx(self, verb: str) -> None:
        """tx.select, tx.commit or tx.rollback (*verb*) on the channel."""

    def reply(self, name: str, **fields: Any) -> None:
        """Answer the current method with the method *name*."""
        self.channel.reply(self.channel.build(name, **fields))

    def send(self, name: str, **fields: Any) -> None:
        """Send the method *name* to the client (a request, not an answer)."""
        self.channel.write(method_frame(self.channel.number, self.channel.build(name, **fields)))

    def send_content(self, name: str, properties: Properties, body: bytes, **fields: Any) -> None:
        """Send the content method *name* with its properties and body."""
        channel = self.channel
        channel.write(
            content_frames(
                channel.number, channel.build(name, **fields), properties, body,
                channel.frame_max,
            )
        )



#: The state class of each AMQP class name, filled by :func:`register`.
_STATE_CLASSES: dict[str, type[ClassState]] = {}


def register(state_class: type[ClassState]) -> type[ClassState]:
    """Serve the methods of ``state_class.AMQP_CLASS`` with *state_class* (a decorator)."""
    _STATE_CLASSES[state_class.AMQP_CLASS] = state_class
    return state_class


class ResumableChannel(NamedTuple):
    """What channel.resume gives back of an interrupted channel."""

    last_queue: str
    prefetch: tuple[int, int]
    #: What each class state kept (see :meth:`ClassState.kept`), by state class.
    kept: dict[type[ClassState], Any]


class VhostClasses:
    """A virtual host's staging area and its interrupted channels.

    :param now: the current time in seconds (staging entries expire by it).
    """

    def __init__(self, now: Callable[[], float] = lambda: 0.0) -> None:
        self.staging = StagingArea(now=now)
        self._interrupted: OrderedDict[tuple[str, bytes], ResumableChannel] = OrderedDict()

    def interrupted(self, user: str, channel_id: bytes, state: ResumableChannel) -> None:
        """Remember an interrupted channel of *user* (the oldest are forgotten first)."""
        self._interrupted[(user, channel_id)] = state
        while len(self._interrupted) > MAX_RESUMABLE_CHANNELS:
            self._interrupted.popitem(last=False)

    def resume(self, user: str, channel_id: bytes) -> Optional[ResumableChannel]:
        """Take back the interrupted channel *channel_id* of *user*, or None."""
        return self._interrupted.pop((user, channel_id), None)


_VHOSTS: weakref.WeakKeyDictionary[VirtualHost, VhostClasses] = weakref.WeakKeyDictionary()


def vhost_classes(vhost: VirtualHost) -> VhostClasses:
    """The class state of *vhost*."""
    found = _VHOSTS.get(vhost)
    if found is None:
        found = _VHOSTS[vhost] = VhostClasses(_clock_of(weakref.ref(vhost)))
    return found


def _clock_of(vhost: weakref.ref[VirtualHost]) -> Callable[[], float]:
    """The current time by *vhost*'s clock (0 without one), without keeping it alive."""

    def now() -> float:
        host = vhost()
        clock = host.clock if host is not None else None
        return clock.seconds() if clock is not None else 0.0

    return now


class ChannelClasses:
    """The class states of one server channel.

    :ivar channel_id: the 0-9 channel-id sent in channel.open-ok (empty on
        other versions).
    """

    def __init__(self, channel: ChannelLike) -> None:
        self.channel = channel
        self.channel_id = b""
        self._states: dict[type[ClassState], ClassState] = {}

    def state(self, kind: type[ClassState]) -> Any:
        """The channel's state of class *kind*, created on first use."""
        found = self._states.get(kind)
        if found is None:
            found = self._states[kind] = kind(self.channel)
        return found

    def existing(self, kind: type[ClassState]) -> Any:
        """The channel's state of class *kind*, or None when it was never used."""
        return self._states.get(kind)

    def close(self, interrupted: bool) -> None:
        """The channel ended; *interrupted* when its connection ended under it."""
        if interrupted and self.channel_id:
            channel = self.channel
            window = channel.session.prefetch
            kept = {kind: state.kept() for kind, state in self._states.items()}
            vhost_classes(channel.vhost).interrupted(
                channel.user_name,
                self.channel_id,
                ResumableChannel(
                    channel.last_queue,
                    (window.count, window.size),
                    {kind: value for kind, value in kept.items() if value is not None},
                ),
            )
        for state in self._states.values():
            state.interrupted()

    def cut_off(self, command: Command) -> None:
        """The connection broke during *command*'s content: let its class keep what arrived."""
        for state in self._states.values():
            state.cut_off(command)

    def resumed(self, state: ResumableChannel) -> None:
        """channel.resume: take over what an interrupted channel kept."""
        channel = self.channel
        channel.last_queue = state.last_queue
        channel.session.qos(state.prefetch[1], state.prefetch[0], False)
        for kind, value in state.kept.items():
            self.state(kind).resume(value)

    def flow(self, active: bool) -> None:
        """channel.flow: pause or resume every class's deliveries."""
        for state in self._states.values():
            state.flow(active)

    def tx(self, verb: str) -> None:
        """tx.select, tx.commit or tx.rollback for every class in use."""
        for state in self._states.values():
            state.tx(verb)


def channel_classes(channel: ChannelLike) -> ChannelClasses:
    """*channel*'s class states, created on first use."""
    classes = channel.classes
    if classes is None:
        classes = channel.classes = ChannelClasses(channel)
    return classes


def class_handler(method_class: type[Method]) -> Optional[Callable[[ChannelLike, Any], None]]:
    """The handler of *method_class* (file.open, say), or None if no class serves it."""
    amqp_class = method_class.NAME.split(".", 1)[0]
    state_class = _STATE_CLASSES.get(amqp_class)
    if state_class is None:
        return None
    function = getattr(state_class, method_class.HANDLER, None)
    if function is None:
        return None

    def handle(channel: ChannelLike, method: Any) -> None:
        function(channel_classes(channel).state(state_class), method)

    handle.__name__ = handle.__qualname__ = function.__name__
    handle.__doc__ = function.__doc__
    return handle
