"""Scripted peers: one side of a connection played frame by frame by a test.

:class:`ScriptedClient` plays a client made of bare frames against this
project's :class:`~txamqp09.broker.server.ServerConnection`;
:class:`ScriptedServer` plays a server against this project's
:class:`~txamqp09.client.connection.ClientConnection`. Both sit on a
``StringTransport`` and a ``Clock``: nothing touches a socket or real time,
so a test sees every frame, in order, and decides when time passes::

    from txamqp09.testing.scripted import ScriptedClient, server_factory

    client = ScriptedClient(server_factory())       # logged in, channel 1 open
    client.send(1, client.spec.QueueDeclare(queue="q"))
    assert client.expect(1, "queue.declare-ok").queue == "q"
"""

from __future__ import annotations

from typing import Any, Optional

from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionLost
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure

from txamqp09.broker.server import ServerConnection, ServerFactory
from txamqp09.client.channel import Channel
from txamqp09.client.connection import ClientConnection
from txamqp09.client.params import ConnectionParameters
from txamqp09.wire.base import Method, Properties, decode_method
from txamqp09.wire.frames import (
    FRAME_BODY,
    FRAME_HEADER,
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    Command,
    ContentAssembler,
    FrameReader,
    content_frames,
    method_frame,
)
from txamqp09.wire.versions import AMQP0_9_1, HEADER_SIZE, ProtocolVersion

__all__ = ["ScriptedClient", "ScriptedServer", "server_factory", "HEARTBEAT"]

#: What :meth:`ScriptedServer.received` lists for a heartbeat frame.
HEARTBEAT = "heartbeat"


def server_factory(clock: Optional[Clock] = None, **options: Any) -> ServerFactory:
    """A server factory (with a fresh broker) on *clock*, a new ``Clock`` if omitted.

    *options* go to each :class:`~txamqp09.broker.server.ServerConnection`.
    """
    return ServerFactory(clock or Clock(), **options)


class ScriptedClient:
    """One client connection to a server, made of bare frames; opened and with channel 1 open.

    :param factory: the server factory (shared between clients of one broker).
    :param version: the protocol version the client asks for.
    :param heartbeat: the heartbeat the client answers in ``connection.tune-ok``.
    :param capabilities: the ``capabilities`` table of the client's properties.
    :param host: the client's address as the server sees it.
    :param handshake: log in as guest on ``/`` and open channel 1; if false,
        nothing is sent yet.
    :param frame_max: the frame_max the client answers in ``connection.tune-ok``.
    """

    def __init__(
        self,
        factory: ServerFactory,
        version: ProtocolVersion = AMQP0_9_1,
        *,
        heartbeat: int = 0,
        capabilities: Optional[dict[str, Any]] = None,
        host: str = "127.0.0.1",
        handshake: bool = True,
        frame_max: int = 4096,
    ) -> None:
        self.version = version
        self.frame_max = frame_max
        #: The generated module of the version (``spec.QueueDeclare`` ...).
        self.spec: Any = version.spec
        self.transport = StringTransport(peerAddress=IPv4Address("TCP", host, 40000))
        server = factory.buildProtocol(None)
        if server is None:
            raise RuntimeError("the server refused the connection (connection_max reached)")
        self.server: ServerConnection = server
        self.server.makeConnection(self.transport)
        self._reader = FrameReader(1 << 20)
        self._pending: list[tuple[int, int, Any]] = []
        if not handshake:
            return
        self.feed(version.header)
        self.expect(0, "connection.start")
        properties = {"capabilities": capabilities} if capabilities else {}
        self.send(0, self.spec.ConnectionStartOk(
            client_properties=properties, mechanism="PLAIN", response=b"\x00guest\x00guest",
            locale="en_US"))
        self.expect(0, "connection.tune")
        self.send(0, self.spec.ConnectionTuneOk(channel_max=0, frame_max=frame_max, heartbeat=heartbeat))
        self.send(0, self.spec.ConnectionOpen(virtual_host="/"))
        self.expect(0, "connection.open-ok")
        self.open(1)

    def feed(self, data: bytes) -> None:
        """Bytes from the client to the server."""
        self.server.dataReceived(data)

    def send(self, channel: int, method: Any) -> None:
        """The client sends *method* (without content) on *channel*."""
        self.feed(method_frame(channel, method))

    def publish(self, channel: int, routing_key: str, body: bytes, exchange: str = "", **fields: Any) -> None:
        """The client publishes *body* with empty properties."""
        self.feed(self.publish_bytes(channel, routing_key, body, exchange, **fields))

    def publish_bytes(self, channel: int, routing_key: str, body: bytes, exchange: str = "", **fields: Any) -> bytes:
        """The frames of :meth:`publish`, not sent."""
        method = self.spec.BasicPublish(exchange=exchange, routing_key=routing_key, **fields)
        return content_frames(channel, method, self.spec.BasicProperties(), body, self.frame_max)

    def open(self, channel: int) -> None:
        """Open *channel* and check the server's ``channel.open-ok``."""
        self.send(channel, self.spec.ChannelOpen())
        self.expect(channel, "channel.open-ok")

    def frames(self) -> list[tuple[int, int, Any]]:
        """Frames the server wrote and no one read yet: methods decoded, else payloads."""
        data = self.transport.value()
        self.transport.clear()
        for frame_type, channel, payload in self._reader.feed(data):
            body = decode_method(self.version.methods, payload) if frame_type == FRAME_METHOD else payload
            self._pending.append((frame_type, channel, body))
        pending, self._pending = self._pending, []
        return pending

    def methods(self) -> list[tuple[int, Any]]:
        """The (channel, method) pairs among :meth:`frames`."""
        return [(channel, body) for frame_type, channel, body in self.frames() if frame_type == FRAME_METHOD]

    def names(self) -> list[str]:
        """The names of the methods the server sent since the last call."""
        return [method.NAME for _, method in self.methods()]

    def expect(self, channel: int, name: str) -> Any:
        """The next method; it must be *name* on *channel* (else ``AssertionError``)."""
        methods = self.methods()
        if not methods:
            raise AssertionError(f"expected {name}, the server sent nothing")
        (got_channel, method), rest = methods[0], methods[1:]
        self._pending = [(FRAME_METHOD, c, m) for c, m in rest]
        if (got_channel, method.NAME) != (channel, name):
            raise AssertionError(f"expected {name} on {channel}, got {method!r} on {got_channel}")
        return method

    def deliveries(self) -> list[bytes]:
        """Bodies of the basic.deliver commands the server sent since the last call."""
        bodies, waiting = [], False
        for frame_type, _channel, body in self.frames():
            if frame_type == FRAME_METHOD:
                waiting = body.NAME == "basic.deliver"
                if waiting:
                    bodies.append(b"")
            elif frame_type == FRAME_BODY and waiting:
                bodies[-1] += body
        return bodies

    @property
    def disconnected(self) -> bool:
        """Whether the server closed (or is closing) the transport."""
        return bool(self.transport.disconnecting or self.transport.disconnected)


