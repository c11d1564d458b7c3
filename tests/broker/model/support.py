"""Pieces the model tests share: a virtual host on a Clock, messages for the
store, a sink that keeps messages, and a store whose writes become durable
when a test says so."""

from __future__ import annotations

from typing import Any, Callable, Optional

from twisted.internet.task import Clock

from tests.broker.support import RecordingSink, message, session
from txamqp09.broker.model import Client, Consumer, Message, Session, VirtualHost
from txamqp09.store.chunks import LogChunk
from txamqp09.store.memory import MemoryStore
from txamqp09.wire import _amqp0_9_1 as spec


def message_for_store(
    body: bytes, routing_key: str = "q", exchange: str = "", mode: int = 2, **properties: Any
) -> Message:
    """A message as the server builds it from a publish, persistent unless *mode* says otherwise."""
    return message(body, routing_key, exchange, delivery_mode=mode or None, **properties)


def stream_message(body: bytes, mode: int = 1, publisher: Any = None) -> Message:
    """A message published to the default exchange with routing key ``s``."""
    return message(body, "s", publisher=publisher, delivery_mode=mode)


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


def headers_of(message: Message) -> dict[str, Any]:
    """The headers a delivered message carries."""
    return spec.BasicProperties.decode(message.raw_properties, 0).headers or {}


class MessageSink:
    """A sink that keeps each delivered message with its tag."""

    def __init__(self) -> None:
        self.deliveries: list[tuple[str, int, Message]] = []
        self.cancels: list[str] = []

    def deliver(self, consumer: Consumer, delivery_tag: int, redelivered: bool, message: Message) -> None:
        assert not redelivered, "streams never redeliver"
        self.deliveries.append((consumer.tag, delivery_tag, message))

    def returned(self, reply_code: int, reply_text: str, message: Message) -> None:
        raise AssertionError("nothing is returned in these tests")

    def confirmed(self, sequence: int, ack: bool) -> None:
        """Confirms are not looked at here."""

    def cancelled(self, consumer: Consumer) -> None:
        self.cancels.append(consumer.tag)

    def offsets(self) -> list[int]:
        """The x-stream-offset header of each delivery, in order."""
        return [headers_of(message)["x-stream-offset"] for _, _, message in self.deliveries]

    def bodies(self) -> list[bytes]:
        return [message.body or b"" for _, _, message in self.deliveries]

    def tags(self) -> list[int]:
        return [tag for _, tag, _ in self.deliveries]


class LaggingStore(MemoryStore):
    """A memory store whose operations become durable only through :meth:`flush`."""

    def __init__(self) -> None:
        super().__init__()
        self.durable = 0
        self.listeners: list[Callable[[int], None]] = []
        #: Offsets asked for by read_log, to show what came from "disk".
        self.reads: list[int] = []

    @property
    def durable_sequence(self) -> int:
        return self.durable

    def add_durable_listener(self, listener: Callable[[int], None]) -> None:
        self.listeners.append(listener)

    def flush(self) -> None:
        """Every operation so far is durable now (and the chunks appended so
        far are closed, as a writer taking them closes them)."""
        for chunks in self.logs.values():
            for chunk in chunks:
                chunk.take()
        self.durable = self.last_sequence
        for listener in self.listeners:
            listener(self.durable)

    def read_log(self, vhost: str, queue: str, start: int) -> Optional[LogChunk]:
        self.reads.append(start)
        return super().read_log(vhost, queue, start)
