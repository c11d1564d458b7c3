"""Probe scenarios run with pika against any 0-9-1 broker.

Each probe is a function that drives one or more pika connections through
one situation (an error path, a redeclaration, a reserved name, a limit) and
returns what the broker answered as an :class:`Outcome`: the reply code and
scope of the close it caused (or ``ok``), and the reply text with the
probe's generated names replaced by placeholders, so that the outcomes of
two brokers compare equal exactly when a client cannot tell them apart.

:func:`run_probe` runs one probe against a broker on a port of 127.0.0.1;
it blocks (call it from a thread, not the reactor's).
"""

from __future__ import annotations

import ast
import re
import socket
import struct
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

import pika
from pika.adapters.blocking_connection import BlockingChannel, BlockingConnection
from pika.exceptions import (
    AMQPConnectionError,
    ChannelClosedByBroker,
    ConnectionClosedByBroker,
    UnroutableError,
)

from txamqp09.wire import _amqp0_9_1 as spec
from txamqp09.wire.base import decode_method
from txamqp09.wire.frames import FRAME_METHOD, FrameReader, content_frames, method_frame
from txamqp09.wire.versions import AMQP0_9_1

__all__ = ["Outcome", "Probe", "PROBES", "run_probe"]

#: Generated names: a probe's own (prefix, dash, 12 hex digits) and the broker's.
_GENERATED = re.compile(r"\b([a-z]+)-[0-9a-f]{12}\b|\bamq\.(gen|ctag)-[A-Za-z0-9_-]+")
#: Direct reply-to names (the pseudo-queue's name, a dot, what the broker chose).
_REPLY_NAME = re.compile(r"\bamq\.rabbitmq\.reply-to\.[A-Za-z0-9+/=._-]+")

#: The repr of pika's ConnectionClosedByBroker: code and quoted text.
_CLOSED_REPR = re.compile(r"ConnectionClosedByBroker: \((\d+)\) (.*)", re.DOTALL)


@dataclass(frozen=True)
class Outcome:
    """What a broker answered to a probe.

    :ivar scope: ``ok`` (nothing was closed), ``channel`` or ``connection``.
    :ivar code: the reply code of the close (200 for ``ok``).
    :ivar text: the close's reply text, names normalised (empty for ``ok``).
    :ivar detail: what the probe observed besides (counts, flags), or None.
    """

    scope: str
    code: int = 200
    text: str = ""
    detail: Any = None

    def __str__(self) -> str:
        shown = f"{self.scope} {self.code} {self.text!r}"
        return shown if self.detail is None else f"{shown} detail={self.detail!r}"


def normalised(text: str) -> str:
    """*text* with generated names replaced by ``<prefix>``, ``amq.gen-*``
    or ``amq.rabbitmq.reply-to.*``."""
    text = _REPLY_NAME.sub("amq.rabbitmq.reply-to.*", text)
    return _GENERATED.sub(
        lambda match: f"<{match.group(1)}>" if match.group(1) else f"amq.{match.group(2)}-*", text
    )


class Session:
    """The connections of one probe run against one broker.

    :param port: the broker's AMQP port on 127.0.0.1.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.token = uuid.uuid4().hex[:12]
        self.connections: list[BlockingConnection] = []
        self.raw_connections: list[RawConnection] = []

    def name(self, prefix: str) -> str:
        """A name only this run uses (normalised to ``<prefix>`` in texts)."""
        return f"{prefix}-{self.token}"

    def connect(self, **parameters: Any) -> BlockingConnection:
        """A new connection (guest/guest, vhost ``/`` unless *parameters* say otherwise)."""
        parameters.setdefault("host", "127.0.0.1")
        parameters.setdefault("port", self.port)
        connection = BlockingConnection(pika.ConnectionParameters(**parameters))
        self.connections.append(connection)
        return connection

    def channel(self) -> BlockingChannel:
        """A channel on a new connection."""
        return self.connect().channel()

    def raw(self, **options: Any) -> RawConnection:
        """A connection of bare frames, opened on vhost ``/`` with channel 1 open
        (*options*: the channel_max and frame_max of its tune-ok, the login's
        mechanism and response)."""
        connection = RawConnection(self.port, **options)
        self.raw_connections.append(connection)
        return connection

    def close(self) -> None:
        """Close every connection still open."""
        for connection in self.connections:
            if connection.is_open:
                try:
                    connection.close()
                except AMQPConnectionError:
                    pass
        for raw in self.raw_connections:
            raw.socket.close()


class RawConnection:
    """A 0-9-1 connection that sends any frame, for what pika cannot send.

    A close the broker sends is raised as pika's ChannelClosedByBroker or
    ConnectionClosedByBroker, as in the pika probes.
    """

    def __init__(
        self, port: int, channel_max: int = 2047, frame_max: int = 131072,
        mechanism: str = "PLAIN", response: bytes = b"\x00guest\x00guest",
    ) -> None:
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=10)
        self._reader = FrameReader(1 << 20)
        self._methods: list[tuple[int, Any]] = []
        self.socket.sendall(AMQP0_9_1.header)
        self.start = self.expect("connection.start")
        self.send(0, spec.ConnectionStartOk(
            client_properties={}, mechanism=mechanism, response=response, locale="en_US"))
        self.tune = self.expect("connection.tune")
        self.send(0, spec.ConnectionTuneOk(channel_max=channel_max, frame_max=frame_max, heartbeat=0))
        self.send(0, spec.ConnectionOpen(virtual_host="/"))
        self.expect("connection.open-ok")
        self.send(1, spec.ChannelOpen())
        self.expect("channel.open-ok")

    def send(self, channel: int, method: Any) -> None:
        """Send one method frame."""
        self.send_bytes(method_frame(channel, method))

    def send_bytes(self, data: bytes) -> None:
        """Send *data* as it is."""
        try:
            self.socket.sendall(data)
        except OSError:
            self.expect("connection.close-ok")

    def expect(self, name: str) -> Any:
        """The next method; a close is raised as pika's exception for it."""
        while not self._methods:
            try:
                data = self.socket.recv(65536)
            except OSError:
                data = b""
            if not data:
                raise ConnectionClosedByBroker(0, "the connection was dropped without connection.close")
            for frame_type, channel, payload in self._reader.feed(data):
                if frame_type == FRAME_METHOD:
                    self._methods.append((channel, decode_method(AMQP0_9_1.methods, payload)))
        channel, method = self._methods.pop(0)
        if method.NAME == "connection.close" and name != method.NAME:
            raise ConnectionClosedByBroker(method.reply_code, method.reply_text)
        if method.NAME == "channel.close" and name != method.NAME:
            raise ChannelClosedByBroker(method.reply_code, method.reply_text)
        if method.NAME != name:
            raise AssertionError(f"expected {name}, got {method.NAME} on channel {channel}")
        return method

    def sync(self) -> None:
        """One round trip on channel 1."""
        self.send(1, spec.BasicQos(prefetch_size=0, prefetch_count=0, global_=False))
        self.expect("basic.qos-ok")


#: A probe: drives the broker; may return a detail worth comparing.
Probe = Callable[[Session], Any]

#: Every probe, by name.
PROBES: dict[str, Probe] = {}


