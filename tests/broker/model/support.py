"""A model virtual host on a Clock, and messages with any basic properties."""

from __future__ import annotations

from typing import Any, Optional

from twisted.internet.task import Clock

from tests.broker.support import RecordingSink, session
from txamqp09.broker.model import Client, Message, Session, VirtualHost
from txamqp09.wire import _amqp0_9_1 as spec
from txamqp09.wire.fields import encode_shortstr


def message(body: bytes = b"body", routing_key: str = "", exchange: str = "", **properties: Any) -> Message:
    """A message as the server builds it from a publish with *properties*."""
    return Message(
        exchange, routing_key, encode_shortstr(exchange) + encode_shortstr(routing_key),
        spec.BasicProperties(**properties).encode(), body, spec.BasicProperties,
    )


class World:
    """A virtual host on a Clock, a client and a session with a recording sink."""

    def __init__(self, vhost: Optional[VirtualHost] = None) -> None:
        self.clock = Clock()
        if vhost is None:
            vhost = VirtualHost("/", clock=self.clock)
        else:
            vhost.clock = self.clock
        self.vhost = vhost
        self.client = Client("c")
        self.session: Session
        self.sink: RecordingSink
        self.session, self.sink = session(self.vhost, self.client)

    def declare(self, name: str, arguments: Optional[dict[str, Any]] = None, **flags: Any) -> Any:
        """Declare queue *name* with *arguments* and queue.declare *flags*."""
        return self.vhost.declare_queue(name, self.client, arguments=arguments, **flags)

    def publish(self, routing_key: str, body: bytes = b"body", exchange: str = "", **properties: Any) -> Message:
        """Publish a message through the session; the message."""
        published = message(body, routing_key, exchange, **properties)
        self.session.publish(exchange, published, False, False)
        return published

    def get(self, queue: str, no_ack: bool = True) -> Optional[tuple[int, Message]]:
        """basic.get: (tag, message) or None."""
        got = self.session.get(self.vhost.queues[queue], no_ack)
        return None if got is None else (got[0], got[2])

    def bodies(self, queue: str) -> list[Optional[bytes]]:
        """The bodies ready in *queue*, in delivery order."""
        return [entry[1].body for entry in self.vhost.queues[queue].messages]
