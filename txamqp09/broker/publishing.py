"""The broker's hot path on one channel: publish -> route -> deliver -> ack.

A :class:`Publisher` is its channel's frame taker on the connection's
:class:`~txamqp09.wire.frames.FrameScanner`: basic.publish, its content
header and body frames, and basic.ack are read straight out of the input
buffer, without method objects, and handed to the channel's model
:class:`~txamqp09.broker.model.Session`. It is also that session's
:class:`~txamqp09.broker.model.ISink`: deliveries, returns and publisher
confirms are written with the precompiled builders of
:mod:`txamqp09.wire.frames`, forwarding the publisher's property bytes
unchanged. Every other method of the channel takes the general path
(:class:`~txamqp09.broker.channel.ServerChannel`).

Content properties naming the direct reply-to pseudo-queue as reply-to get
the channel's reply name there instead (see
:mod:`~txamqp09.broker.model.replies`); they are looked at only when a
content header's properties differ from the previous one's.

A content frame received while resource alarms are active blocks the
connection (:meth:`~txamqp09.broker.alarms.PublishGate.contentReceived`),
which pauses the frame scanner after that frame.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Callable, Optional, Protocol

from zope.interface import implementer

from txamqp09.broker.held import HeldOutput
from txamqp09.broker.base import ChannelBasics
from txamqp09.broker.model import Consumer, ISink, Message, Origin, Session
from txamqp09.broker.model.message import reply_to_span
from txamqp09.broker.model.replies import DIRECT_REPLY_TO, ReplyConsumer
from txamqp09.wire.base import CONTENT_HEADER
from txamqp09.wire.bodies import BodyBuffer
from txamqp09.wire.errors import (
    AMQPError,
    AMQPSyntaxError,
    FrameError,
    PreconditionFailed,
    UnexpectedFrame,
)
from txamqp09.wire.fields import encode_shortstr
from txamqp09.wire.frames import (
    BASIC_ACK,
    BASIC_CLASS,
    BASIC_NACK,
    FRAME_BODY,
    FRAME_HEADER,
    FRAME_METHOD,
    FRAME_OVERHEAD,
    BodyLike,
    ContentState,
    encoded_content_frames,
    tag_frame,
    unexpected_frame,
)

if TYPE_CHECKING:
    from txamqp09.broker.auth import AccessGuard
    from txamqp09.broker.base import ConnectionLike

__all__ = ["Publisher", "PublishingChannel", "blame"]

_METHOD_IDS = struct.Struct(">I")
_PUBLISH = (BASIC_CLASS << 16) | 40
_ACK = (BASIC_CLASS << 16) | BASIC_ACK
_TAG_AND_FLAG = struct.Struct(">QB")
_CONTENT_HEADER_SIZE = CONTENT_HEADER.size
_DELIVER_IDS = struct.pack(">HH", BASIC_CLASS, 60)
_GET_OK_IDS = struct.pack(">HH", BASIC_CLASS, 71)
_RETURN_IDS = struct.pack(">HH", BASIC_CLASS, 50)
_MESSAGE_COUNT = struct.Struct(">I")
_REPLY_CODE = struct.Struct(">H")
#: The direct reply-to pseudo-queue as a short string: content properties
#: holding it may name it as their reply-to.
_PSEUDO_QUEUE = encode_shortstr(DIRECT_REPLY_TO)
#: Distinct (ticket, exchange, routing key) triples remembered per channel.
_ENVELOPE_CACHE_SIZE = 1024


def blame(error: AMQPError, class_id: int, method_id: int) -> None:
    """Name the method that caused *error*, unless it names one already."""
    if not error.class_id:
        error.class_id, error.method_id = class_id, method_id


def _decode_name(raw: bytes | bytearray) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise AMQPSyntaxError("basic.publish: exchange or routing key is not UTF-8", 60, 40) from None


class PublishingChannel(ChannelBasics, Protocol):
    """A server channel as its publisher sees it (a
    :class:`~txamqp09.broker.channel.ServerChannel`)."""

    @property
    def connection(self) -> ConnectionLike:
        """The connection the channel belongs to."""


@implementer(ISink)
class Publisher:
    """The publish, deliver and acknowledge path of one server channel.

    :param channel: the server channel whose hot path this is.
    :param output: the channel's output, held while the store makes what an
        answer follows durable.
    :param cancelled: called when a consumer of the channel's session ended
        because its queue went (the channel tells the client).
    :param per_consumer_qos: as for :class:`~txamqp09.broker.model.Session`.
    :param rollback_redelivers: as for :class:`~txamqp09.broker.model.Session`.
    :param user_id: as for :class:`~txamqp09.broker.model.Session`.

    :ivar channel: the server channel.
    :ivar session: the channel's model session, with this as its sink.
    :ivar other_publishes: messages published on the channel by the other
        AMQP classes (file, stream, message...), through their own sessions.
    """

    __slots__ = (
        "channel", "session", "client", "number", "other_publishes", "_guard", "_tickets", "_gate", "_write", "_output",
        "_connection", "_cancelled", "_properties_class", "_body_max", "_max_body_size",
        "content", "_flags", "_raw_properties", "_last_properties", "_remaining", "_body",
        "_envelopes", "_envelopes_stamp", "_deliver_prefixes",
        "_confirms_pending", "_confirmed_up_to", "_held_confirms", "_several_frames", "_written",
    )

    def __init__(
        self,
        channel: PublishingChannel,
        output: HeldOutput,
        cancelled: Callable[[Consumer], None],
        *,
        per_consumer_qos: bool,
        rollback_redelivers: bool,
        user_id: Optional[str],
    ) -> None:
        connection = channel.connection
        assert connection.version is not None and connection.guard is not None
        self.channel = channel
        self.session = Session(
            channel.vhost, channel.client, self, per_consumer_qos=per_consumer_qos,
            rollback_redelivers=rollback_redelivers, user_id=user_id,
        )
        self.client = channel.client
        self.number = channel.number
        self.other_publishes = 0
        self._guard: AccessGuard = connection.guard
        self._tickets = connection.guard.tickets
        #: Alarms block the connection at a content frame while it is armed.
        self._gate = connection.gate
        self._write = connection.write
        self._output = output
        self._connection = connection
        self._cancelled = cancelled
        self._properties_class = connection.version.properties[BASIC_CLASS]
        self._body_max = connection.frame_max - FRAME_OVERHEAD
        self._max_body_size = connection.max_body_size
        #: The basic.publish waiting for content: the :data:`Origin` of its
        #: message; None when no content is due.
        self.content: Optional[Origin] = None
        #: The mandatory (1) and immediate (2) bits of that basic.publish.
        self._flags = 0
        self._raw_properties: Optional[bytes] = None
        #: The property bytes of the last content header: the next message
        #: with the same properties shares them (no copy per queued message).
        self._last_properties = b""
        self._remaining = 0
        #: The body frames so far of a body that spans several.
        self._body: Optional[BodyBuffer] = None
        #: basic.publish's (ticket, exchange, routing key) bytes -> decoded
        #: and checked origin, valid while the stamp below is current.
        self._envelopes: dict[bytes, Origin] = {}
        self._envelopes_stamp = -1
        #: basic.deliver's class and method ids and consumer tag, by tag.
        self._deliver_prefixes: dict[str, bytes] = {}
        self._confirms_pending = 0
        self._confirmed_up_to = 0
        #: (delivery tag, store sequence number) of each message the
        #: gathered acks cover that the session wrote to the store.
        self._written: list[tuple[int, int]] = []
        #: Acks sent to the output that it holds until the store is durable,
        #: with how many messages each covers (see :attr:`unconfirmed`).
        self._held_confirms: list[tuple[bytes, int]] = []
        #: Where a delivery's frames go when its body takes several (bound once).
        self._several_frames = self._severalFrames

    @property
    def content_state(self) -> ContentState:
        """What the channel expects next of basic.publish's content (the hot
        path reads :attr:`content` and the header's properties instead)."""
        if self.content is None:
            return ContentState.METHOD
        return ContentState.HEADER if self._raw_properties is None else ContentState.BODY

    def close(self) -> None:
        """The channel is closing: drop partial content and gathered confirms."""
        self.content = None
        self._raw_properties = None
        body = self._body
        if body is not None:
            self._body = None
            self._connection.bodyReleased(body.held, dropped=True)
            body.discard()
        self._confirms_pending = 0
        self._written.clear()
        self._held_confirms.clear()

    @property
    def publishes(self) -> int:
        """Messages published on the channel, in any class (the session's
        publish counter: nothing more is counted on the hot path)."""
        return self.session.stats.publish + self.other_publishes

    # -- frames in -------------------------------------------------------------

    def take(self, frame_type: int, buf: bytearray, start: int, end: int) -> bool:
        """The channel's :data:`~txamqp09.wire.frames.FrameTaker`: take
        basic.publish, its content and basic.ack; leave every other frame.

        The common cases are written out here rather than in helpers: one
        Python call less per frame is measurable on the hot path.
        """
        if self.content is None:
            if frame_type != FRAME_METHOD or end - start < 4:
                return False
            ids = _METHOD_IDS.unpack_from(buf, start)[0]
            if ids == _PUBLISH:
                # ticket (short), exchange and routing key (shortstr), bits
                offset = start + 4
                key_at = offset + 4 + buf[offset + 2] if offset + 3 <= end else end
                flags_at = key_at + buf[key_at - 1] if key_at <= end else end
                if flags_at >= end:
                    raise AMQPSyntaxError("basic.publish: frame ends inside its fields", 60, 40)
                fields = bytes(buf[offset:flags_at])
                content = self._envelopes.get(fields)
                tickets = self._tickets
                stamp = tickets.database.generation + tickets.usage.generation
                if content is None or stamp != self._envelopes_stamp:
                    content = self._checkedEnvelope(fields, stamp)
                self.content = content
                self._flags = buf[flags_at]
                return True
            if ids == _ACK:
                self._ack(buf, start + 4, end)
                return True
            return False
        if frame_type == FRAME_BODY:
            if self._raw_properties is None:
                raise unexpected_frame(
                    ContentState.HEADER, BASIC_CLASS, "a body frame came before the content header of basic.publish"
                )
            remaining = self._remaining - (end - start)
            if remaining == 0 and self._body is None:
                self._published(bytes(buf[start:end]))
            else:
                self._bodyPart(buf, start, end, remaining)
            if self._gate.armed:
                self._gate.contentReceived()
            return True
        if frame_type == FRAME_HEADER:
            if self._raw_properties is not None:
                raise unexpected_frame(
                    ContentState.BODY, BASIC_CLASS, "a second content header arrived for one basic.publish"
                )
            if end - start < _CONTENT_HEADER_SIZE + 2:
                raise FrameError(f"content header of {end - start} bytes is too short")
            class_id, _weight, size = CONTENT_HEADER.unpack_from(buf, start)
            if class_id != BASIC_CLASS or size > self._max_body_size:
                self._refuseHeader(class_id, size)
            last = self._last_properties
            if end - start - _CONTENT_HEADER_SIZE == len(last) and buf.startswith(last, start + _CONTENT_HEADER_SIZE):
                self._raw_properties = last
            else:
                raw = bytes(buf[start + _CONTENT_HEADER_SIZE : end])
                if _PSEUDO_QUEUE in raw:
                    raw = self._repliedTo(raw)
                self._raw_properties = self._last_properties = raw
            self._remaining = size
            if size == 0:
                self._published(b"")
            if self._gate.armed:
                self._gate.contentReceived()
            return True
        if frame_type == FRAME_METHOD:
            raise unexpected_frame(
                self.content_state, BASIC_CLASS,
                "a method frame arrived while basic.publish still waited for its content",
            )
        return False

    def _checkedEnvelope(self, fields: bytes, stamp: int) -> Origin:
        """Decode basic.publish's ticket, exchange and routing key, and check them.

        The result is remembered until the users database or any access
        ticket changes: both count their changes, and *stamp* is the sum of
        the counts now.

        :raises AccessRefused: the user may not publish to the exchange with this ticket.
        :raises NotAllowed: the ticket belongs to another channel.
        """
        if stamp != self._envelopes_stamp or len(self._envelopes) >= _ENVELOPE_CACHE_SIZE:
            self._envelopes.clear()
            self._envelopes_stamp = stamp
        key_at = 4 + fields[2]
        exchange = _decode_name(fields[3 : key_at - 1])
        routing_key = _decode_name(fields[key_at:])
        self._guard.check_publish(self.number, (fields[0] << 8) | fields[1], exchange, routing_key)
        content = (exchange, routing_key, fields[2:], self.client)
        self._envelopes[fields] = content
        return content

    def _refuseHeader(self, class_id: int, size: int) -> None:
        """Refuse a content header of another class or with too large a body."""
        if class_id != BASIC_CLASS:
            raise UnexpectedFrame(f"content header for class {class_id} follows basic.publish")
        self.content = None
        raise PreconditionFailed(
            f"message body of {size} bytes exceeds the maximum of {self._max_body_size} bytes",
            60,
            40,
        )

    def _repliedTo(self, raw: bytes) -> bytes:
        """*raw* content properties with the channel's direct reply-to name
        as reply-to where it is the pseudo-queue (see
        :mod:`~txamqp09.broker.model.replies`); as they are otherwise.

        :raises PreconditionFailed: the channel does not consume the
            pseudo-queue (406).
        """
        start, end = reply_to_span(raw)
        if raw[start:end] != _PSEUDO_QUEUE:
            return raw
        try:
            name = self.session.reply_name()
        except PreconditionFailed:
            self.content = None
            raise
        return raw[:start] + encode_shortstr(name) + raw[end:]

    def _bodyPart(self, buf: bytearray, start: int, end: int, remaining: int) -> None:
        """One of several body frames of the pending basic.publish, *remaining* bytes to go.

        The connection counts the bytes of unfinished bodies across its
        channels (:meth:`~txamqp09.broker.server.ServerConnection.bodyBuffered`).
        """
        if remaining < 0:
            raise FrameError(
                f"body frames carry {-remaining} bytes more than the content header announced"
            )
        size = end - start
        body = self._body
        if body is None:
            body = self._body = BodyBuffer(self._remaining)
        body.add(buf, start, end)
        self._remaining = remaining
        if remaining:
            self._connection.bodyBuffered(size)
        else:
            self._body = None
            self._connection.bodyReleased(body.held - size, dropped=False)
            self._published(body.take())

    # -- large body frames in pieces ------------------------------------------

    def startPieces(self, size: int) -> bool:
        """The scanner's :class:`~txamqp09.wire.frames.PieceTaker`: a body
        frame of *size* bytes begins; taken in pieces when it fits the
        pending basic.publish (else :meth:`take` gets it whole, and its error)."""
        if self._raw_properties is None or size > self._remaining:
            return False
        self._remaining -= size
        if self._body is None:
            self._body = BodyBuffer(self._remaining + size)
            self._connection.readLarge()
        return True

    def takePiece(self, piece: BodyLike) -> None:
        """The next piece of the body frame under way, kept as it is."""
        body = self._body
        if body is not None:  # else the channel closed in the middle of the frame
            body.append(piece)
            self._connection.bodyBuffered(len(piece))

    def endPieces(self) -> None:
        """The body frame under way is complete: the message is, when it was its last."""
        body = self._body
        if body is None:
            return
        if not self._remaining:
            self._body = None
            self._connection.bodyReleased(body.held, dropped=False)
            self._published(body.take())
        if self._gate.armed:
            self._gate.contentReceived()

    def _published(self, body: bytes) -> None:
        content = self.content
        assert content is not None and self._raw_properties is not None
        message = Message(content, self._raw_properties, body, self._properties_class)
        self.content = None
        self._raw_properties = None
        flags = self._flags
        try:
            self.session.publish(content[0], message, flags & 1 == 1, flags & 2 == 2)
        except AMQPError as error:
            blame(error, 60, 40)
            raise

    def _ack(self, buf: bytearray, offset: int, end: int) -> None:
        """basic.ack fields at *offset* (after the class and method ids)."""
        if offset + _TAG_AND_FLAG.size > end:
            raise AMQPSyntaxError("basic.ack: frame ends inside its fields", 60, 80)
        tag, flags = _TAG_AND_FLAG.unpack_from(buf, offset)
        try:
            self.session.ack(tag, bool(flags & 1))
        except AMQPError as error:
            blame(error, 60, 80)
            raise

    # -- consumers -------------------------------------------------------------

    def consuming(self, tag: str) -> None:
        """The channel's session has a basic consumer *tag*: deliveries to it may start."""
        self._deliver_prefixes[tag] = _DELIVER_IDS + encode_shortstr(tag)

    def stopped(self, tag: str) -> None:
        """The basic consumer *tag* ended."""
        self._deliver_prefixes.pop(tag, None)

    # -- the session's sink ----------------------------------------------------

    def deliver(
        self, consumer: Consumer | ReplyConsumer, delivery_tag: int, redelivered: bool, message: Message
    ) -> None:
        """basic.deliver with its content, in one write (a body of several
        frames: see :meth:`_severalFrames`)."""
        # Queues read a paged-out body back before they hand the message out.
        body: bytes = message.body  # type: ignore[assignment]
        frames = encoded_content_frames(
            self.number, BASIC_CLASS, self._deliver_prefixes[consumer.tag],
            _TAG_AND_FLAG.pack(delivery_tag, redelivered), message.origin[2],  # the envelope
            message.raw_properties, body, self._body_max, self._several_frames,
        )
        if self._output.held:
            self._output.send_after(0, frames)
        else:
            self._write(frames)

    def _severalFrames(self, parts: list[BodyLike]) -> bytes:
        """What is left to write of a content method's frames (basic.deliver,
        get-ok, return), its body's as views of it: when the output is held,
        all of them joined (to wait with it); else the last part (the last
        body frame's end byte), the others queued as they are (see
        :meth:`~txamqp09.protocol.AMQPConnection.writeParts`). So the
        caller writes what it gets, as for a content of one frame."""
        if self._output.held:
            return b"".join(parts)
        end = bytes(parts.pop())
        self._connection.writeParts(parts)
        return end

    def get_ok(self, delivery_tag: int, redelivered: bool, message: Message, message_count: int) -> None:
        """basic.get-ok with *message*'s content, after the answers held for the store."""
        self._sendContent(
            _GET_OK_IDS, _TAG_AND_FLAG.pack(delivery_tag, redelivered),
            message.envelope + _MESSAGE_COUNT.pack(message_count), message,
        )

    def returned(self, reply_code: int, reply_text: str, message: Message) -> None:
        """basic.return with the message's content."""
        self._sendContent(
            _RETURN_IDS, _REPLY_CODE.pack(reply_code) + encode_shortstr(reply_text),
            message.envelope, message,
        )

    def _sendContent(self, head: bytes, middle: bytes, tail: bytes, message: Message) -> None:
        """A basic content method with *message*'s content, after the answers
        held for the store (a body of several frames as :meth:`deliver` sends it)."""
        body: bytes = message.body  # type: ignore[assignment]
        frames = encoded_content_frames(
            self.number, BASIC_CLASS, head, middle, tail, message.raw_properties, body,
            self._body_max, self._several_frames,
        )
        self._output.send_after(0, frames)

    def confirmed(self, sequence: int, ack: bool) -> None:
        """Confirm one published message.

        Acks are gathered while the connection's input is handled and sent
        as one basic.ack with ``multiple`` at the end (see
        :meth:`flushConfirms`); a nack first sends the acks before it. The
        session's :attr:`~Session.confirming_write` says whether (and as
        which store operation) the message was written.
        """
        if ack:
            written = self.session.confirming_write
            if written:
                self._written.append((sequence, written))
            if not self._confirms_pending:
                self._connection.confirmsPending(self)
            self._confirms_pending += 1
            self._confirmed_up_to = sequence
            return
        self.flushConfirms()
        self._output.send_after(0, tag_frame(self.number, BASIC_NACK, sequence, 0))

    def flushConfirms(self) -> None:
        """Send the gathered acks: one basic.ack, ``multiple`` when it covers
        several, once the persistent messages among them are durable."""
        count = self._confirms_pending
        if count:
            self._confirms_pending = 0
            tag = self._confirmed_up_to
            ack = tag_frame(self.number, BASIC_ACK, tag, count > 1)
            output = self._output
            written, self._written = self._written, []
            output.confirm(
                max(self.session.stored_sequence, self.client.log_sequence), ack, written,
                lambda failed: self._confirms_after_failed_writes(tag, count, failed),
            )
            if output.held:
                self._held_confirms.append((ack, count))
            elif self._held_confirms:
                self._held_confirms.clear()

    def _confirms_after_failed_writes(self, tag: int, count: int, failed: list[int]) -> bytes:
        """The frames confirming the *count* publishes up to *tag* when the
        writes of those of *failed* (delivery tags, in order) failed: a
        basic.nack for each of them, then one basic.ack for the rest, naming
        the last of them (``multiple`` when there are several)."""
        frames = [tag_frame(self.number, BASIC_NACK, failed_tag, False) for failed_tag in failed]
        lost = set(failed)
        kept = [confirmed for confirmed in range(tag - count + 1, tag + 1) if confirmed not in lost]
        if kept:
            frames.append(tag_frame(self.number, BASIC_ACK, kept[-1], len(kept) > 1))
        return b"".join(frames)

    @property
    def unconfirmed(self) -> int:
        """Messages published in confirm mode whose confirm the client has
        not been sent yet: acks gathered while input is handled, and acks the
        output holds until the store has made their messages durable."""
        held = {id(frame) for _, frame, _ in self._output.held}
        self._held_confirms = [entry for entry in self._held_confirms if id(entry[0]) in held]
        return self._confirms_pending + sum(count for _, count in self._held_confirms)

    def cancelled(self, consumer: Consumer) -> None:
        """The consumer's queue went: forget it and have the channel tell the client."""
        self.stopped(consumer.tag)
        self._cancelled(consumer)

