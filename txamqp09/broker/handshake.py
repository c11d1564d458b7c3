"""The server's side of the connection handshake, from connection.start to
an open virtual host.

A :class:`~txamqp09.broker.server.ServerConnection` is the transport of
one client: bytes, frames, output, heartbeats, closing. Once it has taken
the protocol header, its :class:`ServerHandshake` runs the negotiation, as
a service runs on conch's SSH transport: connection.start, the SASL login
through :class:`~txamqp09.broker.auth.Security`, connection.tune and
tune-ok, connection.open of a virtual host, and later 0-9-1's
update-secret. Each step is taken in one named state (:class:`Handshake`)
and refused in any other.

The handshake keeps its own state (where it is, the login under way, its
timeout, the accepted login) and records on its connection what the rest
of the broker reads of the agreement: the client's properties and
capabilities, the user, the tuned limits, the access guard and the virtual
host (:class:`HandshakeConnection` lists them).
"""

from __future__ import annotations

import enum
import platform
from typing import TYPE_CHECKING, Any, Optional, Protocol, Union

import twisted
from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.python.failure import Failure

from txamqp09 import __version__
from txamqp09.broker import oplog
from txamqp09.broker.auth import AccessGuard, IAMQPUser, Login, PeerInfo, Security
from txamqp09.broker.auth.errors import LoginRefused
from txamqp09.broker.classes.registry import vhost_classes
from txamqp09.broker.dialects import Dialect
from txamqp09.broker.model import Broker, Client, VirtualHost
from txamqp09.protocol import ConnectionState
from txamqp09.wire.errors import (
    AMQPError,
    ChannelError,
    CommandInvalid,
    ConnectionLevelError,
    InvalidPath,
    NotAllowed,
)
from txamqp09.wire.frames import FRAME_MIN_SIZE
from txamqp09.wire.versions import AMQP0_9_1, CAPABILITIES, ProtocolVersion

if TYPE_CHECKING:
    from txamqp09.wire import methods
    from txamqp09.wire.base import Method

__all__ = [
    "Handshake",
    "HandshakeConnection",
    "ServerHandshake",
    "server_properties",
    "unexpected_when_running",
]


class Handshake(enum.Enum):
    """The server's side of the connection handshake (RabbitMQ's names).

    ::

        STARTING --start-ok--> SECURING --login accepted--> TUNING
                 --tune-ok--> OPENING --open--> RUNNING

    connection.start is sent when the protocol header arrives; a refused
    login closes the connection from SECURING. Each handshake method is
    accepted in one state only (see :data:`_AWAITED_IN`); anywhere else it
    is refused by :meth:`ServerHandshake._expect`.
    """

    #: connection.start sent: start-ok is due.
    STARTING = "starting"
    #: start-ok received: the login is being decided.
    SECURING = "securing"
    #: The login succeeded and connection.tune was sent: tune-ok is due.
    TUNING = "tuning"
    #: tune-ok received: connection.open is due.
    OPENING = "opening"
    #: connection.open-ok sent: channels may be used.
    RUNNING = "running"


#: The one handshake state in which each channel-0 method of the client is taken.
_AWAITED_IN = {
    "connection.start-ok": Handshake.STARTING,
    "connection.tune-ok": Handshake.TUNING,
    "connection.open": Handshake.OPENING,
    "connection.update-secret": Handshake.RUNNING,
}

#: What connection.start announces: the extensions both sides implement, and
#: consumer priorities (basic.consume's x-priority), which only the broker
#: acts on.
_SERVER_CAPABILITIES = {**CAPABILITIES, "consumer_priorities": True, "direct_reply_to": True}