class ScriptedServer:
    """Plays the server's side of one client connection, frame by frame.

    The client writes into a ``StringTransport``; :meth:`received` decodes what
    it sent. The test makes the server speak with :meth:`send` and
    :meth:`send_content`; :attr:`clock` drives heartbeats and timeouts.

    :param version: the protocol version of the client.
    :param parameters: more :class:`~txamqp09.client.params.ConnectionParameters`.
    """

    def __init__(self, version: ProtocolVersion = AMQP0_9_1, **parameters: Any) -> None:
        self.version = version
        #: The generated module of the version (``spec.ConnectionStart`` ...).
        self.spec: Any = version.spec
        self.clock = Clock()
        self.transport = StringTransport()
        self.parameters = ConnectionParameters(version=version.name, **parameters)
        self.client = ClientConnection(self.parameters, self.clock)
        self.client.makeConnection(self.transport)
        #: The protocol header the client sent.
        self.header = self.transport.value()[:HEADER_SIZE]
        self.transport.clear()
        self._reader = FrameReader(1 << 24)
        self._assemblers: dict[int, ContentAssembler] = {}

    def received(self) -> list[Any]:
        """Everything the client wrote since the last call: (channel, Method or Command) or HEARTBEAT."""
        data = self.transport.value()
        self.transport.clear()
        out: list[Any] = []
        for frame_type, channel, payload in self._reader.feed(data):
            if frame_type == FRAME_HEARTBEAT:
                out.append(HEARTBEAT)
                continue
            assembler = self._assemblers.setdefault(
                channel, ContentAssembler(self.version.properties, 1 << 30)
            )
            if frame_type == FRAME_HEADER:
                command = assembler.header(payload)
            elif frame_type == FRAME_BODY:
                command = assembler.body(payload)
            else:
                command = assembler.method(decode_method(self.version.methods, payload))
            if command is not None:
                out.append((channel, command.method if not command.method.CONTENT else command))
        return out

    def methods(self) -> list[tuple[int, Any]]:
        """The methods the client sent since the last look (contents reduced to their methods)."""
        return [
            (channel, item.method if isinstance(item, Command) else item)
            for channel, item in (entry for entry in self.received() if entry != HEARTBEAT)
        ]

    def names(self) -> list[str]:
        """The names of the methods the client sent since the last look."""
        return [method.NAME for _, method in self.methods()]

    def send(self, channel: int, method: Method) -> None:
        """The server sends *method* on *channel*."""
        self.client.dataReceived(method_frame(channel, method))

    def send_content(
        self, channel: int, method: Method, body: bytes, properties: Optional[Properties] = None
    ) -> None:
        """The server sends a content method with its header and body."""
        self.client.dataReceived(
            content_frames(
                channel,
                method,
                properties if properties is not None else self.spec.BasicProperties(),
                body,
                self.client.frame_max,
            )
        )

    def open(self, heartbeat: int = 0, frame_max: int = 131072, channel_max: int = 2047) -> Deferred[ClientConnection]:
        """Run the whole opening handshake; the client's ``whenOpened()``."""
        opened = self.client.whenOpened()
        self.send(0, self.spec.ConnectionStart(
            server_properties={"product": "scripted"}, mechanisms=b"PLAIN AMQPLAIN", locales=b"en_US"))
        self.send(0, self.spec.ConnectionTune(channel_max=channel_max, frame_max=frame_max, heartbeat=heartbeat))
        self.send(0, self.spec.ConnectionOpenOk())
        self.transport.clear()
        return opened

    def open_channel(self, number: int = 1) -> Channel:
        """Open channel *number* on the open client connection."""
        opening = self.client.channel(number)
        self.transport.clear()
        self.send(number, self.spec.ChannelOpenOk())
        result: list[Channel] = []
        opening.addCallback(result.append)
        return result[0]

    def lose(self, reason: Optional[Failure] = None) -> None:
        """The transport goes away."""
        self.client.connectionLost(reason or Failure(ConnectionLost("gone")))
