"""Remote procedure calls over RabbitMQ's direct reply-to.

An :class:`RPCClient` consumes the ``amq.rabbitmq.reply-to`` pseudo-queue
on its channel, publishes each request with that pseudo-queue as
``reply_to`` and a fresh ``correlation_id``, and fires the call's Deferred
with the reply that carries the same ``correlation_id``. No reply queue is
declared: the broker (RabbitMQ, or this project's) gives the channel a
reply name and sends the replies straight to it. The server side needs
nothing special: it publishes its answer to the default exchange with the
request's ``reply_to`` as routing key and its ``correlation_id``::

    rpc = await channel.rpc_client()
    reply = await rpc.call(b"7", routing_key="square", timeout=5)
    print(reply.body)
    await rpc.stop()

Replies need no acknowledgement, and a reply whose requester has gone is
dropped by the broker: a request is answered at most once. A call fails
with :class:`~twisted.internet.defer.TimeoutError` after its *timeout*, and
with the :class:`~txamqp09.client.errors.ChannelClosed` or
:class:`~txamqp09.client.errors.ConnectionClosed` that ended the channel.
"""

from __future__ import annotations

import uuid
from typing import Any, Mapping, Optional, Protocol

from twisted.internet.defer import Deferred, fail, succeed

from txamqp09.client.base import BodyLike, ChannelLike, PropertiesLike
from txamqp09.client.consumer import Consumer, DeliveryCallback
from txamqp09.client.errors import ChannelEnding, ClientError
from txamqp09.client.message import Message
from txamqp09.wire.versions import DIRECT_REPLY_TO

__all__ = ["DIRECT_REPLY_TO", "RPCChannel", "RPCClient", "RPCStopped"]


class RPCChannel(ChannelLike, Protocol):
    """A channel as an RPC client uses it (a :class:`~txamqp09.client.channel.Channel`)."""

    def basic_consume(
        self, queue: str = "", callback: Optional[DeliveryCallback] = None, *, no_ack: bool = False
    ) -> Deferred[Consumer]:
        """Start consuming *queue*."""

    def basic_publish(
        self, body: BodyLike, exchange: str = "", routing_key: str = "", properties: PropertiesLike = None
    ) -> Optional[Deferred[int]]:
        """Publish a message."""

    def whenClosed(self) -> Deferred[ChannelEnding]:
        """Fires with what ended the channel."""


class RPCStopped(ClientError):
    """The RPC client stopped before the reply came."""


class RPCClient:
    """Calls whose replies come back through direct reply-to, on one channel.

    Make one with :meth:`Channel.rpc_client
    <txamqp09.client.channel.Channel.rpc_client>` (or :meth:`start`).

    :ivar channel: the channel it publishes and consumes on.
    """

    def __init__(self, channel: RPCChannel) -> None:
        self.channel = channel
        self._consumer: Optional[Consumer] = None
        #: The Deferred of each call waiting for its reply, by correlation id.
        self._waiting: dict[str, Deferred[Message]] = {}

    @classmethod
    def start(cls, channel: RPCChannel) -> Deferred[RPCClient]:
        """A client consuming its replies on *channel*; fires once the
        broker agreed (its basic.consume-ok)."""
        client = cls(channel)
        consuming = channel.basic_consume(DIRECT_REPLY_TO, client._replied, no_ack=True)
        channel.whenClosed().addCallback(client._failWaiting)
        return consuming.addCallback(client._started)

    def _started(self, consumer: Consumer) -> RPCClient:
        self._consumer = consumer
        return self

    @property
    def waiting(self) -> int:
        """Calls waiting for their reply."""
        return len(self._waiting)

    def call(
        self,
        body: BodyLike,
        routing_key: str,
        exchange: str = "",
        properties: Optional[Mapping[str, Any]] = None,
        *,
        timeout: Optional[float] = None,
    ) -> Deferred[Message]:
        """Publish a request; fires with the reply
        (a :class:`~txamqp09.client.message.Message`).

        :param properties: the request's other properties, as a mapping
            (``reply_to`` and ``correlation_id`` are the client's).
        :param timeout: seconds after which the call fails with
            :class:`~twisted.internet.defer.TimeoutError` (a later reply is
            ignored); None waits as long as the channel lives.
        """
        if self._consumer is None or not self._consumer.active:
            return fail(RPCStopped("the RPC client does not consume its replies: start it first"))
        correlation_id = uuid.uuid4().hex

        def forget(_: Deferred[Message]) -> None:
            self._waiting.pop(correlation_id, None)

        waiting: Deferred[Message] = Deferred(forget)
        self._waiting[correlation_id] = waiting
        self.channel.basic_publish(
            body, exchange, routing_key,
            {**(properties or {}), "reply_to": DIRECT_REPLY_TO, "correlation_id": correlation_id},
        )
        if timeout is not None:
            waiting.addTimeout(timeout, self.channel.connection.clock)
        return waiting

    def _replied(self, reply: Message) -> None:
        """A reply: fire its call (an unknown or late one is ignored)."""
        waiting = self._waiting.pop(str(reply.properties.correlation_id), None)  # type: ignore[attr-defined]
        if waiting is not None:
            waiting.callback(reply)

    def _failWaiting(self, ending: ChannelEnding | RPCStopped) -> None:
        """Fail every waiting call with *ending*."""
        waiting, self._waiting = self._waiting, {}
        for call in waiting.values():
            call.errback(ending)

    def stop(self) -> Deferred[Any]:
        """Stop consuming replies (basic.cancel); the calls still waiting
        fail with :class:`RPCStopped`. Fires once the broker confirmed."""
        self._failWaiting(RPCStopped("the RPC client stopped before the reply came"))
        if self._consumer is None:
            return succeed(None)
        return self._consumer.cancel()
