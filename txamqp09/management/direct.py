"""A channel of the API's own onto the model, for publish, get and health checks.

RabbitMQ's management plugin opens a direct AMQP channel for
``/api/exchanges/.../publish``, ``/api/queues/.../get`` and the aliveness
test; :class:`DirectSession` is the same here: a model
:class:`~txamqp09.broker.model.Session` with a sink that notes returned
messages, so that the broker's own rules (routing, TTLs, dead-lettering,
persistence, statistics) apply as for any client::

    with DirectSession(vhost) as session:
        routed = session.publish("amq.direct", "key", b"body")
        got = session.get("queue", no_ack=True)

Leaving the ``with`` block closes the session: messages got without
no_ack and not acknowledged go back to their queue, and the session's
counters join its vhost's totals.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from zope.interface import implementer

from txamqp09.broker.model import Client, Consumer, ISink, Message, Queue, Session, VirtualHost, origin
from txamqp09.wire.versions import AMQP0_9_1

__all__ = ["DirectSession"]

_PROPERTIES = AMQP0_9_1.properties[60]


@implementer(ISink)
class _Sink:
    """Notes returned messages; a direct session has no consumers and no confirms."""

    def __init__(self) -> None:
        self.returned_messages: list[Message] = []

    def deliver(self, consumer: Consumer, delivery_tag: int, redelivered: bool, message: Message) -> None:
        """Never called: a direct session does not consume."""

    def returned(self, reply_code: int, reply_text: str, message: Message) -> None:
        """Note an unroutable mandatory message."""
        self.returned_messages.append(message)

    def confirmed(self, sequence: int, ack: bool) -> None:
        """Never called: a direct session does not confirm."""

    def cancelled(self, consumer: Consumer) -> None:
        """Never called: a direct session does not consume."""


class DirectSession:
    """A short-lived model session on *vhost* (use it in a ``with`` block)."""

    def __init__(self, vhost: VirtualHost) -> None:
        self.vhost = vhost
        self.client = Client("management")
        self._sink = _Sink()
        self.session = Session(vhost, self.client, self._sink)

    def __enter__(self) -> DirectSession:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        """Requeue what was got and not acknowledged; count the session into its vhost."""
        self.session.close()
        self.client.close()

    def declare_queue(self, name: str) -> Queue:
        """Declare a transient queue *name* (or return the existing one)."""
        return self.vhost.declare_queue(name, self.client)

    def publish(
        self,
        exchange: str,
        routing_key: str,
        body: bytes,
        properties: Optional[Mapping[str, Any]] = None,
    ) -> bool:
        """Publish *body* (mandatory); whether it was routed to a queue.

        :param properties: basic content properties by field name.
        :raises AMQPError: as basic.publish would (404 no exchange, 403
            internal exchange, 406 bad expiration).
        """
        raw = _PROPERTIES(**dict(properties or {})).encode()
        message = Message(origin(exchange, routing_key), raw, body, _PROPERTIES)
        before = len(self._sink.returned_messages)
        self.session.publish(exchange, message, True, False)
        return len(self._sink.returned_messages) == before

    def get(self, queue: str, *, no_ack: bool) -> Optional[tuple[int, bool, Message]]:
        """basic.get on *queue*: (delivery tag, redelivered, message), or None if empty."""
        return self.session.get(self.vhost.queue(queue, self.client), no_ack)

    def ack(self, tag: int) -> None:
        """Acknowledge the message got with *tag*."""
        self.session.ack(tag)

    def reject(self, tag: int, requeue: bool) -> None:
        """Reject the message got with *tag*, requeueing it or not."""
        self.session.reject(tag, requeue)