def probe(function: Probe) -> Probe:
    """Register *function* as a probe under its name."""
    PROBES[function.__name__] = function
    return function


def run_probe(probe: Probe, port: int) -> Outcome:
    """Run *probe* against the broker on *port*; its :class:`Outcome`."""
    session = Session(port)
    try:
        detail = probe(session)
    except ChannelClosedByBroker as closed:
        return Outcome("channel", closed.reply_code, normalised(closed.reply_text))
    except ConnectionClosedByBroker as closed:
        return Outcome("connection", closed.reply_code, normalised(closed.reply_text))
    except AMQPConnectionError as failed:
        # Refused while opening: pika wraps the broker's connection.close.
        # (as its repr when the close came during the handshake).
        for reason in failed.args:
            if isinstance(reason, ConnectionClosedByBroker):
                return Outcome("connection", reason.reply_code, normalised(reason.reply_text))
            shown = _CLOSED_REPR.fullmatch(str(reason))
            if shown is not None:
                text = ast.literal_eval(shown.group(2))
                return Outcome("connection", int(shown.group(1)), normalised(text))
        raise
    finally:
        session.close()
    return Outcome("ok", detail=detail)


def sync(channel: BlockingChannel) -> None:
    """One round trip on *channel*, so that an asynchronous refusal arrives."""
    channel.basic_qos(prefetch_count=0)


def settle(channel: BlockingChannel) -> None:
    """One round trip on *channel*, then run pika's callbacks for what arrived."""
    sync(channel)
    channel.connection.process_data_events(0)


def send(channel: BlockingChannel, method: Any, content: Optional[tuple[Any, bytes]] = None) -> None:
    """Send *method* (a ``pika.spec`` method) as it is, without waiting for an answer."""
    channel._impl._send_method(method, content)  # noqa: SLF001 - pika has no public way


# -- connection ----------------------------------------------------------------


@probe
def connection_unknown_vhost(s: Session) -> None:
    s.connect(virtual_host="no-such-vhost")


@probe
def connection_bad_password(s: Session) -> None:
    s.connect(credentials=pika.PlainCredentials("guest", "wrong"))


@probe
def connection_channel_number_above_channel_max(s: Session) -> Any:
    connection = s.connect(channel_max=16)
    channel = connection.channel(channel_number=1000)
    sync(channel)
    return channel.channel_number


@probe
def connection_more_channels_than_channel_max(s: Session) -> Any:
    connection = s.connect(channel_max=3)
    channels = [connection.channel(channel_number=number) for number in (1, 2, 3, 4)]
    sync(channels[-1])
    return len(channels)


@probe
def connection_channels_reopened_up_to_channel_max(s: Session) -> Any:
    connection = s.connect(channel_max=2)
    for _ in range(5):
        channel = connection.channel()
        sync(channel)
        channel.close()
    return "reopened"


@probe
def connection_update_secret(s: Session) -> Any:
    connection = s.connect(credentials=pika.PlainCredentials("guest", "guest"))
    connection.update_secret("guest", "rotation")
    sync(connection.channel())
    return "updated"


@probe
def connection_update_secret_another_secret(s: Session) -> Any:
    """pika's update_secret with a secret that is not the password: the
    internal users of RabbitMQ accept it and the connection stays open."""
    connection = s.connect()
    connection.update_secret("new_secret", "rotation")
    sync(connection.channel())
    return "updated"


# -- channel -------------------------------------------------------------------


@probe
def channel_flow_pause(s: Session) -> Any:
    channel = s.channel()
    return channel.flow(False)


@probe
def channel_flow_resume(s: Session) -> Any:
    channel = s.channel()
    return channel.flow(True)


# -- exchange ------------------------------------------------------------------


@probe
def exchange_unknown_type(s: Session) -> None:
    s.channel().exchange_declare(s.name("ex"), "no-such-type")


@probe
def exchange_unknown_type_existing(s: Session) -> None:
    channel = s.channel()
    channel.exchange_declare(s.name("ex"), "direct", auto_delete=True)
    channel.exchange_declare(s.name("ex"), "no-such-type", auto_delete=True)


@probe
def exchange_reserved_new(s: Session) -> None:
    s.channel().exchange_declare("amq." + s.name("ex"), "direct")


@probe
def exchange_reserved_own_type(s: Session) -> None:
    s.channel().exchange_declare("amq.direct", "direct", durable=True)


@probe
def exchange_reserved_own_type_not_durable(s: Session) -> None:
    s.channel().exchange_declare("amq.direct", "direct")


@probe
def exchange_reserved_other_type(s: Session) -> None:
    s.channel().exchange_declare("amq.direct", "fanout", durable=True)


@probe
def exchange_reserved_passive(s: Session) -> None:
    s.channel().exchange_declare("amq.topic", "direct", passive=True)


@probe
def exchange_default_declare(s: Session) -> None:
    s.channel().exchange_declare("", "direct", durable=True)


@probe
def exchange_default_passive(s: Session) -> None:
    s.channel().exchange_declare("", "direct", passive=True)


@probe
def exchange_passive_missing(s: Session) -> None:
    s.channel().exchange_declare(s.name("ex"), "direct", passive=True)


@probe
def exchange_redeclare_other_type(s: Session) -> None:
    channel = s.channel()
    channel.exchange_declare(s.name("ex"), "direct", auto_delete=True)
    channel.exchange_declare(s.name("ex"), "fanout", auto_delete=True)


@probe
def exchange_redeclare_other_durable(s: Session) -> None:
    channel = s.channel()
    channel.exchange_declare(s.name("ex"), "direct", auto_delete=True)
    try:
        channel.exchange_declare(s.name("ex"), "direct", auto_delete=True, durable=True)
    finally:
        s.channel().exchange_delete(s.name("ex"))


@probe
def exchange_redeclare_other_auto_delete(s: Session) -> None:
    channel = s.channel()
    channel.exchange_declare(s.name("ex"), "direct")
    try:
        channel.exchange_declare(s.name("ex"), "direct", auto_delete=True)
    finally:
        s.channel().exchange_delete(s.name("ex"))


@probe
def exchange_redeclare_other_internal(s: Session) -> None:
    channel = s.channel()
    channel.exchange_declare(s.name("ex"), "direct", auto_delete=True)
    try:
        channel.exchange_declare(s.name("ex"), "direct", auto_delete=True, internal=True)
    finally:
        s.channel().exchange_delete(s.name("ex"))


@probe
def exchange_redeclare_other_alternate(s: Session) -> None:
    channel = s.channel()
    channel.exchange_declare(s.name("ex"), "direct", arguments={"alternate-exchange": "a"})
    try:
        channel.exchange_declare(s.name("ex"), "direct", arguments={"alternate-exchange": "b"})
    finally:
        s.channel().exchange_delete(s.name("ex"))


@probe
def exchange_redeclare_equivalent(s: Session) -> None:
    channel = s.channel()
    channel.exchange_declare(s.name("ex"), "topic", auto_delete=True)
    channel.exchange_declare(s.name("ex"), "topic", auto_delete=True)
    channel.exchange_delete(s.name("ex"))


