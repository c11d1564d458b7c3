"""The model's view of time: what it needs from a reactor, and no more.

Message TTLs, queue expiry and the ``time`` of x-death headers read the
current time and schedule calls through a :class:`Clock`. The server layer
passes its reactor; tests pass :class:`twisted.internet.task.Clock`. Both
fit the protocol as they are, and the model imports nothing from Twisted.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

__all__ = ["Clock", "Call"]


class Call(Protocol):
    """A call scheduled with :meth:`Clock.callLater`."""

    def cancel(self) -> None:
        """Do not make the call."""


class Clock(Protocol):
    """Seconds since the epoch (or any fixed origin) and delayed calls."""

    def seconds(self) -> float:
        """The current time, in seconds."""

    def callLater(self, delay: float, callable: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call *callable* after *delay* seconds; a :class:`Call`."""
