"""One end of a link between brokers: connecting to it, and waiting to retry.

A shovel or a federation link holds a connection to each of its ends,
made with this project's client (:mod:`txamqp09.client`).
:func:`connect_first` tries an end's URIs in turn and gives the first
connection that opens; :func:`ensure_queue` declares a queue the way
RabbitMQ's shovel does (kept as it is when it exists, declared durable
otherwise); :class:`Backoff` spaces out reconnections; :func:`describe`
words a failure for the status and the log, never with a password.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.python.failure import Failure

from txamqp09.client import ChannelClosed, ClientConnection, connect
from txamqp09.links.uri import LinkUri, LocalAddress
from txamqp09.wire.errors import AMQPError

__all__ = ["Backoff", "LinkDown", "connect_first", "describe", "ensure_queue"]

#: The longest wait between two reconnections, in seconds.
MAX_BACKOFF = 60.0
_NOT_FOUND = 404


class LinkDown(Exception):
    """No URI of an end could be connected to; the message says why, per URI."""


def describe(error: Any) -> str:
    """A one-line text for *error* (an exception or a Failure)."""
    if isinstance(error, Failure):
        error = error.value
    if isinstance(error, AMQPError):
        return f"{error.reply_code} {error.reply_text}"
    text = str(error) or type(error).__name__
    return " ".join(text.split())


class Backoff:
    """Waits between reconnections: *initial* seconds, doubling after each
    failure up to *maximum* (or *initial* if larger), back to *initial*
    once a connection has worked."""

    def __init__(self, initial: float, maximum: float = MAX_BACKOFF) -> None:
        self.initial = initial
        self.maximum = max(initial, maximum)
        self._next = initial

    def next(self) -> float:
        """The wait before the next attempt (and double the one after)."""
        delay = self._next
        self._next = min(self.maximum, max(self._next * 2, self.initial))
        return delay

    def reset(self) -> None:
        """A connection worked: the next wait is *initial* again."""
        self._next = self.initial


def connect_first(
    reactor: Any,
    uris: Sequence[LinkUri],
    local: Callable[[], Optional[LocalAddress]],
    connection_name: str,
    start: int = 0,
) -> Deferred[tuple[ClientConnection, LinkUri]]:
    """Connect to *uris* in turn, from the one at *start*; fires with the
    first open connection and its URI.

    :param local: where this broker listens, for URIs without a host.
    :param connection_name: the ``connection_name`` client property (shown
        by the far broker's management UI).
    :raises LinkDown: (as the Deferred's failure) none of them opened.
    """

    async def attempt() -> tuple[ClientConnection, LinkUri]:
        problems: list[str] = []
        for index in range(len(uris)):
            uri = uris[(start + index) % len(uris)]
            try:
                parameters = uri.parameters(local(), client_properties={"connection_name": connection_name})
                connection = await connect(reactor, parameters)
            except Exception as error:
                problems.append(f"{uri.redacted}: {describe(error)}")
                continue
            return connection, uri
        raise LinkDown("; ".join(problems))

    return ensureDeferred(attempt())


def ensure_queue(connection: ClientConnection, queue: str, arguments: dict[str, Any]) -> Deferred[Any]:
    """Make sure *queue* exists: kept as it is if it does (a passive
    declare), declared durable with *arguments* otherwise. Fires with the
    queue.declare-ok (its ``message_count``)."""

    async def ensure() -> Any:
        channel = await connection.channel()
        try:
            found = await channel.queue_declare(queue, passive=True)
        except ChannelClosed as error:
            if error.reply_code != _NOT_FOUND:
                raise
        else:
            await channel.close()
            return found
        channel = await connection.channel()
        declared = await channel.queue_declare(queue, durable=True, arguments=arguments)
        await channel.close()
        return declared

    return ensureDeferred(ensure())
