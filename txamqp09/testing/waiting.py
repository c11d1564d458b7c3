"""Waiting on a condition instead of sleeping.

:func:`eventually` looks at a condition until it holds, on the clock it is
given: the reactor for tests against a real broker over loopback, a ``Clock``
for tests that drive time themselves::

    from twisted.internet import reactor
    from txamqp09.testing.waiting import eventually

    message = await eventually(lambda: channel.basic_get("dead"), reactor, timeout=10)

:func:`acknowledged_messages` waits the same way for a number of messages
of a queue, taking and acknowledging each as it comes.
"""

from __future__ import annotations

import inspect
from typing import Any, Awaitable, Callable, TypeVar, Union

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import deferLater

__all__ = ["acknowledged_messages", "eventually", "NeverHappened"]

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


async def acknowledged_messages(
    channel: Any, queue: str, count: int, clock: IReactorTime, timeout: float = 10.0, interval: float = 0.01
) -> list[Any]:
    """The next *count* messages of *queue*, each taken with ``basic_get`` on
    the client *channel* and acknowledged, waiting (as :func:`eventually`)
    while the queue is empty before *count* came."""
    got: list[Any] = []

    async def all_came() -> bool:
        while len(got) < count:
            message = await channel.basic_get(queue)
            if message is None:
                return False
            message.ack()
            got.append(message)
        return True

    came: Deferred[bool] = eventually(all_came, clock, timeout, interval, f"{count} messages in {queue}")
    await came
    return got
