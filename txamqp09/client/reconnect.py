"""A connection that comes back: reconnection with backoff, topology and consumers replayed.

:class:`ReconnectingClient` is a Twisted service around
:class:`~twisted.application.internet.ClientService`. The application
registers exchanges, queues, bindings and consumers with it once; after
every (re)connection they are declared again and the consumers started again
before :meth:`~ReconnectingClient.whenConnected` hands the connection out.
Messages delivered on a lost connection and not yet acknowledged are
redelivered by the server (with ``redelivered`` set).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

from twisted.application.internet import ClientService, backoffPolicy
from twisted.application.service import Service
from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.logger import Logger

from txamqp09.client.channel import BodyLike, Channel, PropertiesLike
from txamqp09.client.connection import ClientConnection, ClientFactory
from txamqp09.client.consumer import DeliveryCallback
from txamqp09.client.outcome import Outcome
from txamqp09.client.params import ConnectionParameters, endpoint_for, parse_url
from txamqp09.protocol import ConnectionState

__all__ = ["ReconnectingClient"]

_log = Logger()

#: One step of the topology: declares something on the channel it is given.
Declaration = Callable[[Channel], "Deferred[Any]"]


class ReconnectingClient(Service):
    """Keeps one connection open and re-declares what was registered with it.

    :param reactor: the reactor (also the clock of the backoff).
    :param url: an ``amqp://`` or ``amqps://`` URL, or parameters.
    :param endpoint: connect through this endpoint instead of the URL's.
    :param retry_policy: seconds to wait after *n* failed attempts in a row;
        exponential backoff from 1 s to 60 s with jitter by default.
    :param confirms: put the publishing channel in confirm mode, so that
        :meth:`publish` fires when the server has the message.
    :param changes: :class:`ConnectionParameters` fields to override.
    """

    def __init__(
        self,
        reactor: Any,
        url: Union[str, ConnectionParameters] = "amqp://guest:guest@localhost:5672/",
        *,
        endpoint: Optional[IStreamClientEndpoint] = None,
        retry_policy: Optional[Callable[[int], float]] = None,
        confirms: bool = False,
        **changes: Any,
    ) -> None:
        parameters = parse_url(url) if isinstance(url, str) else url
        if changes:
            parameters = parameters.replace(**changes)
        self.parameters = parameters
        self.confirms = confirms
        self._declarations: list[Declaration] = []
        self._connection: Optional[ClientConnection] = None
        #: The publishing channel of the current connection.
        self._publishing: Outcome[Channel] = Outcome()
        self._service = ClientService(
            endpoint or endpoint_for(reactor, parameters),
            ClientFactory(parameters, reactor),
            retryPolicy=retry_policy or backoffPolicy(),
            clock=reactor,
            prepareConnection=self._prepare,
        )
        #: Connections opened so far, the first included.
        self.connections_made = 0

    # -- registration ------------------------------------------------------------

    def declare(self, declaration: Declaration) -> None:
        """Run *declaration* on a channel after every connection, in registration order."""
        self._declarations.append(declaration)

    def declare_exchange(self, exchange: str, type: str = "direct", **options: Any) -> None:
        """Declare an exchange after every connection (options of :meth:`Channel.exchange_declare`)."""
        self.declare(lambda channel: channel.exchange_declare(exchange, type, **options))

    def declare_queue(self, queue: str, **options: Any) -> None:
        """Declare a named queue after every connection (options of :meth:`Channel.queue_declare`)."""
        self.declare(lambda channel: channel.queue_declare(queue, **options))

    def bind_queue(
        self, queue: str, exchange: str, routing_key: str = "", arguments: Optional[dict[str, Any]] = None
    ) -> None:
        """Bind *queue* to *exchange* after every connection."""
        self.declare(
            lambda channel: channel.request(
                "queue.bind",
                queue=queue,
                exchange=exchange,
                routing_key=routing_key,
                arguments=arguments or {},
            )
        )

    def consume(
        self,
        queue: str,
        callback: DeliveryCallback,
        *,
        prefetch_count: int = 0,
        **options: Any,
    ) -> None:
        """Consume *queue* into *callback* on a channel of its own after every connection.

        :param prefetch_count: the channel's basic.qos prefetch count.
        :param options: options of :meth:`Channel.basic_consume`.
        """

        @inlineCallbacks
        def start(channel: Channel) -> Any:
            consuming = yield channel.connection.channel()
            if prefetch_count:
                yield consuming.basic_qos(prefetch_count)
            yield consuming.basic_consume(queue, callback, **options)

        self.declare(start)

    # -- connections -------------------------------------------------------------

    @inlineCallbacks
    def _prepare(self, protocol: Any) -> Any:
        connection = _unwrapped(protocol)
        yield connection.whenOpened()
        channel = yield connection.channel()
        for declaration in self._declarations:
            yield declaration(channel)
        self._connection = connection
        self.connections_made += 1
        yield self._startPublishing(channel)

    @inlineCallbacks
    def _startPublishing(self, channel: Channel) -> Any:
        if self.confirms:
            yield channel.confirm_select()
        self._publishing.succeed(channel)
        channel.whenClosed().addCallback(self._publishingEnded, channel.connection)

    def _publishingEnded(self, reason: object, connection: ClientConnection) -> None:
        self._publishing = Outcome()
        if connection.state is ConnectionState.OPEN:
            # The server closed the channel (a publish to a missing exchange, say).
            connection.channel().addCallback(self._startPublishing).addErrback(
                lambda failure: _log.failure("cannot reopen the publishing channel", failure)
            )

    def whenConnected(self) -> Deferred[ClientConnection]:
        """The open connection, once the topology and consumers are in place."""
        return self._service.whenConnected()  # type: ignore[return-value]

    @inlineCallbacks
    def publish(
        self,
        body: BodyLike,
        exchange: str = "",
        routing_key: str = "",
        properties: PropertiesLike = None,
        *,
        mandatory: bool = False,
    ) -> Any:
        """Publish on the current connection, waiting for one when there is none.

        Fires once the message is written, or with confirms once the server
        acked it. A message handed over just before the connection is lost
        may be lost with it; use confirms to know.
        """
        channel = yield self._publishing.when()
        confirmed = channel.basic_publish(body, exchange, routing_key, properties, mandatory=mandatory)
        if confirmed is not None:
            yield confirmed

    # -- service -----------------------------------------------------------------

    def startService(self) -> None:
        super().startService()
        self._service.startService()

    @inlineCallbacks
    def stopService(self) -> Any:
        """Close the current connection cleanly, then stop reconnecting."""
        super().stopService()
        if self._connection is not None:
            yield self._connection.disconnect()
        yield self._service.stopService()


def _unwrapped(protocol: Any) -> ClientConnection:
    """ClientService prepares a proxy of the protocol; the protocol itself."""
    return getattr(protocol, "_protocol", protocol)  # type: ignore[no-any-return]
