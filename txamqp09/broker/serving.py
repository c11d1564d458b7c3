"""Until when the broker may serve: the deadline a lease sets.

A broker alone serves for ever. A broker in a group serves only while its
lease lasts: :class:`ServingWindow` holds that deadline (``time.monotonic``
seconds) and tells its listeners once, when a look finds it passed. The
group moves the deadline at each renewal and looks when it falls due; the
broker looks too wherever work could start after a long stall (the
process stopped, a virtual machine paused): before handling a client's
input (:meth:`ServerConnection.dataReceived
<txamqp09.broker.server.ServerConnection.dataReceived>`) and before the
message store's reports from its threads (:meth:`ServingWindow.gate`), since
after a stall the reactor handles those before its timers. So a broker that
wakes after its deadline stops serving before it reads, delivers or
confirms anything.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

from twisted.internet.interfaces import IReactorFromThreads
from zope.interface import implementer

__all__ = ["ServingWindow"]


class ServingWindow:
    """The deadline until which the broker may serve (see the module's docstring).

    :ivar until: the deadline, ``time.monotonic`` seconds (infinite: always).
    :ivar lapsed: a look found the deadline passed (it stays so).
    """

    def __init__(self) -> None:
        self.until = math.inf
        self.lapsed = False
        self._listeners: list[Callable[[], None]] = []

    def open_until(self, until: float) -> None:
        """Serve until *until* (``time.monotonic`` seconds), even after a lapse."""
        self.until = until
        self.lapsed = False

    def when_lapsed(self, listener: Callable[[], None]) -> None:
        """Call *listener* once, when a look finds the deadline passed."""
        self._listeners.append(listener)

    def is_open(self) -> bool:
        """Whether the broker may still serve; the first look past the
        deadline tells the listeners."""
        if self.lapsed:
            return False
        if time.monotonic() < self.until:
            return True
        self.lapsed = True
        for listener in self._listeners:
            listener()
        return False

    def gate(self, reactor: IReactorFromThreads) -> IReactorFromThreads:
        """*reactor*, whose calls from threads look at this window first
        (what a message store reports with, so that nothing it reports after
        a stall is acted on before the deadline is checked)."""
        return _GatedReactor(reactor, self)


@implementer(IReactorFromThreads)
class _GatedReactor:
    """A reactor's ``callFromThread`` that looks at a window before each call."""

    def __init__(self, reactor: IReactorFromThreads, window: ServingWindow) -> None:
        self._reactor = reactor
        self._window = window

    def callFromThread(self, callable: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Call *callable* in the reactor thread, after a look at the window."""
        self._reactor.callFromThread(self._call, callable, args, kwargs)

    def _call(self, callable: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._window.is_open()
        callable(*args, **kwargs)