@probe
def exchange_delete_missing(s: Session) -> None:
    s.channel().exchange_delete(s.name("ex"))


@probe
def exchange_delete_reserved(s: Session) -> None:
    s.channel().exchange_delete("amq.fanout")


@probe
def exchange_delete_default(s: Session) -> None:
    s.channel().exchange_delete("")


@probe
def exchange_delete_if_unused_in_use(s: Session) -> None:
    channel = s.channel()
    channel.exchange_declare(s.name("ex"), "fanout")
    queue = channel.queue_declare("", exclusive=True).method.queue
    channel.queue_bind(queue, s.name("ex"))
    try:
        channel.exchange_delete(s.name("ex"), if_unused=True)
    finally:
        s.channel().exchange_delete(s.name("ex"))


@probe
def exchange_bind_missing_source(s: Session) -> None:
    s.channel().exchange_bind("amq.fanout", s.name("ex"), "k")


@probe
def exchange_bind_missing_destination(s: Session) -> None:
    s.channel().exchange_bind(s.name("ex"), "amq.fanout", "k")


@probe
def exchange_bind_default_source(s: Session) -> None:
    s.channel().exchange_bind("amq.fanout", "", "k")


@probe
def exchange_unbind_missing_binding(s: Session) -> None:
    s.channel().exchange_unbind("amq.fanout", "amq.direct", s.name("key"))


# -- queue ---------------------------------------------------------------------


@probe
def queue_reserved_name(s: Session) -> None:
    s.channel().queue_declare("amq." + s.name("q"))


@probe
def queue_passive_missing(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), passive=True)


@probe
def queue_passive_empty_name_nothing_declared(s: Session) -> None:
    s.channel().queue_declare("", passive=True)


