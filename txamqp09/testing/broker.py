"""This project's broker on a free port of 127.0.0.1, in the test's process.

Typical use in a trial test::

    from txamqp09.testing.broker import LoopbackBroker

    class Tests(TestCase):
        def setUp(self):
            self.broker = LoopbackBroker()
            self.port = self.broker.start()
            self.addCleanup(self.broker.stop)

The broker runs in the reactor thread; blocking clients (pika's
BlockingConnection, kombu, an asyncio loop) run in another thread, e.g.
through ``twisted.internet.threads.deferToThread``. :meth:`LoopbackBroker.stop`
drops every connection and stops listening, and its Deferred fires once all
of that is done, so trial finds a clean reactor.
"""

from __future__ import annotations

from typing import Any, Optional

from twisted.internet.defer import Deferred, gatherResults, maybeDeferred
from twisted.internet.interfaces import IListeningPort

from txamqp09.broker.model import Broker
from txamqp09.broker.server import ServerFactory

__all__ = ["LoopbackBroker"]


class LoopbackBroker:
    """A broker listening on 127.0.0.1 on a port the system picks.

    :param reactor: the reactor to listen with (the global one if omitted).
    :param broker: the model to serve (a fresh one with vhost ``/`` if omitted).
    :param options: passed to each :class:`~txamqp09.broker.server.ServerConnection`
        (``heartbeat``, ``frame_max``, ``close_timeout``, ...).
    """

    def __init__(self, reactor: Any = None, broker: Optional[Broker] = None, **options: Any) -> None:
        if reactor is None:
            from twisted.internet import reactor as global_reactor

            reactor = global_reactor
        self.reactor = reactor
        self.factory = ServerFactory(reactor, broker, **options)
        self._port: Optional[IListeningPort] = None

    @property
    def broker(self) -> Broker:
        """The model the broker serves (inspect queues and exchanges here)."""
        return self.factory.broker

    @property
    def port(self) -> int:
        """The TCP port (once started)."""
        if self._port is None:
            raise RuntimeError("the broker is not started")
        return int(self._port.getHost().port)  # type: ignore[attr-defined]

    @property
    def url(self) -> str:
        """An ``amqp://`` URL for guest/guest on vhost ``/``."""
        return f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"

    def start(self, port: int = 0) -> int:
        """Listen on *port* (0: one the system picks; a port it listened on
        before :meth:`stop` brings it back there); the port number."""
        self._port = self.reactor.listenTCP(port, self.factory, interface="127.0.0.1")
        return self.port

    def stop(self) -> Deferred[None]:
        """Drop every connection and stop listening; fires when all is closed."""
        waiting = [connection.whenLost() for connection in list(self.factory.connections)]
        for connection in list(self.factory.connections):
            connection.dropConnection()
        if self._port is not None:
            waiting.append(maybeDeferred(self._port.stopListening))  # type: ignore[call-overload]
            self._port = None
        result: Deferred[Any] = gatherResults(waiting)
        return result.addCallback(lambda _: None)
