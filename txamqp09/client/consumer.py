"""Consumers: a queue's deliveries to a callback or through ``async for``.

A consumer either calls its callback for every delivery, or buffers
deliveries for an ``async for`` loop. Either way the application can fall
behind: buffered messages, or callbacks whose Deferred or coroutine has not
finished yet, form the consumer's *backlog*. When the backlog reaches
``max_backlog`` the consumer asks its connection to stop reading from the
socket (``pauseProducing``), so that the server's TCP flow control holds
further messages back; reading resumes when the backlog is down to half.
With a prefetch count (``basic_qos``) below ``max_backlog`` the server never
sends that many unacknowledged messages, and reading is never paused.
"""

from __future__ import annotations

import inspect
from collections import deque
from typing import Any, Callable, Optional, Protocol

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from txamqp09.client.base import ChannelLike
from txamqp09.client.message import Message

__all__ = ["Consumer", "ConsumingChannel", "DeliveryCallback", "DEFAULT_MAX_BACKLOG"]

#: Called with each delivery; may return a Deferred or a coroutine, which
#: counts towards the backlog until it finishes.
DeliveryCallback = Callable[[Message], Any]

#: The backlog at which a consumer pauses its connection's reading.
DEFAULT_MAX_BACKLOG = 1000

_log = Logger()


class ConsumingChannel(ChannelLike, Protocol):
    """A channel as its consumers see it: one that also cancels them."""

    def cancelConsumer(self, consumer: Consumer) -> Deferred[Any]:
        """Cancel *consumer*; fires once the server confirmed."""


class Consumer:
    """One subscription to a queue, made by :meth:`Channel.basic_consume`.

    ``async for message in consumer`` yields deliveries until the consumer
    is cancelled (by :meth:`cancel` or by the server), and raises
    :class:`~txamqp09.client.errors.ChannelClosed` or
    :class:`~txamqp09.client.errors.ConnectionClosed` when its channel or
    connection ends first.

    :ivar tag: the consumer tag.
    :ivar queue: the queue consumed from.
    :ivar no_ack: deliveries need no acknowledgement.
    :ivar cancelled_by_server: the server cancelled it (the queue was
        deleted, for instance).
    """

    def __init__(
        self,
        channel: ConsumingChannel,
        queue: str,
        tag: str,
        *,
        no_ack: bool = False,
        callback: Optional[DeliveryCallback] = None,
        max_backlog: int = DEFAULT_MAX_BACKLOG,
        amqp_class: str = "basic",
    ) -> None:
        self.channel = channel
        self.queue = queue
        self.tag = tag
        self.no_ack = no_ack
        self.max_backlog = max(1, max_backlog)
        #: The AMQP class that consumes: "basic", or "file" / "stream" on 0-8 and 0-9.
        self.amqp_class = amqp_class
        self.cancelled_by_server = False
        self._callback = callback
        self._buffer: deque[Message] = deque()
        self._waiter: Optional[Deferred[Optional[Message]]] = None
        self._unfinished = 0
        self._pressing = False
        self._active = True
        self._error: Optional[BaseException] = None
        self._cancel_handlers: list[Callable[[Consumer], object]] = []

    @property
    def active(self) -> bool:
        """Deliveries may still arrive."""
        return self._active

    @property
    def backlog(self) -> int:
        """Deliveries the application has not finished with."""
        return len(self._buffer) + self._unfinished

    # -- deliveries ----------------------------------------------------------

    def deliver(self, message: Message) -> None:
        """Hand one delivery to the callback, a waiting iterator, or the buffer."""
        if self._callback is not None:
            self._call(message)
        elif self._waiter is not None:
            waiter, self._waiter = self._waiter, None
            waiter.callback(message)
        else:
            self._buffer.append(message)
            if len(self._buffer) >= self.max_backlog:
                self._press()

    def _call(self, message: Message) -> None:
        assert self._callback is not None
        try:
            result = self._callback(message)
        except Exception:
            _log.failure("consumer {tag} callback failed on {message}", tag=self.tag, message=message)
            return
        if result is None:
            return
        if inspect.iscoroutine(result):
            result = ensureDeferred(result)
        if isinstance(result, Deferred):
            self._unfinished += 1
            if self._unfinished >= self.max_backlog:
                self._press()
            result.addBoth(self._callbackFinished, message)

    def _callbackFinished(self, result: object, message: Message) -> None:
        self._unfinished -= 1
        if isinstance(result, Failure):
            _log.failure(
                "consumer {tag} callback failed on {message}",
                failure=result,
                tag=self.tag,
                message=message,
            )
        self._relieve()

    def _press(self) -> None:
        if not self._pressing:
            self._pressing = True
            self.channel.connection.pauseReading(self)

    def _relieve(self) -> None:
        if self._pressing and self.backlog <= self.max_backlog // 2:
            self._pressing = False
            self.channel.connection.resumeReading(self)

    # -- async iteration -----------------------------------------------------

    def __aiter__(self) -> Consumer:
        if self._callback is not None:
            raise TypeError("a consumer with a callback cannot also be iterated")
        return self

    async def __anext__(self) -> Message:
        if self._buffer:
            message = self._buffer.popleft()
            self._relieve()
            return message
        if not self._active:
            if self._error is not None:
                raise self._error
            raise StopAsyncIteration
        if self._waiter is not None:
            raise RuntimeError(f"consumer {self.tag} is already being awaited")
        self._waiter = Deferred()
        delivered = await self._waiter
        if delivered is None:
            raise StopAsyncIteration
        return delivered

    # -- ending --------------------------------------------------------------

    def cancel(self) -> Deferred[Any]:
        """Stop the deliveries (basic.cancel); fires once the server confirmed.

        Messages delivered before that are still yielded or called back.
        """
        return self.channel.cancelConsumer(self)

    def onCancel(self, handler: Callable[[Consumer], object]) -> None:
        """Call *handler* with this consumer when the server cancels it."""
        self._cancel_handlers.append(handler)

    def serverCancelled(self) -> None:
        """The server cancelled the consumer (basic.cancel from the server)."""
        self.cancelled_by_server = True
        self.finish(None)
        for handler in self._cancel_handlers:
            try:
                handler(self)
            except Exception:
                _log.failure("cancel handler of consumer {tag} failed", tag=self.tag)

    def finish(self, error: Optional[BaseException]) -> None:
        """No more deliveries: end iteration (raising *error* when given)."""
        if not self._active:
            return
        self._active = False
        self._error = error
        if self._pressing:
            self._pressing = False
            self.channel.connection.resumeReading(self)
        waiter, self._waiter = self._waiter, None
        if waiter is None:
            return
        if error is None:
            waiter.callback(None)
        else:
            waiter.errback(error)

    def __repr__(self) -> str:
        state = "active" if self._active else "finished"
        return f"<Consumer {self.tag!r} on {self.queue!r} ({state}, backlog {self.backlog})>"
