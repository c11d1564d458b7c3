"""A result that arrives once, observed through as many Deferreds as asked for."""

from __future__ import annotations

from typing import Generic, Optional, TypeVar

from twisted.internet.defer import Deferred, fail, succeed

__all__ = ["Outcome"]

T = TypeVar("T")


class Outcome(Generic[T]):
    """Hands out Deferreds for one future result, before or after it arrives."""

    def __init__(self) -> None:
        self._waiters: list[Deferred[T]] = []
        self._value: Optional[T] = None
        self._error: Optional[BaseException] = None
        self._done = False

    @property
    def done(self) -> bool:
        """The result has arrived."""
        return self._done

    def when(self) -> Deferred[T]:
        """A Deferred for the result (already fired when it has arrived)."""
        if self._done:
            return fail(self._error) if self._error is not None else succeed(self._value)  # type: ignore[arg-type]
        waiter: Deferred[T] = Deferred()
        self._waiters.append(waiter)
        return waiter

    def succeed(self, value: T) -> None:
        """The result is *value*; fire every waiter with it."""
        self._finish(value, None)

    def fail(self, error: BaseException) -> None:
        """The result is the failure *error*; fail every waiter with it."""
        self._finish(None, error)

    def _finish(self, value: Optional[T], error: Optional[BaseException]) -> None:
        if self._done:
            return
        self._done, self._value, self._error = True, value, error
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if error is not None:
                waiter.errback(error)
            else:
                waiter.callback(value)  # type: ignore[arg-type]
