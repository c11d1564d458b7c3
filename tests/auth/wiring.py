"""The security layer wired into the broker's server connection, as docs/security.rst says.

A test fixture: the server connection does not call the security layer yet,
so these subclasses add the calls of "Wiring into the connection" around it,
and the tests run real clients against them. Once server.py and channel.py
make the calls themselves, the tests can use the plain broker instead.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.interfaces import IReactorTime
from twisted.python.failure import Failure

from txamqp09.broker.auth.errors import LoginRefused
from txamqp09.broker.auth.methods import AccessGuard
from txamqp09.broker.auth.sasl import PeerInfo
from txamqp09.broker.auth.security import Login, Security
from txamqp09.broker.channel import ServerChannel
from txamqp09.broker.server import ServerConnection, ServerFactory
from txamqp09.protocol import ConnectionState
from txamqp09.wire.errors import AMQPError
from txamqp09.wire.frames import Command
from txamqp09.wire.versions import AMQP0_9_1

#: Stands for the ``amq.gen-`` name the model is about to generate (step 5:
#: the real wiring checks the generated name itself).
GENERATED_QUEUE = "amq.gen-"


class SecuredChannel(ServerChannel):
    """Steps 5, 6 and 7: every method, the publish fast path, access.request."""

    connection: SecuredConnection

    def methodReceived(self, method: Any) -> None:
        guard = self.connection.guard
        assert guard is not None
        if method.NAME == "access.request":
            self._reply(self.spec.AccessRequestOk(ticket=guard.request_ticket(self.number, method)))
            return
        guard.check(self.number, method, queue=self._checked_queue(method))
        super().methodReceived(method)

    def _checked_queue(self, method: Any) -> str | None:
        if getattr(method, "queue", None) != "":
            return None
        if method.NAME == "queue.declare" and not method.passive:
            return GENERATED_QUEUE
        return self._queue_name("")

    def publishFrame(self, buf: bytearray, offset: int, end: int) -> None:
        super().publishFrame(buf, offset, end)
        assert self.content is not None and self.connection.guard is not None
        try:
            self.connection.guard.check_publish(self.number, (buf[offset] << 8) | buf[offset + 1], self.content[0])
        except AMQPError:
            self.content = None
            raise


class SecuredConnection(ServerConnection):
    """Steps 2, 3, 4, 8 and 9 around the broker's own connection."""

    def __init__(self, clock: IReactorTime, *, security: Security, **options: Any) -> None:
        super().__init__(clock, **options)
        self.security = security
        self.peer = PeerInfo()
        self.login: Login | None = None
        self.login_started = False
        self.guard: AccessGuard | None = None

    def headerReceived(self, header: bytes) -> None:
        assert self.transport is not None
        self.peer = PeerInfo.from_transport(self.transport)
        super().headerReceived(header)

    def sendMethod(self, channel: int, method: Any) -> None:
        if method.NAME == "connection.start":
            method.mechanisms = self.security.mechanisms_field(self.peer)
        super().sendMethod(channel, method)

    def connection_start_ok(self, method: Any) -> None:
        self._expect(method, self.login_started)
        self.login_started = True
        self.client_properties = method.client_properties
        login = self.security.login(method.mechanism, method.response, self.peer)
        login.addCallbacks(self._loggedIn, self._loginRefused)

    def _loggedIn(self, login: Login) -> None:
        if self.state is ConnectionState.CLOSED:
            login.logout()
            return
        assert self.version is not None
        self.login, self.user = login, login.user
        tune = self.version.spec.ConnectionTune(
            channel_max=self.channel_max, frame_max=self.frame_max, heartbeat=self.heartbeat
        )
        self.sendMethod(0, tune)

    def _loginRefused(self, failure: Failure) -> None:
        failure.trap(LoginRefused)
        self.close(failure.value)  # type: ignore[arg-type]

    def connection_open(self, method: Any) -> None:
        self._expect(method, self.user is None or self.vhost is not None)
        self.guard = self.security.open_vhost(
            self.user, method.virtual_host, tickets=self.version is not AMQP0_9_1
        )
        super().connection_open(method)

    def commandReceived(self, channel: int, command: Command) -> None:
        super().commandReceived(channel, command)
        if command.method.NAME == "channel.open":
            # server.py builds ServerChannel itself; give it the secured behaviour.
            self.channels[channel].__class__ = SecuredChannel

    def _forgetChannel(self, number: int) -> None:
        super()._forgetChannel(number)
        if self.guard is not None:
            self.guard.channel_closed(number)

    def connectionLost(self, reason: Any = None) -> None:
        super().connectionLost(reason)
        if self.guard is not None:
            self.guard.close()
        if self.login is not None:
            self.login.logout()


class SecuredFactory(ServerFactory):
    """Step 1: one Security shared by every connection."""

    def __init__(self, clock: IReactorTime, security: Security, **options: Any) -> None:
        super().__init__(clock, **options)
        self.security = security
        for vhost in security.database.vhosts:
            self.broker.add_vhost(vhost)

    def buildProtocol(self, addr: Any) -> SecuredConnection:
        connection = SecuredConnection(
            self.clock, security=self.security, broker=self.broker, batch=self.batch, **self.options
        )
        connection.factory = self
        self.connections.add(connection)
        return connection
