"""Shared pieces of the broker tests: messages, a recording sink, and a test
case with this project's broker on a loopback port."""

from __future__ import annotations

from typing import Any, Callable, Optional, TypeVar

from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from txamqp09.broker.model import Client, Consumer, Message, Session, VirtualHost
from txamqp09.testing.broker import LoopbackBroker
from txamqp09.wire import _amqp0_9_1 as spec
from txamqp09.wire.fields import encode_shortstr


def message(
    body: bytes = b"body",
    routing_key: str = "",
    exchange: str = "",
    publisher: Any = None,
    **properties: Any,
) -> Message:
    """A message as the server builds it from a publish with basic *properties*."""
    return Message(
        (exchange, routing_key, encode_shortstr(exchange) + encode_shortstr(routing_key), publisher),
        spec.BasicProperties(**properties).encode(),
        body,
        spec.BasicProperties,
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


T = TypeVar("T")


class LoopbackTestCase(TestCase):
    """Starts a broker on 127.0.0.1 before each test and stops it after.

    Blocking clients run through :meth:`in_thread` while the broker serves
    them from the reactor thread.
    """

    timeout = 60
    #: Options for the broker's connections.
    broker_options: dict[str, Any] = {}

    def setUp(self) -> None:
        self.server = LoopbackBroker(**self.broker_options)
        self.port = self.server.start()
        self.addCleanup(self.server.stop)

    def in_thread(self, function: Callable[..., T], *args: Any) -> Deferred[T]:
        """Run a blocking client function in a thread; its result, as a Deferred."""
        return deferToThread(function, *args)

    def queue(self, name: str) -> Any:
        """The model's queue *name* in vhost ``/``."""
        return self.server.broker.vhosts["/"].queues[name]


def wait_on_node_clock(port: int, seconds: float, patience: float = 10.0) -> None:
    """Return once *seconds* have passed on the clock of the broker on *port*
    (a real one, e.g. RabbitMQ): a probe message with that TTL is dead-lettered
    to a queue this waits on. Blocking (pika): call it from a thread."""
    import pika

    connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
    try:
        channel = connection.channel()
        expired = channel.queue_declare("", exclusive=True).method.queue
        probe = channel.queue_declare("", exclusive=True, arguments={
            "x-message-ttl": int(seconds * 1000),
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": expired,
        }).method.queue
        channel.basic_publish("", probe, b"tick")
        method, _, _ = next(channel.consume(expired, auto_ack=True, inactivity_timeout=patience))
        if method is None:
            raise AssertionError(f"the broker's clock did not reach {seconds} s within {patience} s")
    finally:
        connection.close()
