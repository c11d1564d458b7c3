"""This project's broker and clients of this package, connected in memory.

A :class:`MemoryBroker` serves clients whose bytes never touch a socket: each
:meth:`~MemoryBroker.connect` joins a
:class:`~txamqp09.client.connection.ClientConnection` and a
:class:`~txamqp09.broker.server.ServerConnection` through two
``StringTransport`` objects, and :meth:`~MemoryBroker.flush` carries what each
side wrote to the other until both are quiet (the way ``twisted.test.iosim``
pumps two protocols). Broker and clients share one ``Clock``, so TTLs,
heartbeats and timeouts happen only when the test advances it.

Drive a whole scenario with :meth:`~MemoryBroker.run`, which pumps until a
Deferred or coroutine is done and hands back its result::

    from txamqp09.testing.memory import MemoryBroker

    house = MemoryBroker()
    connection = house.open()

    async def scenario():
        channel = await connection.channel()
        await channel.queue_declare("jobs")
        channel.basic_publish(b"one", routing_key="jobs")
        return await channel.basic_get("jobs", no_ack=True)

    assert house.run(scenario()).body == b"one"
"""

from __future__ import annotations

from typing import Any, Awaitable, Optional, TypeVar, Union

from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.error import ConnectionDone
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure

from txamqp09.broker.model import Broker
from txamqp09.broker.server import ServerConnection, ServerFactory
from txamqp09.client.connection import ClientConnection
from txamqp09.client.params import ConnectionParameters

__all__ = ["MemoryBroker", "MemoryConnection", "Stalled"]

T = TypeVar("T")

#: How many rounds :meth:`MemoryBroker.flush` makes before it calls the
#: exchange endless (two peers that always answer each other).
MAX_ROUNDS = 10000


class Stalled(AssertionError):
    """:meth:`MemoryBroker.run` ran out of bytes to move before the awaited result."""


class MemoryConnection:
    """One client joined to one server connection by two in-memory transports.

    :param client: the client's protocol.
    :param server: the server's protocol.
    :param number: distinguishes the client's address (port ``40000 + number``).
    """

    def __init__(self, client: ClientConnection, server: ServerConnection, number: int) -> None:
        self.client = client
        self.server = server
        broker_address = IPv4Address("TCP", "127.0.0.1", 5672)
        client_address = IPv4Address("TCP", "127.0.0.1", 40000 + number)
        self.client_transport = StringTransport(hostAddress=client_address, peerAddress=broker_address)
        self.server_transport = StringTransport(hostAddress=broker_address, peerAddress=client_address)
        self.closed = False
        server.makeConnection(self.server_transport)
        client.makeConnection(self.client_transport)

    def pump(self) -> bool:
        """Move what each side wrote to the other once; whether anything moved.

        When either side has closed its transport and nothing is left to move,
        both sides lose the connection.
        """
        if self.closed:
            return False
        to_server, to_client = self.client_transport.value(), self.server_transport.value()
        self.client_transport.clear()
        self.server_transport.clear()
        if to_server:
            self.server.dataReceived(to_server)
        if to_client:
            self.client.dataReceived(to_client)
        if to_server or to_client:
            return True
        if self.client_transport.disconnecting or self.server_transport.disconnecting:
            self.closed = True
            self.client_transport.disconnected = self.server_transport.disconnected = True
            self.server.connectionLost(Failure(ConnectionDone("closed in memory")))
            self.client.connectionLost(Failure(ConnectionDone("closed in memory")))
            return True
        return False


class MemoryBroker:
    """This project's broker on a ``Clock``, with in-memory clients.

    :param broker: the model to serve (a fresh one with vhost ``/`` if omitted).
    :param clock: the clock of the broker and of its clients (a new ``Clock``
        if omitted); the test advances it.
    :param options: passed to each :class:`~txamqp09.broker.server.ServerConnection`
        (``heartbeat``, ``frame_max``, ...).
    """

    def __init__(self, broker: Optional[Broker] = None, clock: Optional[Clock] = None, **options: Any) -> None:
        self.clock = clock if clock is not None else Clock()
        self.factory = ServerFactory(self.clock, broker, **options)
        #: Every connection made by :meth:`connect`, open or closed.
        self.connections: list[MemoryConnection] = []

    @property
    def broker(self) -> Broker:
        """The model the broker serves (inspect queues and exchanges here)."""
        return self.factory.broker

    def connect(self, **parameters: Any) -> ClientConnection:
        """A new client, connected but not yet opened (:meth:`flush` opens it).

        *parameters* are :class:`~txamqp09.client.params.ConnectionParameters`
        (``username``, ``virtual_host``, ``version``, ...).
        """
        server = self.factory.buildProtocol(None)
        if server is None:
            raise RuntimeError("the broker refused the connection (connection_max reached)")
        client = ClientConnection(ConnectionParameters(**parameters), self.clock)
        self.connections.append(MemoryConnection(client, server, len(self.connections)))
        return client

    def open(self, **parameters: Any) -> ClientConnection:
        """A new client, opened (handshake done): :meth:`connect` then :meth:`run`."""
        client = self.connect(**parameters)
        return self.run(client.whenOpened())

    def flush(self) -> bool:
        """Move bytes between every client and the broker until all are quiet.

        Calls due now on the clock run between rounds. Whether anything moved.
        """
        moved = False
        for _ in range(MAX_ROUNDS):
            self.clock.advance(0)
            if not any([connection.pump() for connection in self.connections]):
                return moved
            moved = True
        raise AssertionError(f"the peers were still talking after {MAX_ROUNDS} rounds")

    def run(self, work: Union[Deferred[T], Awaitable[T]]) -> T:
        """Pump until *work* (a Deferred or a coroutine) is done; its result.

        Its failure is raised here. :class:`Stalled` is raised when nothing is
        left to move and *work* is still waiting (for the clock, say: advance
        :attr:`clock` and call :meth:`run` again with the same Deferred).
        """
        deferred: Deferred[T] = work if isinstance(work, Deferred) else ensureDeferred(work)  # type: ignore[arg-type]
        outcome: list[Any] = []

        def keep(result: Any) -> Any:
            outcome.append(result)
            return result

        deferred.addBoth(keep)
        while not outcome:
            if not self.flush():
                raise Stalled(f"nothing left to deliver and {work!r} is still waiting")
        deferred.addErrback(lambda _: None)
        result = outcome[0]
        if isinstance(result, Failure):
            result.raiseException()
        return result  # type: ignore[no-any-return]
