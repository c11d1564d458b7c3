"""A broker on loopback and the client on a chosen protocol version."""

from __future__ import annotations

from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.trial.unittest import TestCase

from txamqp09.broker.classes.registry import ChannelClasses
from txamqp09.client import Channel, ClientConnection, Message, connect
from txamqp09.testing.broker import LoopbackBroker

__all__ = ["LiveClassTestCase", "Collector"]


class Collector:
    """A consumer callback that records messages and fires once *count* arrived."""

    def __init__(self, count: int = 1) -> None:
        self.count = count
        self.messages: list[Message] = []
        self.done: Deferred[list[Message]] = Deferred()
        self._waiting: list[tuple[int, Deferred[None]]] = []

    def __call__(self, message: Message) -> None:
        self.messages.append(message)
        if len(self.messages) == self.count:
            self.done.callback(self.messages)
        ready = [waiter for count, waiter in self._waiting if count <= len(self.messages)]
        self._waiting = [(count, waiter) for count, waiter in self._waiting if count > len(self.messages)]
        for waiter in ready:
            waiter.callback(None)

    def arrived(self, count: int) -> Deferred[None]:
        """Fires once *count* messages have arrived."""
        waiter: Deferred[None] = Deferred()
        if len(self.messages) >= count:
            waiter.callback(None)
        else:
            self._waiting.append((count, waiter))
        return waiter


class LiveClassTestCase(TestCase):
    """Starts a broker on 127.0.0.1; the client speaks :attr:`version`."""

    timeout = 30
    version = "0-9"
    broker_options: dict[str, Any] = {}

    def setUp(self) -> None:
        self.server = LoopbackBroker(**self.broker_options)
        self.server.start()
        self.addCleanup(self.server.stop)

    async def connect(self, **changes: Any) -> ClientConnection:
        connection = await connect(reactor, self.server.url, version=self.version, **changes)
        self.addCleanup(connection.disconnect)
        return connection

    async def channel(self, **changes: Any) -> Channel:
        return await (await self.connect(**changes)).channel()

    async def declare(self, channel: Channel, name: str) -> str:
        """Declare the non-exclusive queue *name*."""
        await channel.queue_declare(name)
        return name

    def queue(self, name: str) -> Any:
        """The model's queue *name*."""
        return self.server.broker.vhosts["/"].queues[name]

    def server_classes(self) -> ChannelClasses:
        """The class state of the only channel of the only connection to the broker."""
        (connection,) = self.server.factory.connections
        (channel,) = connection.channels.values()
        assert channel.classes is not None
        return channel.classes

    async def round_trip(self, channel: Channel) -> None:
        """Wait until the broker handled everything sent on *channel* before."""
        await channel.request("exchange.declare", exchange="amq.direct", type="direct", passive=True)