def server_properties(dialect: Dialect, cluster_name: Optional[str] = None) -> dict[str, Any]:
    """The server-properties table of connection.start on a connection of
    *dialect*; with ``cluster_name`` when the broker has one (the global
    parameter: federation links name their upstream by it)."""
    properties: dict[str, Any] = {
        "product": "txamqp09",
        "version": __version__,
        "platform": f"Python {platform.python_version()}, Twisted {twisted.__version__}",
        "copyright": "Copyright (c) 2026 The txamqp09 authors",
        "information": "AMQP 0-9, 0-8 and 0-9-1 for Twisted; MIT licensed",
    }
    if dialect.announces_capabilities:
        properties["capabilities"] = dict(_SERVER_CAPABILITIES)
    if cluster_name:
        properties["cluster_name"] = cluster_name
    return properties


def unexpected_when_running(method: methods.AnyMethod, hint: str) -> ChannelError:
    """RabbitMQ's 504 for *method* on channel 0 of an open connection."""
    return ChannelError(
        "unexpected method in connection state running", method.CLASS_ID, method.METHOD_ID, hint=hint
    )


class HandshakeConnection(Protocol):
    """A server connection as its handshake sees it (a
    :class:`~txamqp09.broker.server.ServerConnection`): what the handshake
    reads and calls, and the attributes it records the agreement in."""

    #: The client's properties (connection.start-ok).
    client_properties: dict[str, Any]
    #: The SASL mechanism the client chose.
    auth_mechanism: str
    #: The client asked for server-sent basic.cancel (consumer_cancel_notify).
    cancel_notify: bool
    #: The client understands connection.blocked.
    blocked_notify: bool
    #: The user that logged in.
    user: Optional[IAMQPUser]
    #: Checks the channels' methods, once the vhost is open.
    guard: Optional[AccessGuard]
    #: The name of the virtual host opened.
    vhost: Optional[str]
    #: That virtual host.
    model_vhost: Optional[VirtualHost]
    #: The connection's life (open once the virtual host is).
    state: ConnectionState
    #: Why the connection closed (the handshake's timeout).
    close_reason: Optional[Union[AMQPError, Failure]]

    @property
    def version(self) -> Optional[ProtocolVersion]:
        """The version the protocol header chose."""

    @property
    def dialect(self) -> Dialect:
        """The rules of that version."""

    @property
    def peer(self) -> PeerInfo:
        """The client's address and verified TLS certificate."""

    @property
    def client(self) -> Client:
        """The connection's model counterpart (its name is the client's address)."""

    @property
    def channel_max(self) -> int:
        """The channel_max the server offers (the agreed one once tuned)."""

    @property
    def frame_max(self) -> int:
        """The frame_max the server offers (the agreed one once tuned)."""

    @property
    def heartbeat(self) -> int:
        """The heartbeat interval the server offers."""

    def sendMethod(self, channel: int, method: Method) -> None:
        """Send *method* on *channel*."""

    def close(self, error: Optional[AMQPError] = None) -> None:
        """Close the connection with *error*."""

    def dropConnection(self, abort: bool = True) -> None:
        """Close the transport."""

    def tune(self, channel_max: int, frame_max: int, heartbeat: int) -> None:
        """Use the limits and the heartbeat connection.tune-ok agreed on."""

    def clusterName(self) -> Optional[str]:
        """The broker's cluster name, if it has one."""


