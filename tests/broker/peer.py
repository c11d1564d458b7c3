"""A client made of bare frames, talking to a server connection over a fake transport."""

from __future__ import annotations

from typing import Any, Optional

from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from txamqp09.broker.server import ServerConnection, ServerFactory
from txamqp09.wire.base import decode_method
from txamqp09.wire.frames import FRAME_METHOD, FrameReader, content_frames, method_frame
from txamqp09.wire.versions import AMQP0_9_1, ProtocolVersion


class Peer:
    """One client connection, opened and with channel 1 open.

    :param factory: the server factory (shared between peers of one broker).
    :param host: the client's address as the server sees it.
    :param handshake: log in as guest on ``/`` and open channel 1; if false,
        nothing is sent yet.
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
    ) -> None:
        self.version = version
        self.spec: Any = version.spec
        self.transport = StringTransport(peerAddress=IPv4Address("TCP", host, 40000))
        self.server: ServerConnection = factory.buildProtocol(None)
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
        self.send(0, self.spec.ConnectionTuneOk(channel_max=0, frame_max=4096, heartbeat=heartbeat))
        self.send(0, self.spec.ConnectionOpen(virtual_host="/"))
        self.expect(0, "connection.open-ok")
        self.open(1)

    def feed(self, data: bytes) -> None:
        """Bytes from the client to the server."""
        self.server.dataReceived(data)

    def send(self, channel: int, method: Any) -> None:
        self.feed(method_frame(channel, method))

    def publish(self, channel: int, routing_key: str, body: bytes, exchange: str = "", **fields: Any) -> None:
        self.feed(self.publish_bytes(channel, routing_key, body, exchange, **fields))

    def publish_bytes(self, channel: int, routing_key: str, body: bytes, exchange: str = "", **fields: Any) -> bytes:
        method = self.spec.BasicPublish(exchange=exchange, routing_key=routing_key, **fields)
        return content_frames(channel, method, self.spec.BasicProperties(), body, 4096)

    def open(self, channel: int) -> None:
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
        """The next method; it must be *name* on *channel*."""
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
            elif frame_type == 3 and waiting:
                bodies[-1] += body
        return bodies

    @property
    def disconnected(self) -> bool:
        return self.transport.disconnecting or self.transport.disconnected


def factory(clock: Optional[Clock] = None, **options: Any) -> ServerFactory:
    """A server factory on a fake clock."""
    return ServerFactory(clock or Clock(), **options)
