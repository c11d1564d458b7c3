"""The broker's input path as a function of bytes, for fuzzers and their regressions.

:func:`feed_server` hands bytes to a fresh :class:`~txamqp09.broker.server.ServerConnection`
(over a fake transport, on a fake clock) and raises :class:`ServerFault` when
the broker failed on its own account: an exception that is not an AMQP error
(which the connection logs and answers with 541 internal-error), or a
connection that ended without saying why. An AMQP error of the client's
making (501, 502, 505 ...) is the right answer to bad input and passes.

The first byte of the input picks where the rest goes:

* even: the rest is everything the client sends, protocol header included;
* odd: the client has logged in as guest on ``/`` and opened channel 1 in
  the version the second byte picks (0-9-1, 0-9, 0-8); the rest follows.

When the first byte has its bit 1 set (2, 3, 6, 7 ...), the memory alarm is
up while the rest is fed (a connection that publishes is blocked, and what
it sends then waits unhandled) and clears half-way through the minute of
broker time that follows the bytes (timers: heartbeats, expiries, the
consumer timeout), so that what waited is handled.
"""

from __future__ import annotations

from twisted.internet.task import Clock

from txamqp09.broker.server import ServerFactory
from txamqp09.testing.scripted import ScriptedClient
from txamqp09.wire import _amqp0_9_1 as spec
from txamqp09.wire.errors import InternalError
from txamqp09.wire.frames import content_frames, method_frame
from txamqp09.wire.versions import AMQP0_8, AMQP0_9, AMQP0_9_1

__all__ = ["ServerFault", "feed_server", "seeds"]

_VERSIONS = (AMQP0_9_1, AMQP0_9, AMQP0_8)


class ServerFault(Exception):
    """The broker failed on input instead of answering it."""


def feed_server(data: bytes) -> None:
    """Feed *data* to a new connection of a new broker (see the module's docstring).

    :raises ServerFault: the broker failed on its own account.
    """
    if not data:
        return
    clock = Clock()
    factory = ServerFactory(clock, consumer_timeout=10.0, memory_probe=lambda: 0)
    factory.startFactory()
    try:
        if data[0] % 2 == 0:
            peer = ScriptedClient(factory, handshake=False)
            rest = data[1:]
        else:
            version = _VERSIONS[data[1] % 3] if len(data) > 1 else AMQP0_9_1
            peer = ScriptedClient(factory, version)
            rest = data[2:]
        alarmed = bool(data[0] & 2)
        if alarmed:
            factory.alarms.raise_alarm("memory")
        peer.feed(rest)
        clock.pump([1.0] * 30)
        if alarmed:
            factory.alarms.clear_alarm("memory")
        clock.pump([1.0] * 30)
        reason = peer.server.close_reason
        if isinstance(reason, InternalError):
            raise ServerFault(reason.reply_text)
    finally:
        factory.stopFactory()


def seeds() -> list[bytes]:
    """Inputs that do something, to start a fuzzer from: sessions of common commands."""
    publish = spec.BasicPublish(exchange="", routing_key="q")
    properties = spec.BasicProperties(headers={"k": 1, "t": {"n": [1, "s", 2.5]}}, delivery_mode=2)
    after_open = b"".join(
        [
            method_frame(1, spec.QueueDeclare(queue="q", arguments={"x-max-length": 10})),
            method_frame(1, spec.BasicQos(prefetch_count=5)),
            method_frame(1, spec.ConfirmSelect()),
            content_frames(1, publish, properties, b"x" * 5000, 4096),
            method_frame(1, spec.BasicConsume(queue="q", consumer_tag="c")),
            method_frame(1, spec.BasicAck(delivery_tag=1)),
            method_frame(1, spec.BasicGet(queue="q")),
            method_frame(1, spec.ExchangeDeclare(exchange="e", type="headers")),
            method_frame(1, spec.QueueBind(queue="q", exchange="e", arguments={"x-match": "any"})),
            method_frame(1, spec.TxSelect()),
            method_frame(1, spec.TxCommit()),
            method_frame(1, spec.ChannelClose(reply_code=200, reply_text="", class_id=0, method_id=0)),
        ]
    )
    handshake = AMQP0_9_1.header + method_frame(
        0,
        spec.ConnectionStartOk(
            client_properties={"capabilities": {"connection.blocked": True}},
            mechanism="PLAIN", response=b"\x00guest\x00guest", locale="en_US",
        ),
    ) + method_frame(0, spec.ConnectionTuneOk(channel_max=0, frame_max=4096, heartbeat=0)) + method_frame(
        0, spec.ConnectionOpen(virtual_host="/")
    )
    return [
        b"\x01\x00" + after_open,
        b"\x01\x01" + after_open,
        b"\x01\x02" + after_open,
        b"\x03\x00" + after_open,
        b"\x00" + handshake,
    ]
