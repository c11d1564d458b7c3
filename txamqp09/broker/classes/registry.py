"""Where each channel's and each virtual host's class state lives, and dispatch.

:class:`ChannelClasses` is created for a server channel the first time one
of these classes is used on it (and for every 0-9 channel, which gets a
channel-id it can resume by). :func:`class_handler` gives the server
channel's dispatch table a handler for each method these classes serve.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional

from txamqp09.broker.classes.common import ClassState
from txamqp09.broker.classes.staging import StagingArea
from txamqp09.broker.model import VirtualHost
from txamqp09.wire.base import Method
from txamqp09.wire.frames import Command

if TYPE_CHECKING:
    from txamqp09.broker.channel import ServerChannel

__all__ = ["ChannelClasses", "ResumableChannel", "VhostClasses", "class_handler", "register", "vhost_classes"]

#: Interrupted channels a virtual host remembers for channel.resume.
MAX_RESUMABLE_CHANNELS = 1024

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

    def __init__(self, channel: ServerChannel) -> None:
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


def channel_classes(channel: ServerChannel) -> ChannelClasses:
    """*channel*'s class states, created on first use."""
    classes = channel.classes
    if classes is None:
        classes = channel.classes = ChannelClasses(channel)
    return classes


def class_handler(method_class: type[Method]) -> Optional[Callable[[ServerChannel, Any], None]]:
    """The handler of *method_class* (file.open, say), or None if no class serves it."""
    amqp_class = method_class.NAME.split(".", 1)[0]
    state_class = _STATE_CLASSES.get(amqp_class)
    if state_class is None:
        return None
    function = getattr(state_class, method_class.HANDLER, None)
    if function is None:
        return None

    def handle(channel: ServerChannel, method: Any) -> None:
        function(channel_classes(channel).state(state_class), method)

    handle.__name__ = handle.__qualname__ = function.__name__
    handle.__doc__ = function.__doc__
    return handle