class ServerHandshake:
    """The negotiation of one server connection (see the module's docstring).

    Its ``connection_<name>`` methods handle the client's handshake
    methods; the connection's dispatch table takes them from here.

    :param connection: the connection it negotiates.
    :param security: authenticates the client and opens virtual hosts.
    :param broker: the model whose virtual host the client opens.
    :param clock: the connection's clock.
    :param timeout: seconds the client has to finish opening.
    :param staging_ttl: seconds an untouched file or message staging entry
        of the opened virtual host is kept (0: always).

    :ivar state: where the handshake is.
    :ivar login: the accepted login (logged out when the connection ends).
    """

    def __init__(
        self,
        connection: HandshakeConnection,
        security: Security,
        broker: Broker,
        clock: IReactorTime,
        *,
        timeout: float,
        staging_ttl: float,
    ) -> None:
        self.connection = connection
        self.security = security
        self.broker = broker
        self.clock = clock
        self.timeout = timeout
        self.staging_ttl = staging_ttl
        self.state = Handshake.STARTING
        self.login: Optional[Login] = None
        #: The login under way (start-ok received, not yet decided).
        self._pending_login: Optional[Deferred[Login]] = None
        self._timeout_call: Optional[IDelayedCall] = None

    def connectionMade(self) -> None:
        """The client connected: it has :attr:`timeout` seconds to open."""
        self._timeout_call = self.clock.callLater(self.timeout, self._timedOut)

    def _timedOut(self) -> None:
        self._timeout_call = None
        connection = self.connection
        if connection.state in (ConnectionState.AWAITING_HEADER, ConnectionState.NEGOTIATING):
            oplog.handshake_timeout(connection.client.name, self.timeout)
            connection.close_reason = ConnectionLevelError(
                f"connection not opened within {self.timeout} seconds", reply_code=320
            )
            connection.dropConnection()

    def _stopTimeout(self) -> None:
        if self._timeout_call is not None and self._timeout_call.active():
            self._timeout_call.cancel()
        self._timeout_call = None

    def start(self) -> None:
        """The protocol header chose the version: send connection.start."""
        connection = self.connection
        assert connection.version is not None
        connection.sendMethod(
            0,
            connection.version.spec.ConnectionStart(
                server_properties=server_properties(connection.dialect, connection.clusterName()),
                mechanisms=self.security.mechanisms_field(connection.peer),
                locales=b"en_US",
            ),
        )

    def connectionLost(self) -> None:
        """The connection ended: stop waiting, log the user out."""
        self._stopTimeout()
        if self._pending_login is not None:
            self._pending_login.cancel()
        if self.login is not None:
            self.login.logout()

    def _expect(self, method: methods.AnyMethod) -> None:
        """Refuse handshake *method* unless the handshake is in the state
        that awaits it: 503 command-invalid, or in RabbitMQ's dialect 504
        once the connection is running."""
        if self.state is _AWAITED_IN[method.NAME]:
            return
        if self.state is Handshake.RUNNING and self.connection.dialect.misplaced_methods_as_rabbitmq:
            raise unexpected_when_running(method, hint=f"{method.NAME} arrived after the connection was opened")
        if _AWAITED_IN[method.NAME] is Handshake.RUNNING:
            text = f"{method.NAME} arrived before the connection was opened"
        else:
            text = f"{method.NAME} arrived out of order during negotiation"
        raise CommandInvalid(text, method.CLASS_ID, method.METHOD_ID)

    # -- securing ------------------------------------------------------------

    def connection_start_ok(self, method: methods.ConnectionStartOk) -> None:
        """Start the login; connection.tune follows once it succeeds.

        A refusal may wait (repeated failures of a user from a host are
        answered more and more slowly); methods arriving meanwhile are out
        of order.
        """
        self._expect(method)
        self.state = Handshake.SECURING
        connection = self.connection
        connection.client_properties = method.client_properties
        connection.auth_mechanism = method.mechanism
        capabilities = method.client_properties.get("capabilities")
        if isinstance(capabilities, dict):
            connection.cancel_notify = bool(capabilities.get("consumer_cancel_notify"))
            connection.blocked_notify = bool(capabilities.get("connection.blocked"))
        self._pending_login = self.security.login(method.mechanism, method.response, connection.peer)
        self._pending_login.addCallbacks(self._loggedIn, self._loginRefused)

    def _loggedIn(self, login: Login) -> None:
        """The client is authenticated: tune the connection."""
        connection = self.connection
        assert connection.version is not None
        self._pending_login = None
        self.login, connection.user = login, login.user
        if connection.state is not ConnectionState.NEGOTIATING:
            return  # closed while the login waited; connectionLost logs out
        self.state = Handshake.TUNING
        connection.sendMethod(
            0,
            connection.version.spec.ConnectionTune(
                channel_max=connection.channel_max, frame_max=connection.frame_max, heartbeat=connection.heartbeat
            ),
        )

    def _loginRefused(self, failure: Failure) -> None:
        """connection.close 403 with the refusal's text (the reason is logged)."""
        self._pending_login = None
        if failure.check(CancelledError):
            return  # the connection was lost while the login waited
        failure.trap(LoginRefused)
        self.connection.close(failure.value)  # type: ignore[arg-type]

    # -- tuning --------------------------------------------------------------

    def connection_tune_ok(self, method: methods.ConnectionTuneOk) -> None:
        """Take the client's limits (none above the server's) and heartbeat."""
        self._expect(method)
        connection = self.connection
        channel_max = method.channel_max or connection.channel_max
        frame_max = method.frame_max or connection.frame_max
        if channel_max > connection.channel_max or frame_max > connection.frame_max:
            raise NotAllowed(
                f"tune-ok asks for channel_max {channel_max} / frame_max {frame_max}, "
                f"above the server's {connection.channel_max} / {connection.frame_max}",
                method.CLASS_ID,
                method.METHOD_ID,
            )
        if frame_max < FRAME_MIN_SIZE:
            raise NotAllowed(
                f"frame_max {frame_max} is below the minimum of {FRAME_MIN_SIZE}",
                method.CLASS_ID,
                method.METHOD_ID,
            )
        connection.tune(channel_max, frame_max, method.heartbeat)
        self.state = Handshake.OPENING

    # -- opening -------------------------------------------------------------

    def connection_open(self, method: methods.ConnectionOpen) -> None:
        """Open the virtual host: 402 if it does not exist, 403 without permissions on it."""
        self._expect(method)
        connection = self.connection
        version, user = connection.version, connection.user
        assert version is not None and user is not None
        try:
            guard = self.security.open_vhost(user, method.virtual_host, tickets=version is not AMQP0_9_1)
        except AMQPError as refused:
            oplog.vhost_refused(connection.client.name, user.name, method.virtual_host, refused.reply_text)
            if isinstance(refused, InvalidPath) and connection.dialect.unknown_vhost_not_allowed:
                raise NotAllowed(f"vhost {method.virtual_host} not found", 10, 40) from None
            raise
        # The security database says which vhosts exist; it may have gained
        # this one after the broker started.
        vhost = self.broker.add_vhost(method.virtual_host)
        vhost_classes(vhost).staging.ttl = self.staging_ttl
        guard.exchanges = vhost.exchanges
        connection.guard, connection.vhost, connection.model_vhost = guard, method.virtual_host, vhost
        connection.state = ConnectionState.OPEN
        self.state = Handshake.RUNNING
        self._stopTimeout()
        connection.sendMethod(0, version.spec.ConnectionOpenOk())
        oplog.connection_opened(
            connection.client.name, user.name, method.virtual_host, version.name, connection.client_properties
        )

    # -- running -------------------------------------------------------------

    def connection_update_secret(self, method: methods.ConnectionUpdateSecret) -> None:
        """0-9-1: the client's new secret (a refreshed token, say), checked as
        RabbitMQ checks it (see :meth:`~txamqp09.broker.auth.security.Security.check_secret`); update-secret-ok, or 530."""
        self._expect(method)
        connection = self.connection
        assert connection.user is not None
        checked = self.security.check_secret(connection.user, method.new_secret, method.reason, connection.peer)
        checked.addCallbacks(self._secretAccepted, self._secretRefused)

    def _secretAccepted(self, _: None) -> None:
        connection = self.connection
        assert connection.version is not None
        if connection.state is ConnectionState.OPEN:
            connection.sendMethod(0, connection.version.spec.ConnectionUpdateSecretOk())

    def _secretRefused(self, failure: Failure) -> None:
        failure.trap(NotAllowed)
        self.connection.close(failure.value)  # type: ignore[arg-type]
