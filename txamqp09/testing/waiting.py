"""Waiting on a condition instead of sleeping.

:func:`eventually` looks at a condition until it holds, on the clock it is
given: the reactor for tests against a real broker over loopback, a ``Clock``
for tests that drive time themselves::

    from twisted.internet import reactor
    from txamqp09.testing.waiting import eventually

    message = await eventually(lambda: channel.basic_get("dead"), reactor, timeout=10)
"""

from __future__ import annotations

import inspect
from typing import Awaitable, Callable, TypeVar, Union

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import deferLater

__all__ = ["eventually", "NeverHappened"]

T = TypeVar("T")


class NeverHappened(AssertionError):
    """The condition given to :func:`eventually` did not hold in time."""


def eventually(
    condition: Callable[[], Union[T, Awaitable[T]]],
    clock: IReactorTime,
    timeout: float = 10.0,
    interval: float = 0.01,
    what: str = "",
) -> Deferred[T]:
    """Fires with the first true result of *condition()*, looking every *interval* seconds.

    *condition* may return a value or something to await (a Deferred, a
    coroutine), e.g. a ``basic_get`` that gives ``None`` until a message is
    there. Fails with :class:`NeverHappened` (naming *what*, or the condition)
    once *timeout* seconds of *clock* passed without a true result.
    """

    async def look() -> T:
        give_up = clock.seconds() + timeout
        while True:
            result = condition()
            if inspect.isawaitable(result):
                result = await result
            if result:
                return result  # type: ignore[return-value]
            if clock.seconds() >= give_up:
                raise NeverHappened(f"{what or repr(condition)} did not hold within {timeout} s")
            await deferLater(clock, interval, lambda: None)

    return ensureDeferred(look())
