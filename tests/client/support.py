"""Helpers of the client tests: a scripted server over a fake transport, brokers on loopback."""

from __future__ import annotations

import functools
from typing import Any, Awaitable, Callable, Optional, TypeVar

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.error import ConnectionLost
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure

from txamqp09.client.channel import Channel
from txamqp09.client.connection import ClientConnection
from txamqp09.client.params import ConnectionParameters
from txamqp09.wire.base import Method, Properties, decode_method
from txamqp09.wire.frames import (
    FRAME_BODY,
    FRAME_HEADER,
    FRAME_HEARTBEAT,
    Command,
    ContentAssembler,
    FrameReader,
    content_frames,
    method_frame,
)
from txamqp09.wire.versions import AMQP0_9_1, HEADER_SIZE, ProtocolVersion

__all__ = ["inline", "fails", "ScriptedServer", "HEARTBEAT"]

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)

#: What ScriptedServer.received() lists for a heartbeat frame.
HEARTBEAT = "heartbeat"


def inline(test: Callable[..., Awaitable[T]]) -> Callable[..., Deferred[T]]:
    """Run an ``async def`` test method as a Deferred trial waits for."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> Deferred[T]:
        return ensureDeferred(test(*args, **kwargs))  # type: ignore[arg-type]

    return run


async def fails(deferred: Deferred[Any], kind: type[E]) -> E:
    """Wait for *deferred*, which must fail with *kind*; the exception."""
    try:
        await deferred
    except kind as error:
        return error
    raise AssertionError(f"{deferred!r} did not fail with {kind.__name__}")


class ScriptedServer:
    """Plays the server's side of one client connection, frame by frame.

    The client writes into a StringTransport; :meth:`received` decodes what
    it sent. The test makes the server speak with :meth:`send` and
    :meth:`sendContent`; :attr:`clock` drives heartbeats and timeouts.
    """

    def __init__(self, version: ProtocolVersion = AMQP0_9_1, **parameters: Any) -> None:
        self.version = version
        self.spec: Any = version.spec
        self.clock = Clock()
        self.transport = StringTransport()
        self.parameters = ConnectionParameters(version=version.name, **parameters)
        self.client = ClientConnection(self.parameters, self.clock)
        self.client.makeConnection(self.transport)
        self.header = self.transport.value()[:HEADER_SIZE]
        self.transport.clear()
        self._reader = FrameReader(1 << 24)
        self._assemblers: dict[int, ContentAssembler] = {}

    # -- what the client sent ---------------------------------------------------

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

    # -- what the server says ---------------------------------------------------

    def send(self, channel: int, method: Method) -> None:
        """The server sends *method* on *channel*."""
        self.client.dataReceived(method_frame(channel, method))

    def sendContent(
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
        """Run the whole opening handshake; the client's whenOpened()."""
        opened = self.client.whenOpened()
        self.send(0, self.spec.ConnectionStart(server_properties={"product": "scripted"}, mechanisms=b"PLAIN AMQPLAIN", locales=b"en_US"))
        self.send(0, self.spec.ConnectionTune(channel_max=channel_max, frame_max=frame_max, heartbeat=heartbeat))
        self.send(0, self.spec.ConnectionOpenOk())
        self.transport.clear()
        return opened

    def openChannel(self, number: int = 1) -> Channel:
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
