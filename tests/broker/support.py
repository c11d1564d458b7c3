"""Shared pieces of the broker tests: a recording sink and message factory."""

from __future__ import annotations

from typing import Any, Optional

from txamqp09.broker.model import Client, Consumer, Message, Session, VirtualHost
from txamqp09.wire import _amqp0_9_1 as spec
from txamqp09.wire.fields import encode_shortstr


def message(
    body: bytes = b"body",
    routing_key: str = "",
    exchange: str = "",
    headers: Optional[dict[str, Any]] = None,
    publisher: Any = None,
) -> Message:
    """A message as the server would build it from a publish."""
    properties = spec.BasicProperties(headers=headers).encode()
    return Message(
        exchange,
        routing_key,
        encode_shortstr(exchange) + encode_shortstr(routing_key),
        properties,
        body,
        spec.BasicProperties,
        publisher,
    )


class RecordingSink:
    """A sink that remembers what the model asked it to send."""

    def __init__(self) -> None:
        self.deliveries: list[tuple[str, int, bool, bytes]] = []
        self.returns: list[tuple[int, str, bytes]] = []
        self.confirms: list[tuple[int, bool]] = []
        self.cancels: list[str] = []

    def deliver(self, consumer: Consumer, delivery_tag: int, redelivered: bool, message: Message) -> None:
        self.deliveries.append((consumer.tag, delivery_tag, redelivered, message.body))

    def returned(self, reply_code: int, reply_text: str, message: Message) -> None:
        self.returns.append((reply_code, reply_text, message.body))

    def confirmed(self, sequence: int, ack: bool) -> None:
        self.confirms.append((sequence, ack))

    def cancelled(self, consumer: Consumer) -> None:
        self.cancels.append(consumer.tag)

    def bodies(self) -> list[bytes]:
        """The bodies delivered so far, in order."""
        return [body for _, _, _, body in self.deliveries]


def session(vhost: VirtualHost, client: Optional[Client] = None, **options: Any) -> tuple[Session, RecordingSink]:
    """A session of *client* (a new one if omitted) with a recording sink."""
    sink = RecordingSink()
    return Session(vhost, client or Client("test"), sink, **options), sink
