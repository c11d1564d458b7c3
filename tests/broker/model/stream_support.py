"""Pieces the stream tests share: a sink that keeps messages, a store whose
writes become durable when a test says so."""

from __future__ import annotations

from typing import Any, Callable

from txamqp09.broker.model import Consumer, Message
from txamqp09.store.interface import LogRecord
from txamqp09.store.memory import MemoryStore
from txamqp09.wire import _amqp0_9_1 as spec


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
        """Every operation so far is durable now."""
        self.durable = self.last_sequence
        for listener in self.listeners:
            listener(self.durable)

    def read_log(self, vhost: str, queue: str, start: int, limit: int) -> list[LogRecord]:
        self.reads.append(start)
        return super().read_log(vhost, queue, start, limit)