@probe
def queue_redeclare_other_durable(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.queue_declare(s.name("q"), exclusive=True, durable=True)


@probe
def queue_redeclare_other_auto_delete(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.queue_declare(s.name("q"), exclusive=True, auto_delete=True)


@probe
def queue_redeclare_without_exclusive(s: Session) -> Any:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    return channel.queue_declare(s.name("q")).method.consumer_count


@probe
def queue_redeclare_with_exclusive(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), auto_delete=True)
    try:
        channel.queue_declare(s.name("q"), auto_delete=True, exclusive=True)
    finally:
        s.channel().queue_delete(s.name("q"))


@probe
def queue_redeclare_other_argument(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True, arguments={"x-message-ttl": 1000})
    channel.queue_declare(s.name("q"), exclusive=True, arguments={"x-message-ttl": 2000})


@probe
def queue_redeclare_argument_missing(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True, arguments={"x-max-length": 10})
    channel.queue_declare(s.name("q"), exclusive=True)


@probe
def queue_redeclare_other_type(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.queue_declare(s.name("q"), exclusive=True, arguments={"x-queue-type": "quorum"})


@probe
def queue_declare_unknown_type(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True, arguments={"x-queue-type": "nope"})


@probe
def queue_declare_negative_ttl(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True, arguments={"x-message-ttl": -1})


@probe
def queue_declare_ttl_not_a_number(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True, arguments={"x-message-ttl": "soon"})


@probe
def queue_declare_zero_expires(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True, arguments={"x-expires": 0})


@probe
def queue_declare_bad_overflow(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True, arguments={"x-overflow": "sideways"})


@probe
def queue_declare_bad_max_priority(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True, arguments={"x-max-priority": -3})


@probe
def queue_exclusive_other_connection_declare(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True)
    s.channel().queue_declare(s.name("q"), exclusive=True)


@probe
def queue_exclusive_other_connection_declare_shared(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True)
    s.channel().queue_declare(s.name("q"))


@probe
def queue_exclusive_other_connection_passive(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True)
    s.channel().queue_declare(s.name("q"), passive=True)


@probe
def queue_exclusive_other_connection_consume(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True)
    s.channel().basic_consume(s.name("q"), lambda *_: None)


@probe
def queue_exclusive_other_connection_delete(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True)
    s.channel().queue_delete(s.name("q"))


@probe
def queue_exclusive_other_connection_publish(s: Session) -> Any:
    owner = s.channel()
    owner.queue_declare(s.name("q"), exclusive=True)
    other = s.channel()
    other.basic_publish("", s.name("q"), b"x")
    sync(other)
    return owner.queue_declare(s.name("q"), passive=True).method.message_count


@probe
def queue_bind_missing_queue(s: Session) -> None:
    s.channel().queue_bind(s.name("q"), "amq.direct", "k")


@probe
def queue_bind_missing_exchange(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.queue_bind(s.name("q"), s.name("ex"), "k")


@probe
def queue_bind_default_exchange(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.queue_bind(s.name("q"), "", "k")


@probe
def queue_bind_empty_name_nothing_declared(s: Session) -> None:
    s.channel().queue_bind("", "amq.direct", "k")


@probe
def queue_unbind_missing_binding(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.queue_unbind(s.name("q"), "amq.direct", "k")


@probe
def queue_unbind_missing_queue(s: Session) -> None:
    s.channel().queue_unbind(s.name("q"), "amq.direct", "k")


@probe
def queue_purge_missing(s: Session) -> None:
    s.channel().queue_purge(s.name("q"))


@probe
def queue_purge_empty_name_nothing_declared(s: Session) -> None:
    s.channel().queue_purge("")


@probe
def queue_delete_missing(s: Session) -> Any:
    return s.channel().queue_delete(s.name("q")).method.message_count


@probe
def queue_delete_if_unused_in_use(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.basic_consume(s.name("q"), lambda *_: None)
    channel.queue_delete(s.name("q"), if_unused=True)


@probe
def queue_delete_if_empty_not_empty(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.basic_publish("", s.name("q"), b"x")
    channel.queue_delete(s.name("q"), if_empty=True)


@probe
def queue_delete_empty_name_nothing_declared(s: Session) -> None:
    s.channel().queue_delete("")


@probe
def queue_declare_counts(s: Session) -> Any:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.basic_publish("", s.name("q"), b"x")
    channel.basic_publish("", s.name("q"), b"y")
    channel.basic_consume(s.name("q"), lambda *_: None, auto_ack=False)
    ok = channel.queue_declare(s.name("q"), exclusive=True).method
    return ok.consumer_count


# -- basic ---------------------------------------------------------------------


@probe
def basic_consume_missing_queue(s: Session) -> None:
    s.channel().basic_consume(s.name("q"), lambda *_: None)


@probe
def basic_consume_empty_name_nothing_declared(s: Session) -> None:
    s.channel().basic_consume("", lambda *_: None)


@probe
def basic_consume_exclusive_taken(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.basic_consume(s.name("q"), lambda *_: None)
    channel.basic_consume(s.name("q"), lambda *_: None, exclusive=True)


@probe
def basic_consume_beside_exclusive(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.basic_consume(s.name("q"), lambda *_: None, exclusive=True)
    channel.basic_consume(s.name("q"), lambda *_: None)


@probe
def basic_consume_tag_reused(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.basic_consume(s.name("q"), lambda *_: None, consumer_tag=s.name("tag"))
    send(
        channel,
        pika.spec.Basic.Consume(queue=s.name("q"), consumer_tag=s.name("tag")),
    )
    sync(channel)


@probe
def basic_cancel_unknown_tag(s: Session) -> None:
    channel = s.channel()
    send(channel, pika.spec.Basic.Cancel(consumer_tag=s.name("tag")))
    sync(channel)


@probe
def basic_get_missing_queue(s: Session) -> None:
    s.channel().basic_get(s.name("q"))


@probe
def basic_get_empty_name_nothing_declared(s: Session) -> None:
    s.channel().basic_get("")


@probe
def basic_get_counts(s: Session) -> Any:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    for body in (b"1", b"2", b"3"):
        channel.basic_publish("", s.name("q"), body)
    method, _, body = channel.basic_get(s.name("q"), auto_ack=True)
    return method.message_count, body, method.redelivered


@probe
def basic_ack_unknown_tag(s: Session) -> None:
    channel = s.channel()
    channel.basic_ack(99)
    sync(channel)


@probe
def basic_ack_twice(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.basic_publish("", s.name("q"), b"x")
    method, _, _ = channel.basic_get(s.name("q"))
    channel.basic_ack(method.delivery_tag)
    channel.basic_ack(method.delivery_tag)
    sync(channel)


@probe
def basic_ack_multiple_zero_nothing_outstanding(s: Session) -> None:
    channel = s.channel()
    channel.basic_ack(0, multiple=True)
    sync(channel)


@probe
def basic_nack_unknown_tag(s: Session) -> None:
    channel = s.channel()
    channel.basic_nack(7)
    sync(channel)


@probe
def basic_reject_unknown_tag(s: Session) -> None:
    channel = s.channel()
    channel.basic_reject(7)
    sync(channel)


@probe
def basic_publish_missing_exchange(s: Session) -> None:
    channel = s.channel()
    channel.basic_publish(s.name("ex"), "k", b"x")
    sync(channel)


@probe
def basic_publish_internal_exchange(s: Session) -> None:
    channel = s.channel()
    channel.exchange_declare(s.name("ex"), "direct", internal=True, auto_delete=True)
    try:
        channel.basic_publish(s.name("ex"), "k", b"x")
        sync(channel)
    finally:
        s.channel().exchange_delete(s.name("ex"))


@probe
def basic_publish_mandatory_unroutable(s: Session) -> Any:
    channel = s.channel()
    returned: list[Any] = []
    channel.add_on_return_callback(lambda _ch, method, _p, body: returned.append((method.reply_code, method.reply_text, body)))
    channel.basic_publish("amq.direct", s.name("key"), b"x", mandatory=True)
    settle(channel)
    return returned


@probe
def basic_publish_immediate(s: Session) -> Any:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    returned: list[Any] = []
    channel.add_on_return_callback(lambda _ch, method, _p, _body: returned.append(method.reply_code))
    send(
        channel,
        pika.spec.Basic.Publish(exchange="", routing_key=s.name("q"), immediate=True),
        (pika.spec.BasicProperties(), b"x"),
    )
    settle(channel)
    return returned


@probe
def basic_qos_prefetch_size(s: Session) -> None:
    s.channel().basic_qos(prefetch_size=1000)


@probe
def basic_qos_global(s: Session) -> None:
    s.channel().basic_qos(prefetch_count=5, global_qos=True)


@probe
def basic_recover_requeue(s: Session) -> None:
    s.channel().basic_recover(requeue=True)


@probe
def basic_recover_without_requeue(s: Session) -> None:
    s.channel().basic_recover(requeue=False)


@probe
def basic_consume_stream_without_qos(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("s"), durable=True, arguments={"x-queue-type": "stream"})
    try:
        channel.basic_consume(s.name("s"), lambda *_: None)
    finally:
        s.channel().queue_delete(s.name("s"))


# -- confirm and tx ------------------------------------------------------------


@probe
def confirm_after_tx(s: Session) -> None:
    channel = s.channel()
    channel.tx_select()
    channel.confirm_delivery()


@probe
def tx_after_confirm(s: Session) -> None:
    channel = s.channel()
    channel.confirm_delivery()
    channel.tx_select()


@probe
def tx_commit_without_select(s: Session) -> None:
    s.channel().tx_commit()


@probe
def tx_rollback_without_select(s: Session) -> None:
    s.channel().tx_rollback()


@probe
def tx_ack_unknown_tag(s: Session) -> None:
    channel = s.channel()
    channel.tx_select()
    channel.basic_ack(5)
    channel.tx_commit()


@probe
def tx_rollback_keeps_acked_unacked(s: Session) -> Any:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.basic_publish("", s.name("q"), b"x")
    channel.tx_select()
    method, _, _ = channel.basic_get(s.name("q"))
    channel.basic_ack(method.delivery_tag)
    channel.tx_rollback()
    again = channel.basic_get(s.name("q"))[0]
    channel.basic_ack(method.delivery_tag)
    channel.tx_commit()
    after = channel.queue_declare(s.name("q"), passive=True).method.message_count
    return again is None, after


@probe
def confirm_publish_unroutable(s: Session) -> Any:
    channel = s.channel()
    channel.confirm_delivery()
    channel.basic_publish("amq.direct", s.name("key"), b"x")
    return "acked"


@probe
def queue_redeclare_shared_other_durable(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), auto_delete=True)
    try:
        channel.queue_declare(s.name("q"), auto_delete=True, durable=True)
    finally:
        s.channel().queue_delete(s.name("q"))


@probe
def queue_redeclare_exclusive_durable_first(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True, durable=True)
    channel.queue_declare(s.name("q"), exclusive=True)


# -- frames pika does not send -------------------------------------------------


@probe
def frame_method_on_unopened_channel(s: Session) -> None:
    raw = s.raw()
    raw.send(2, spec.QueueDeclare(queue=s.name("q"), exclusive=True))
    raw.sync()


@probe
def frame_channel_opened_twice(s: Session) -> None:
    raw = s.raw()
    raw.send(1, spec.ChannelOpen())
    raw.sync()


@probe
def frame_channel_method_on_channel_zero(s: Session) -> None:
    raw = s.raw()
    raw.send(0, spec.QueueDeclare(queue=s.name("q"), exclusive=True))
    raw.sync()


@probe
def frame_connection_method_on_channel_one(s: Session) -> None:
    raw = s.raw()
    raw.send(1, spec.ConnectionTuneOk(channel_max=0, frame_max=131072, heartbeat=0))
    raw.sync()


@probe
def frame_bad_frame_end(s: Session) -> None:
    raw = s.raw()
    frame = bytearray(method_frame(1, spec.BasicQos(prefetch_size=0, prefetch_count=0, global_=False)))
    frame[-1] = 0
    raw.send_bytes(bytes(frame))
    raw.sync()


@probe
def frame_unknown_type(s: Session) -> None:
    raw = s.raw()
    raw.send_bytes(struct.pack(">BHI", 9, 1, 1) + b"x\xce")
    raw.sync()


@probe
def frame_above_frame_max(s: Session) -> None:
    raw = s.raw()
    raw.send_bytes(struct.pack(">BHI", 3, 1, 200000) + b"x" * 200000 + b"\xce")
    raw.sync()


@probe
def frame_header_without_method(s: Session) -> None:
    raw = s.raw()
    frames = content_frames(1, spec.BasicPublish(exchange="", routing_key="k"), spec.BasicProperties(), b"x", 131072)
    (size,) = struct.unpack_from(">I", frames, 3)
    raw.send_bytes(frames[size + 8 :])
    raw.sync()


@probe
def frame_method_before_content(s: Session) -> None:
    raw = s.raw()
    raw.send(1, spec.BasicPublish(exchange="", routing_key="k"))
    raw.sync()


@probe
def frame_body_longer_than_announced(s: Session) -> None:
    raw = s.raw()
    frames = content_frames(1, spec.BasicPublish(exchange="", routing_key="k"), spec.BasicProperties(), b"abc", 131072)
    raw.send_bytes(frames[:-5] + struct.pack(">BHI", 3, 1, 2) + b"zz\xce")
    raw.sync()


@probe
def frame_unknown_method(s: Session) -> None:
    raw = s.raw()
    raw.send_bytes(struct.pack(">BHIHH", 1, 1, 4, 60, 999) + b"\xce")
    raw.sync()


@probe
def frame_server_method_from_client(s: Session) -> None:
    raw = s.raw()
    raw.send(1, spec.BasicGetEmpty())
    raw.sync()


@probe
def frame_close_ok_without_close(s: Session) -> None:
    raw = s.raw()
    raw.send(1, spec.ChannelCloseOk())
    raw.sync()


@probe
def frame_tune_ok_channel_max_zero(s: Session) -> None:
    s.raw(channel_max=0).sync()


@probe
def frame_tune_ok_channel_max_above_servers(s: Session) -> None:
    s.raw(channel_max=4000).sync()


@probe
def frame_tune_ok_frame_max_zero(s: Session) -> None:
    s.raw(frame_max=0).sync()


@probe
def frame_tune_ok_frame_max_too_small(s: Session) -> None:
    s.raw(frame_max=1024).sync()


@probe
def basic_recover_in_transaction(s: Session) -> None:
    channel = s.channel()
    channel.tx_select()
    channel.basic_recover(requeue=True)


@probe
def queue_bind_internal_exchange(s: Session) -> None:
    channel = s.channel()
    channel.exchange_declare(s.name("ex"), "direct", internal=True, auto_delete=True)
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.queue_bind(s.name("q"), s.name("ex"), "k")


@probe
def queue_bind_durable_queue_to_transient_exchange(s: Session) -> None:
    channel = s.channel()
    channel.exchange_declare(s.name("ex"), "direct", auto_delete=True)
    channel.queue_declare(s.name("q"), durable=True, auto_delete=True)
    try:
        channel.queue_bind(s.name("q"), s.name("ex"), "k")
    finally:
        s.channel().queue_delete(s.name("q"))


# -- queue arguments and queue types -------------------------------------------


def _declare_and_delete(s: Session, durable: bool = True, **flags: Any) -> None:
    """Declare queue ``<q>`` with *flags*, and delete it whatever happens."""
    try:
        s.channel().queue_declare(s.name("q"), durable=durable, **flags)
    finally:
        s.channel().queue_delete(s.name("q"))


@probe
def queue_declare_quorum_not_durable(s: Session) -> None:
    _declare_and_delete(s, durable=False, arguments={"x-queue-type": "quorum"})


@probe
def queue_declare_quorum_auto_delete(s: Session) -> None:
    _declare_and_delete(s, auto_delete=True, arguments={"x-queue-type": "quorum"})


@probe
def queue_declare_quorum_exclusive(s: Session) -> None:
    _declare_and_delete(s, exclusive=True, arguments={"x-queue-type": "quorum"})


@probe
def queue_declare_quorum_exclusive_auto_delete_not_durable(s: Session) -> None:
    _declare_and_delete(s, durable=False, exclusive=True, auto_delete=True, arguments={"x-queue-type": "quorum"})


@probe
def queue_declare_quorum_exclusive_not_durable(s: Session) -> None:
    _declare_and_delete(s, durable=False, exclusive=True, arguments={"x-queue-type": "quorum"})


@probe
def queue_declare_quorum_max_priority_not_durable(s: Session) -> None:
    _declare_and_delete(s, durable=False, arguments={"x-queue-type": "quorum", "x-max-priority": 5})


@probe
def queue_declare_quorum_reject_publish_dlx(s: Session) -> None:
    _declare_and_delete(s, arguments={"x-queue-type": "quorum", "x-overflow": "reject-publish-dlx"})


@probe
def queue_declare_quorum_max_priority(s: Session) -> None:
    _declare_and_delete(s, arguments={"x-queue-type": "quorum", "x-max-priority": 5})


@probe
def queue_declare_stream_not_durable(s: Session) -> None:
    _declare_and_delete(s, durable=False, arguments={"x-queue-type": "stream"})


@probe
def queue_declare_stream_exclusive(s: Session) -> None:
    _declare_and_delete(s, exclusive=True, arguments={"x-queue-type": "stream"})


@probe
def queue_declare_stream_max_priority(s: Session) -> None:
    _declare_and_delete(s, arguments={"x-queue-type": "stream", "x-max-priority": 5})


@probe
def queue_declare_quorum_lazy(s: Session) -> None:
    _declare_and_delete(s, arguments={"x-queue-type": "quorum", "x-queue-mode": "lazy"})


@probe
def queue_declare_classic_delivery_limit(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True, arguments={"x-delivery-limit": 3})


@probe
def queue_declare_ttl_beyond_32_bits(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True, arguments={"x-message-ttl": 2**62})


@probe
def queue_declare_expires_beyond_32_bits(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True, arguments={"x-expires": 2**33})


@probe
def queue_declare_dead_letter_routing_key_not_a_string(s: Session) -> None:
    s.channel().queue_declare(
        s.name("q"), exclusive=True,
        arguments={"x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": 5},
    )


@probe
def exchange_declare_alternate_exchange_not_a_string(s: Session) -> None:
    s.channel().exchange_declare(
        s.name("ex"), "direct", auto_delete=True, arguments={"alternate-exchange": 5}
    )


@probe
def queue_declare_dead_letter_exchange_not_a_string(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True, arguments={"x-dead-letter-exchange": 5})


@probe
def queue_declare_negative_max_length(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True, arguments={"x-max-length": -1})


@probe
def queue_declare_max_length_bytes_not_a_number(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True, arguments={"x-max-length-bytes": "big"})


@probe
def queue_declare_negative_expires(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True, arguments={"x-expires": -5})


@probe
def queue_declare_max_priority_above_255(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True, arguments={"x-max-priority": 300})


@probe
def queue_declare_dead_letter_routing_key_without_exchange(s: Session) -> None:
    s.channel().queue_declare(
        s.name("q"), exclusive=True, arguments={"x-dead-letter-routing-key": "k"}
    )


@probe
def queue_declare_bad_queue_mode(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True, arguments={"x-queue-mode": "fast"})


@probe
def queue_declare_single_active_consumer_not_a_boolean(s: Session) -> None:
    s.channel().queue_declare(
        s.name("q"), exclusive=True, arguments={"x-single-active-consumer": "yes"}
    )


@probe
def queue_purge_exclusive_other_connection(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True)
    s.channel().queue_purge(s.name("q"))


@probe
def queue_bind_exclusive_other_connection(s: Session) -> None:
    s.channel().queue_declare(s.name("q"), exclusive=True)
    s.channel().queue_bind(s.name("q"), "amq.direct", "k")


@probe
def queue_bind_headers_x_match_not_a_string(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.queue_bind(s.name("q"), "amq.headers", "", arguments={"x-match": 1})


@probe
def queue_purge_stream(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("s"), durable=True, arguments={"x-queue-type": "stream"})
    try:
        channel.queue_purge(s.name("s"))
    finally:
        s.channel().queue_delete(s.name("s"))


@probe
def queue_bind_headers_bad_x_match(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.queue_bind(s.name("q"), "amq.headers", "", arguments={"x-match": "some"})


# -- consumers and publishing --------------------------------------------------


def _publish_unroutable(s: Session, **properties: Any) -> None:
    """Publish a message with *properties* to amq.direct, routed nowhere, and sync."""
    channel = s.channel()
    channel.basic_publish("amq.direct", "k", b"x", pika.BasicProperties(**properties))
    sync(channel)


@probe
def basic_consume_priority_not_a_number(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.basic_consume(s.name("q"), lambda *_: None, arguments={"x-priority": "high"})


@probe
def basic_get_stream(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("s"), durable=True, arguments={"x-queue-type": "stream"})
    try:
        channel.basic_get(s.name("s"))
    finally:
        s.channel().queue_delete(s.name("s"))


@probe
def basic_consume_stream_auto_ack(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("s"), durable=True, arguments={"x-queue-type": "stream"})
    try:
        channel.basic_qos(prefetch_count=10)
        channel.basic_consume(s.name("s"), lambda *_: None, auto_ack=True)
    finally:
        s.channel().queue_delete(s.name("s"))


@probe
def basic_nack_multiple_unknown_tag(s: Session) -> None:
    channel = s.channel()
    channel.basic_nack(9, multiple=True)
    sync(channel)


@probe
def basic_publish_invalid_expiration(s: Session) -> None:
    _publish_unroutable(s, expiration="soon")


@probe
def basic_publish_negative_expiration(s: Session) -> None:
    _publish_unroutable(s, expiration="-1")


@probe
def basic_publish_other_user_id(s: Session) -> None:
    _publish_unroutable(s, user_id="someone")


@probe
def basic_publish_expiration_with_trailing_text(s: Session) -> None:
    _publish_unroutable(s, expiration="12abc")


@probe
def basic_publish_expiration_beyond_64_bits(s: Session) -> None:
    _publish_unroutable(s, expiration=str(2**70))


@probe
def basic_publish_expiration_with_sign(s: Session) -> Any:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.basic_publish("", s.name("q"), b"x", pika.BasicProperties(expiration="+60000"))
    method, properties, _ = channel.basic_get(s.name("q"), auto_ack=True)
    return method is not None, properties.expiration


# -- names and shortcuts -------------------------------------------------------


@probe
def connection_empty_vhost(s: Session) -> None:
    s.connect(virtual_host="")


@probe
def queue_passive_reserved_missing(s: Session) -> None:
    s.channel().queue_declare("amq." + s.name("q"), passive=True)


@probe
def queue_delete_reserved_missing(s: Session) -> Any:
    return s.channel().queue_delete("amq." + s.name("q")).method.message_count


@probe
def queue_bind_reserved_missing_exchange(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.queue_bind(s.name("q"), "amq." + s.name("ex"), "k")


@probe
def exchange_and_queue_odd_names(s: Session) -> Any:
    channel = s.channel()
    exchange, queue = s.name("ex") + " a/b!é", s.name("q") + " *#?"
    channel.exchange_declare(exchange, "topic", auto_delete=True)
    channel.queue_declare(queue, exclusive=True)
    channel.queue_bind(queue, exchange, "#")
    channel.basic_publish(exchange, "k", b"x")
    method, _, body = channel.basic_get(queue, auto_ack=True)
    return body


@probe
def basic_publish_amq_default(s: Session) -> Any:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.basic_publish("amq.default", s.name("q"), b"x")
    sync(channel)
    return channel.queue_declare(s.name("q"), passive=True).method.message_count


@probe
def basic_ack_multiple_unknown_tag(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.basic_publish("", s.name("q"), b"x")
    channel.basic_get(s.name("q"))
    channel.basic_ack(5, multiple=True)
    sync(channel)


@probe
def basic_cancel_other_channels_tag(s: Session) -> Any:
    connection = s.connect()
    first, second = connection.channel(), connection.channel()
    first.queue_declare(s.name("q"), exclusive=True)
    tag = first.basic_consume(s.name("q"), lambda *_: None)
    send(second, pika.spec.Basic.Cancel(consumer_tag=tag))
    sync(second)
    return len(first.consumer_tags)


# -- what a client sees besides errors -----------------------------------------


@probe
def queue_deleted_cancels_its_consumers(s: Session) -> Any:
    channel = s.channel()
    channel.queue_declare(s.name("q"), auto_delete=False)
    cancelled: list[str] = []
    channel.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.NAME))
    channel.basic_consume(s.name("q"), lambda *_: None)
    s.channel().queue_delete(s.name("q"))
    settle(channel)
    return cancelled


@probe
def basic_nack_requeue_redelivers(s: Session) -> Any:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.basic_publish("", s.name("q"), b"x")
    method, _, _ = channel.basic_get(s.name("q"))
    channel.basic_nack(method.delivery_tag, requeue=True)
    again, _, _ = channel.basic_get(s.name("q"), auto_ack=True)
    return method.redelivered, again.redelivered, again.delivery_tag


@probe
def queue_purge_and_delete_counts(s: Session) -> Any:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    for body in (b"1", b"2", b"3"):
        channel.basic_publish("", s.name("q"), body)
    purged = channel.queue_purge(s.name("q")).method.message_count
    channel.basic_publish("", s.name("q"), b"4")
    deleted = channel.queue_delete(s.name("q")).method.message_count
    return purged, deleted


@probe
def basic_get_empty(s: Session) -> Any:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    return channel.basic_get(s.name("q"))


@probe
def tx_rollback_drops_publishes(s: Session) -> Any:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.tx_select()
    channel.basic_publish("", s.name("q"), b"x")
    channel.tx_rollback()
    channel.basic_publish("", s.name("q"), b"y")
    channel.tx_commit()
    return channel.queue_declare(s.name("q"), passive=True).method.message_count


@probe
def exchange_delete_if_unused_with_exchange_binding(s: Session) -> None:
    channel = s.channel()
    channel.exchange_declare(s.name("src"), "direct", auto_delete=False)
    channel.exchange_declare(s.name("dst"), "direct", auto_delete=True)
    try:
        channel.exchange_bind(s.name("dst"), s.name("src"), "k")
        channel.exchange_delete(s.name("src"), if_unused=True)
    finally:
        s.channel().exchange_delete(s.name("src"))


@probe
def frame_login_unknown_mechanism(s: Session) -> None:
    s.raw(mechanism="NO-SUCH-MECHANISM")


@probe
def frame_login_malformed_plain_response(s: Session) -> None:
    s.raw(response=b"guest-without-separators")


@probe
def frame_connection_open_twice(s: Session) -> None:
    raw = s.raw()
    raw.send(0, spec.ConnectionOpen(virtual_host="/"))
    raw.sync()


# -- more paths through bindings, transactions and consumers -------------------


@probe
def tx_publish_missing_exchange(s: Session) -> None:
    channel = s.channel()
    channel.tx_select()
    channel.basic_publish(s.name("ex"), "k", b"x")
    channel.tx_commit()


@probe
def queue_unbind_missing_exchange(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.queue_unbind(s.name("q"), s.name("ex"), "k")


@probe
def exchange_unbind_missing_destination(s: Session) -> None:
    s.channel().exchange_unbind(s.name("dst"), "amq.direct", "k")


@probe
def exchange_unbind_missing_source(s: Session) -> None:
    s.channel().exchange_unbind("amq.direct", s.name("src"), "k")


@probe
def basic_consume_exclusive_on_single_active_consumer_queue(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True, arguments={"x-single-active-consumer": True})
    channel.basic_consume(s.name("q"), lambda *_: None, exclusive=True)


@probe
def basic_consume_quorum_with_global_qos(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), durable=True, arguments={"x-queue-type": "quorum"})
    try:
        channel.basic_qos(prefetch_count=5, global_qos=True)
        channel.basic_consume(s.name("q"), lambda *_: None)
    finally:
        s.channel().queue_delete(s.name("q"))


@contextmanager
def _quorum_queue(s: Session, channel: BlockingChannel, properties: Any = None, **arguments: Any) -> Iterator[str]:
    """Quorum queue ``<q>`` with *arguments*, holding one message published
    with confirms (with *properties*); deleted afterwards."""
    queue = s.name("q")
    channel.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum", **arguments})
    try:
        channel.confirm_delivery()
        channel.basic_publish("", queue, b"poison", properties)
        yield queue
    finally:
        s.channel().queue_delete(queue)


@probe
def basic_get_quorum_redelivery_count(s: Session) -> Any:
    """The x-delivery-count basic.get sees: 0, 1, 2 (and its field type)."""
    channel = s.channel()
    with _quorum_queue(s, channel) as queue:
        counts = []
        for _ in range(3):
            got, properties, _ = channel.basic_get(queue)
            count = (properties.headers or {}).get("x-delivery-count")
            counts.append((got.redelivered, count, type(count).__name__))
            channel.basic_nack(got.delivery_tag, requeue=True)
        return counts


def _rejected_until_gone(channel: BlockingChannel, queue: str) -> list[Any]:
    """Consume *queue*, rejecting each delivery with requeue, until none
    comes for a while: (redelivered, x-delivery-count) of each delivery."""
    seen = []
    for got, properties, _ in channel.consume(queue, inactivity_timeout=1.0):
        if got is None:
            break
        seen.append((got.redelivered, (properties.headers or {}).get("x-delivery-count")))
        channel.basic_reject(got.delivery_tag, requeue=True)
    channel.cancel()
    return seen


@probe
def basic_consume_quorum_delivery_limit_dead_letters(s: Session) -> Any:
    """A message rejected with requeue by a consumer until x-delivery-limit 2
    is passed: the counts it carries, then the copy the DLX gets."""
    channel = s.channel()
    dead, exchange = s.name("dead"), s.name("dlx")
    channel.exchange_declare(exchange, "fanout", auto_delete=True)
    channel.queue_declare(dead, exclusive=True)
    channel.queue_bind(dead, exchange)
    headers = pika.BasicProperties(headers={"app": "x"})
    with _quorum_queue(s, channel, headers, **{"x-delivery-limit": 2, "x-dead-letter-exchange": exchange}) as queue:
        seen = _rejected_until_gone(channel, queue)
        _, properties, body = channel.basic_get(dead, auto_ack=True)
        got = dict(properties.headers or {})
        deaths = [(death["reason"], death["count"], type(death["count"]).__name__) for death in got.pop("x-death", [])]
        return seen, body, sorted((key, normalised(str(value))) for key, value in got.items()), deaths


@probe
def basic_consume_quorum_delivery_limit_drops(s: Session) -> Any:
    """The same without a dead-letter exchange: the message is dropped."""
    channel = s.channel()
    with _quorum_queue(s, channel, **{"x-delivery-limit": 1}) as queue:
        seen = _rejected_until_gone(channel, queue)
        return seen, channel.queue_declare(queue, passive=True).method.message_count


@probe
def basic_consume_quorum_channel_closed_counts(s: Session) -> Any:
    """A delivery left unacknowledged by a channel that closes comes back counted."""
    channel = s.channel()
    with _quorum_queue(s, channel) as queue:
        first, _, _ = channel.basic_get(queue)
        channel.close()
        again, properties, _ = s.channel().basic_get(queue, auto_ack=True)
        return first.redelivered, again.redelivered, (properties.headers or {}).get("x-delivery-count")


# -- direct reply-to -------------------------------------------------------------

_REPLY_TO = "amq.rabbitmq.reply-to"


class Requester:
    """An RPC client on its own connection: consumes its replies on a channel."""

    def __init__(self, s: Session, **consume: Any) -> None:
        self.channel = s.channel()
        self.replies: list[Any] = []
        self.tag = self.channel.basic_consume(_REPLY_TO, self._replied, auto_ack=True, **consume)

    def _replied(self, _channel: Any, method: Any, properties: Any, body: bytes) -> None:
        self.replies.append((
            method.consumer_tag, method.delivery_tag, method.redelivered, method.exchange,
            normalised(method.routing_key), properties.correlation_id, body,
        ))

    def request(self, s: Session, correlation_id: str = "1") -> str:
        """Publish a request to a new queue; the reply-to a server finds in it."""
        queue = s.name("requests")
        self.channel.queue_declare(queue, exclusive=True)
        self.channel.basic_publish("", queue, b"request", pika.BasicProperties(
            reply_to=_REPLY_TO, correlation_id=correlation_id))
        got, properties, _ = self.channel.basic_get(queue, auto_ack=True)
        return str(properties.reply_to)

    def collect(self, count: int) -> list[Any]:
        """Wait (a few seconds at most) until *count* replies arrived; them."""
        for _ in range(50):
            if len(self.replies) >= count:
                break
            self.channel.connection.process_data_events(0.1)
        return self.replies


def _returned_on(channel: BlockingChannel) -> list[Any]:
    """The basic.returns *channel* gets from now on: (code, text, routing key, body)."""
    returned: list[Any] = []
    channel.add_on_return_callback(
        lambda _ch, method, _p, body: returned.append(
            (method.reply_code, method.reply_text, normalised(method.routing_key), body)))
    return returned


@probe
def reply_to_consume_with_acknowledgement(s: Session) -> None:
    s.channel().basic_consume(_REPLY_TO, lambda *_: None, auto_ack=False)


@probe
def reply_to_second_consumer(s: Session) -> None:
    requester = Requester(s)
    requester.channel.basic_consume(_REPLY_TO, lambda *_: None, auto_ack=True)


@probe
def reply_to_second_consumer_with_acknowledgement(s: Session) -> None:
    requester = Requester(s)
    requester.channel.basic_consume(_REPLY_TO, lambda *_: None, auto_ack=False)


@probe
def reply_to_consumer_tag_of_a_queue_consumer(s: Session) -> None:
    channel = s.channel()
    channel.queue_declare(s.name("q"), exclusive=True)
    channel.basic_consume(s.name("q"), lambda *_: None, consumer_tag="taken")
    send(channel, pika.spec.Basic.Consume(queue=_REPLY_TO, consumer_tag="taken", no_ack=True))
    sync(channel)


@probe
def reply_to_exclusive_consumer(s: Session) -> Any:
    return Requester(s, exclusive=True, consumer_tag="mine").tag


@probe
def reply_to_publish_without_consumer(s: Session) -> None:
    channel = s.channel()
    channel.basic_publish("", "nowhere", b"request", pika.BasicProperties(reply_to=_REPLY_TO))
    sync(channel)


@probe
def reply_to_publish_without_consumer_other_channel(s: Session) -> None:
    """The channel that consumes its replies is another one of the connection."""
    requester = Requester(s)
    channel = requester.channel.connection.channel()
    channel.basic_publish("", "nowhere", b"request", pika.BasicProperties(reply_to=_REPLY_TO))
    sync(channel)


@probe
def reply_to_declare_pseudo_queue(s: Session) -> Any:
    declared = s.channel().queue_declare(_REPLY_TO, passive=True).method
    return declared.queue, declared.message_count, declared.consumer_count


@probe
def reply_to_declare_pseudo_queue_with_flags(s: Session) -> Any:
    declared = s.channel().queue_declare(_REPLY_TO, durable=True, exclusive=True, auto_delete=True).method
    return declared.queue, declared.message_count, declared.consumer_count


@probe
def reply_to_declare_longer_name(s: Session) -> None:
    s.channel().queue_declare(_REPLY_TO + "x", passive=True)


@probe
def reply_to_declare_reply_name(s: Session) -> Any:
    reply_to = Requester(s).request(s)
    declared = s.channel().queue_declare(reply_to, passive=True).method
    return normalised(declared.queue), declared.message_count, declared.consumer_count


@probe
def reply_to_declare_reply_name_of_nobody(s: Session) -> None:
    """A reply name of the broker's making whose last characters differ."""
    reply_to = Requester(s).request(s)
    s.channel().queue_declare(reply_to[:-4] + ("AAAA" if not reply_to.endswith("AAAA") else "BBBB"), passive=True)


@probe
def reply_to_declare_malformed_reply_name(s: Session) -> None:
    s.channel().queue_declare(_REPLY_TO + ".abc.def", passive=True)


@probe
def reply_to_basic_get(s: Session) -> None:
    s.channel().basic_get(_REPLY_TO)


@probe
def reply_to_bind(s: Session) -> None:
    s.channel().queue_bind(_REPLY_TO, "amq.direct", "key")


@probe
def reply_to_delete(s: Session) -> Any:
    return s.channel().queue_delete(_REPLY_TO).method.message_count


@probe
def reply_to_round_trip(s: Session) -> Any:
    """The request's reply-to becomes the reply name; a reply to it comes
    back (a mandatory one is returned as well), confirmed."""
    requester = Requester(s, consumer_tag="mine")
    reply_to = requester.request(s)
    server = s.channel()
    server.confirm_delivery()
    returned = _returned_on(server)
    server.basic_publish("", reply_to, b"reply", pika.BasicProperties(correlation_id="1"))
    try:
        server.basic_publish("", reply_to, b"mandatory", pika.BasicProperties(correlation_id="2"), mandatory=True)
    except UnroutableError:
        returned.append("unroutable")
    settle(server)
    return normalised(reply_to), requester.collect(2), returned


@probe
def reply_to_delivery_tags(s: Session) -> Any:
    """Replies come under the tag the channel's next delivery gets."""
    requester = Requester(s, consumer_tag="mine")
    reply_to = requester.request(s)
    queue = s.name("work")
    requester.channel.queue_declare(queue, exclusive=True)
    requester.channel.basic_consume(queue, requester._replied, consumer_tag="work", auto_ack=False)
    server = s.channel()
    server.confirm_delivery()
    server.basic_publish("", queue, b"first")
    requester.collect(1)
    server.basic_publish("", reply_to, b"reply")
    requester.collect(2)
    server.basic_publish("", queue, b"second")
    return requester.collect(3)


@probe
def reply_to_in_a_transaction(s: Session) -> Any:
    """What the requester has before the server's tx.commit, and after."""
    requester = Requester(s, consumer_tag="mine")
    reply_to = requester.request(s)
    server = s.channel()
    server.tx_select()
    server.basic_publish("", reply_to, b"reply")
    sync(server)
    requester.channel.connection.process_data_events(0.5)
    before = len(requester.replies)
    server.tx_commit()
    return before, requester.collect(1)


@probe
def reply_to_requester_gone(s: Session) -> Any:
    """The requester's channel closed: a reply is dropped (returned when
    mandatory), and its name is not found."""
    requester = Requester(s)
    reply_to = requester.request(s)
    requester.channel.close()
    server = s.channel()
    server.confirm_delivery()
    returned = _returned_on(server)
    server.basic_publish("", reply_to, b"late")
    try:
        server.basic_publish("", reply_to, b"late, mandatory", mandatory=True)
    except UnroutableError:
        returned.append("unroutable")
    settle(server)
    server.queue_declare(reply_to, passive=True)
    return returned


@probe
def reply_to_cancelled(s: Session) -> Any:
    """After basic.cancel the channel has no reply name any more."""
    requester = Requester(s, consumer_tag="mine")
    reply_to = requester.request(s)
    requester.channel.basic_cancel("mine")
    try:
        s.channel().queue_declare(reply_to, passive=True)
    except ChannelClosedByBroker as closed:
        gone = (closed.reply_code, normalised(closed.reply_text))
    requester.channel.basic_publish("", "nowhere", b"request", pika.BasicProperties(reply_to=_REPLY_TO))
    try:
        sync(requester.channel)
    except ChannelClosedByBroker as closed:
        return gone, (closed.reply_code, normalised(closed.reply_text))
    return gone, "published"


@probe
def reply_to_through_another_exchange(s: Session) -> Any:
    """Only the default exchange reaches reply names."""
    requester = Requester(s)
    reply_to = requester.request(s)
    server = s.channel()
    server.confirm_delivery()
    returned = _returned_on(server)
    try:
        server.basic_publish("amq.direct", reply_to, b"reply", mandatory=True)
    except UnroutableError:
        returned.append("unroutable")
    settle(server)
    requester.collect(0)
    requester.channel.connection.process_data_events(0.3)
    return returned, requester.replies


@probe
def connection_start_and_tune(s: Session) -> Any:
    raw = s.raw()
    capabilities = raw.start.server_properties.get("capabilities", {})
    return (
        sorted(name for name, on in capabilities.items() if on),
        raw.start.mechanisms.split(), raw.start.locales,
        raw.tune.channel_max, raw.tune.frame_max, raw.tune.heartbeat,
    )
