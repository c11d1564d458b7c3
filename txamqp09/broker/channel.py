"""The server side of one channel: commands in, model calls, frames out.

:class:`ServerChannel` handles every exchange, queue, basic, tx, confirm,
access and channel method of the three versions through a table built once
per version from the handler names (``exchange_declare`` handles
exchange.declare). The file, stream, dtx, tunnel and message classes and
0-9's channel.ping, pong and ok are served by :mod:`txamqp09.broker.classes`;
methods of the 0-8 test class are refused with 540 not-implemented.

The publish -> route -> deliver -> ack path does not go through the table:
the connection's frame loop hands basic.publish, its content frames and
basic.ack straight to :meth:`ServerChannel.publishFrame`,
:meth:`~ServerChannel.headerFrame`, :meth:`~ServerChannel.bodyFrame` and
:meth:`~ServerChannel.ackFrame`, which read their fields from the input
buffer; deliveries are written with precompiled structs, forwarding the
publisher's property bytes unchanged.

Every method is checked against the user's permissions and access tickets
before its handler runs (:class:`~txamqp09.broker.auth.methods.AccessGuard`,
one table lookup for methods without rules); basic.publish on the hot path
is checked from its decoded ticket and exchange name.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, Callable, Optional

from twisted.python.failure import Failure
from zope.interface import implementer

from txamqp09.broker.classes import ChannelClasses, class_handler
from txamqp09.broker.dialects import Dialect
from txamqp09.broker.held import HeldOutput
from txamqp09.broker.model import Client, Consumer, ISink, Message, Session, VirtualHost
from txamqp09.broker.model.session import unique_name
from txamqp09.wire.base import CONTENT_HEADER, Method
from txamqp09.wire.bodies import BodyBuffer
from txamqp09.wire.errors import (
    AMQPError,
    AMQPNotImplemented,
    AMQPSyntaxError,
    CommandInvalid,
    FrameError,
    InternalError,
    NotAllowed,
    NotFound,
    PreconditionFailed,
    ResourceError,
    UnexpectedFrame,
)
from txamqp09.store.interface import WriteFailed
from txamqp09.wire.fields import encode_shortstr
from txamqp09.wire.frames import FRAME_OVERHEAD, Command, method_frame
from txamqp09.wire.versions import ProtocolVersion

if TYPE_CHECKING:
    from txamqp09.broker.auth import AccessGuard
    from txamqp09.broker.server import ServerConnection

__all__ = ["ServerChannel"]

_METHOD_FRAME = struct.Struct(">BHI")
#: frame-end of the method frame, then the content header frame's header.
_CONTENT_HEADER_FRAME = struct.Struct(">BBHIHHQ")
#: frame-end of the previous frame, then a body frame's header.
_BODY_FRAME = struct.Struct(">BBHI")
_TAG_AND_FLAG = struct.Struct(">QB")
_ACK_FIELDS = struct.Struct(">QB")
_CONFIRM_FRAME = struct.Struct(">BHIHHQBB")
_FRAME_END = 0xCE
_CONTENT_HEADER_SIZE = CONTENT_HEADER.size
_END = b"\xce"
_DELIVER_IDS = struct.pack(">HH", 60, 60)
_GET_OK_IDS = struct.pack(">HH", 60, 71)
_RETURN_IDS = struct.pack(">HH", 60, 50)
_MESSAGE_COUNT = struct.Struct(">I")
_REPLY_CODE = struct.Struct(">H")
#: Distinct (ticket, exchange, routing key) triples remembered per channel.
_ENVELOPE_CACHE_SIZE = 1024

#: Handler of one method: (channel, method) -> None.
Handler = Callable[["ServerChannel", Any], None]


def _decode_name(raw: bytes | bytearray) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise AMQPSyntaxError("basic.publish: exchange or routing key is not UTF-8", 60, 40) from None


@implementer(ISink)
class ServerChannel:
    """One open channel of a :class:`~txamqp09.broker.server.ServerConnection`.

    :param connection: the connection the channel belongs to.
    :param number: the channel number.
    :param vhost: the virtual host the connection opened.
    :param client: the connection's model counterpart.

    Performance note: keep the instance attributes at 29 or fewer. With a
    30th, CPython 3.11 moves them from the shared-key layout to a dict of
    their own and every attribute access gets slower: measured, +4 % CPU
    instructions per published and delivered message.
    """

    def __init__(
        self, connection: ServerConnection, number: int, vhost: VirtualHost, client: Client
    ) -> None:
        assert connection.version is not None and connection.guard is not None
        assert connection.user is not None
        self.connection = connection
        self.number = number
        self.version: ProtocolVersion = connection.version
        self.spec: Any = connection.version.spec
        self.vhost = vhost
        self.client = client
        self.session = Session(
            vhost, client, self, per_consumer_qos=connection.dialect.per_consumer_qos,
            rollback_redelivers=not connection.dialect.rollback_keeps_acked,
            user_id=connection.dialect.publisher_user_id(connection.user.name, connection.user.tags),
        )
        self.handlers = handlers_for(self.version)
        self._write = connection.write
        self._properties_class = self.version.properties[60]
        self._body_max = connection.frame_max - FRAME_OVERHEAD
        #: The basic.publish waiting for content: (exchange, routing key,
        #: their wire encoding); None when no content is due.
        self.content: Optional[tuple[str, str, bytes]] = None
        #: The mandatory (1) and immediate (2) bits of that basic.publish.
        self._flags = 0
        self._max_body_size = connection.max_body_size
        self._raw_properties: Optional[bytes] = None
        self._remaining = 0
        #: The body frames so far of a body that spans several.
        self._body: Optional[BodyBuffer] = None
        #: basic.publish's (ticket, exchange, routing key) bytes -> decoded
        #: and checked content, valid while the stamp below is current.
        self._envelopes: dict[bytes, tuple[str, str, bytes]] = {}
        self._envelopes_stamp = -1
        self._tickets = connection.guard.tickets
        self._deliver_prefixes: dict[str, bytes] = {}
        #: The queue most recently declared here (the empty-name shortcut).
        self.last_queue = ""
        #: The name the next server-named queue gets, once checked.
        self._next_queue_name: Optional[str] = None
        self._confirms_pending = 0
        self._confirmed_up_to = 0
        persistence = vhost.persistence
        #: Confirms and answers, each sent once what it follows is durable.
        self._output = HeldOutput(
            persistence.store if persistence is not None else None,
            self._write, lambda: self.session.closed, self._storeFailed,
        )
        #: Messages published on this channel.
        self.publishes = 0
        #: The state of the classes beyond basic used on this channel (None
        #: until one is used; always there on 0-9, for the channel-id).
        self.classes: Optional[ChannelClasses] = None

    # -- dispatch --------------------------------------------------------------

    def methodReceived(self, method: Method, command: Optional[Command] = None) -> None:
        """Handle a method (other than channel.open/close) arriving on this channel.

        :param command: the method with its content, for a content method
            (whose handler receives the command instead of the method).
        """
        handler = self.handlers.get(type(method))
        if handler is None:
            raise _refusal(method)
        try:
            self.guard.check(self.number, method, queue=self._checked_queue(method))
            self._output.method_started()
            handler(self, method if command is None else command)
        except AMQPError as error:
            _blame(error, method.CLASS_ID, method.METHOD_ID)
            raise

    @property
    def awaits_header(self) -> bool:
        """basic.publish waits for its content header (not for body frames)."""
        return self._raw_properties is None

    @property
    def dialect(self) -> Dialect:
        """The rules of the connection's protocol version (not an attribute:
        see the class's note)."""
        return self.connection.dialect

    @property
    def guard(self) -> AccessGuard:
        """The connection's access guard (not an attribute: see the class's note)."""
        guard = self.connection.guard
        assert guard is not None
        return guard

    def _checked_queue(self, method: Any) -> Optional[str]:
        """The queue *method* acts on when its ``queue`` field is empty (None otherwise).

        That is the queue last declared on this channel, or for a new
        server-named queue the name it will get, so that permissions are
        checked on the real name, as RabbitMQ does.

        :raises NotFound: the channel has declared no queue yet.
        """
        if getattr(method, "queue", None) != "":
            return None
        if method.NAME == "queue.declare":
            if method.passive:
                return self.last_queue or None
            if self._next_queue_name is None:
                self._next_queue_name = unique_name("amq.gen-")
            return self._next_queue_name
        return self._queue_name("")

    def _reply(self, method: Method) -> None:
        """Answer the current method, once what it wrote to the store is durable."""
        self._output.answer(method_frame(self.number, method))

    def close(self, interrupted: bool = False) -> None:
        """The channel is closing: settle the model side (requeue unacked, end
        consumers) and destroy its access tickets.

        :param interrupted: the connection ended while the channel was open
            (0-9's channel.resume may take it over).
        """
        self.content = None
        body = self._body
        if body is not None:
            self._body = None
            self.connection.bodyReleased(body.held, dropped=True)
            body.discard()
        self._confirms_pending = 0
        self._output.clear()
        if self.classes is not None:
            self.classes.close(interrupted)
        self.session.close()
        self.guard.channel_closed(self.number)

    # -- hot path: publish ---------------------------------------------------

    def publishFrame(self, buf: bytearray, offset: int, end: int) -> None:
        """basic.publish fields at *offset* (after the class and method ids)."""
        exchange_at = offset + 3
        if exchange_at > end:
            raise AMQPSyntaxError("basic.publish: frame ends inside its fields", 60, 40)
        key_at = exchange_at + buf[offset + 2] + 1
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

    def _checkedEnvelope(self, fields: bytes, stamp: int) -> tuple[str, str, bytes]:
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
        self.guard.check_publish(self.number, (fields[0] << 8) | fields[1], exchange, routing_key)
        content = (exchange, routing_key, fields[2:])
        self._envelopes[fields] = content
        return content

    def headerFrame(self, buf: bytearray, start: int, end: int) -> None:
        """The content header of the pending basic.publish."""
        if self._raw_properties is not None:
            raise UnexpectedFrame(
                "expected content body, got non content body frame instead",
                hint="a second content header arrived for one basic.publish",
            )
        if end - start < _CONTENT_HEADER_SIZE + 2:
            raise FrameError(f"content header of {end - start} bytes is too short")
        class_id, _weight, size = CONTENT_HEADER.unpack_from(buf, start)
        if class_id != 60:
            raise UnexpectedFrame(f"content header for class {class_id} follows basic.publish")
        if size > self._max_body_size:
            self.content = None
            raise PreconditionFailed(
                f"message body of {size} bytes exceeds the maximum of {self._max_body_size} bytes",
                60,
                40,
            )
        self._raw_properties = bytes(buf[start + _CONTENT_HEADER_SIZE : end])
        self._remaining = size
        if size == 0:
            self._published(b"")

    def bodyFrame(self, buf: bytearray, start: int, end: int) -> None:
        """A body frame of the pending basic.publish."""
        if self._raw_properties is None:
            raise UnexpectedFrame(
                "expected content header for class 60, got non content header frame instead",
                hint="a body frame came before the content header of basic.publish",
            )
        size = end - start
        remaining = self._remaining - size
        if remaining < 0:
            raise FrameError(
                f"body frames carry {-remaining} bytes more than the content header announced"
            )
        body = self._body
        if body is None:
            if remaining == 0:
                self._published(bytes(buf[start:end]))
                return
            body = self._body = BodyBuffer(self._remaining)
        body.add(buf, start, end)
        self._remaining = remaining
        if remaining:
            self.connection.bodyBuffered(size)
        else:
            self._body = None
            self.connection.bodyReleased(body.held - size, dropped=False)
            self._published(body.take())

    def _published(self, body: bytes) -> None:
        content = self.content
        assert content is not None and self._raw_properties is not None
        exchange, routing_key, envelope = content
        message = Message(
            exchange, routing_key, envelope, self._raw_properties, body,
            self._properties_class, self.client,
        )
        self.content = None
        self._raw_properties = None
        self.publishes += 1
        flags = self._flags
        try:
            self.session.publish(exchange, message, flags & 1 == 1, flags & 2 == 2)
        except AMQPError as error:
            _blame(error, 60, 40)
            raise

    # -- hot path: ack -------------------------------------------------------

    def ackFrame(self, buf: bytearray, offset: int, end: int) -> None:
        """basic.ack fields at *offset* (after the class and method ids)."""
        if offset + _ACK_FIELDS.size > end:
            raise AMQPSyntaxError("basic.ack: frame ends inside its fields", 60, 80)
        tag, flags = _ACK_FIELDS.unpack_from(buf, offset)
        try:
            self.session.ack(tag, bool(flags & 1))
        except AMQPError as error:
            _blame(error, 60, 80)
            raise

    # -- sink: what the model sends ------------------------------------------

    def deliver(self, consumer: Consumer, delivery_tag: int, redelivered: bool, message: Message) -> None:
        """basic.deliver with its content, in one write."""
        prefix = self._deliver_prefixes[consumer.tag]
        frames = self._content(
            prefix, _TAG_AND_FLAG.pack(delivery_tag, redelivered), message.envelope, message
        )
        if self._output.held:
            self._output.send_after(0, frames)
        else:
            self._write(frames)

    def _send(self, frames: bytes) -> None:
        """Write *frames* now, or after the answers held for the store."""
        self._output.send_after(0, frames)

    def _content(self, ids_and_head: bytes, middle: bytes, tail: bytes, message: Message) -> bytes:
        """A content method (``ids_and_head + middle + tail``) with header and body frames."""
        number = self.number
        raw = message.raw_properties
        # Queues read a paged-out body back before they hand the message out.
        body: bytes = message.body  # type: ignore[assignment]
        size = len(body)
        method_frame = _METHOD_FRAME.pack(1, number, len(ids_and_head) + len(middle) + len(tail))
        header_frame = _CONTENT_HEADER_FRAME.pack(_FRAME_END, 2, number, 12 + len(raw), 60, 0, size)
        chunk = self._body_max
        if size <= chunk:
            body_frame = _BODY_FRAME.pack(_FRAME_END, 3, number, size) if size else b""
            return b"".join(
                (method_frame, ids_and_head, middle, tail, header_frame, raw, body_frame, body, _END)
            )
        parts = [method_frame, ids_and_head, middle, tail, header_frame, raw]
        for start in range(0, size, chunk):
            piece = body[start : start + chunk]
            parts.append(_BODY_FRAME.pack(_FRAME_END, 3, number, len(piece)))
            parts.append(piece)
        parts.append(_END)
        return b"".join(parts)

    def returned(self, reply_code: int, reply_text: str, message: Message) -> None:
        """basic.return with the message's content."""
        self._send(
            self._content(
                _RETURN_IDS, _REPLY_CODE.pack(reply_code) + encode_shortstr(reply_text),
                message.envelope, message,
            )
        )

    def confirmed(self, sequence: int, ack: bool) -> None:
        """Confirm one published message.

        Acks are gathered while the connection's input is handled and sent
        as one basic.ack with ``multiple`` at the end (see
        :meth:`flushConfirms`); a nack first sends the acks before it.
        """
        if ack:
            if not self._confirms_pending:
                self.connection.confirmsPending(self)
            self._confirms_pending += 1
            self._confirmed_up_to = sequence
            return
        self.flushConfirms()
        self._output.send_after(0, _CONFIRM_FRAME.pack(1, self.number, 13, 60, 120, sequence, 0, _FRAME_END))

    def flushConfirms(self) -> None:
        """Send the gathered acks: one basic.ack, ``multiple`` when it covers
        several, once the persistent messages among them are durable."""
        if self._confirms_pending:
            multiple = self._confirms_pending > 1
            self._confirms_pending = 0
            tag = self._confirmed_up_to
            self._output.confirm(
                max(self.session.stored_sequence, self.client.log_sequence),
                _CONFIRM_FRAME.pack(1, self.number, 13, 60, 80, tag, multiple, _FRAME_END),
                _CONFIRM_FRAME.pack(1, self.number, 13, 60, 120, tag, multiple, _FRAME_END),
            )

    def oldestUnacked(self) -> Optional[int]:
        """The delivery tag of the oldest delivery not yet acknowledged, or None."""
        return next(iter(self.session.unacked), None)

    def ackTimedOut(self, error: PreconditionFailed) -> None:
        """A delivery stayed unacknowledged too long: close the channel with
        *error* (what it had unacknowledged is requeued)."""
        self.connection.channelError(self.number, error)

    def _storeFailed(self, failure: Failure) -> None:
        """The store could not write what a method changed (the disk is full
        or failing: 506), or cannot make anything durable any more (541):
        what waits can never be sent."""
        if self.session.closed:
            return
        if failure.check(WriteFailed):
            self.connection.close(ResourceError(f"{failure.getErrorMessage()}: the disk is full or failing"))
        else:
            self.connection.close(InternalError(f"the message store failed: {failure.getErrorMessage()}"))

    def cancelled(self, consumer: Consumer) -> None:
        """Tell a client that advertises consumer_cancel_notify that its queue went."""
        self._deliver_prefixes.pop(consumer.tag, None)
        if self.connection.cancel_notify:
            self._reply(self.spec.BasicCancel(consumer_tag=consumer.tag, nowait=True))

    # -- channel -------------------------------------------------------------

    def channel_flow(self, method: Any) -> None:
        """The client pauses (or resumes) deliveries to this channel."""
        self.session.flow(method.active)
        if self.classes is not None:
            self.classes.flow(method.active)
        self._reply(self.spec.ChannelFlowOk(active=method.active))

    def channel_flow_ok(self, method: Any) -> None:
        """The client confirms a channel.flow the server sent."""

    def access_request(self, method: Any) -> None:
        """0-8 / 0-9: grant a ticket for the realm, if the user holds the rights asked for."""
        self._reply(self.spec.AccessRequestOk(ticket=self.guard.request_ticket(self.number, method)))

    # -- exchange ------------------------------------------------------------

    def exchange_declare(self, method: Any) -> None:
        self.vhost.declare_exchange(
            method.exchange,
            method.type,
            passive=method.passive,
            durable=method.durable,
            auto_delete=method.auto_delete,
            internal=method.internal,
            arguments=method.arguments,
            dialect=self.dialect,
        )
        if not method.nowait:
            self._reply(self.spec.ExchangeDeclareOk())

    def exchange_delete(self, method: Any) -> None:
        self.vhost.delete_exchange(method.exchange, if_unused=method.if_unused, dialect=self.dialect)
        if not method.nowait:
            self._reply(self.spec.ExchangeDeleteOk())

    def exchange_bind(self, method: Any) -> None:
        self.vhost.bind_exchange(method.destination, method.source, method.routing_key, method.arguments)
        if not method.nowait:
            self._reply(self.spec.ExchangeBindOk())

    def exchange_unbind(self, method: Any) -> None:
        self.vhost.unbind_exchange(method.destination, method.source, method.routing_key, method.arguments)
        if not method.nowait:
            self._reply(self.spec.ExchangeUnbindOk())

    # -- queue ---------------------------------------------------------------

    def _queue_name(self, name: str) -> str:
        """*name*, or the queue last declared on this channel when it is empty.

        :raises NotFound: none was declared (RabbitMQ's dialect, 404).
        :raises NotAllowed: none was declared (the specifications' dialect, 530).
        """
        if name:
            return name
        if not self.last_queue:
            refusal = NotFound if self.dialect.empty_queue_name_not_found else NotAllowed
            raise refusal("no previously declared queue", hint="name the queue: none was declared on this channel")
        return self.last_queue

    def queue_declare(self, method: Any) -> None:
        name = method.queue
        server_named = not name and not method.passive
        if server_named:
            # Generated and checked by _checked_queue before this handler ran.
            assert self._next_queue_name is not None
            name, self._next_queue_name = self._next_queue_name, None
        elif method.passive:
            name = name or self.last_queue
        queue = self.vhost.declare_queue(
            name,
            self.client,
            passive=method.passive,
            durable=method.durable,
            exclusive=method.exclusive,
            auto_delete=method.auto_delete,
            arguments=method.arguments,
            server_named=server_named,
            dialect=self.dialect,
        )
        self.last_queue = queue.name
        if not method.nowait:
            self._reply(
                self.spec.QueueDeclareOk(
                    queue=queue.name,
                    message_count=queue.message_count,
                    consumer_count=queue.consumer_count,
                )
            )

    def _binding_names(self, method: Any) -> tuple[str, str]:
        """Queue name and routing key of a bind/unbind, with the empty-name shortcut."""
        queue = self._queue_name(method.queue)
        routing_key = method.routing_key if method.queue or method.routing_key else queue
        return queue, routing_key

    def queue_bind(self, method: Any) -> None:
        queue, routing_key = self._binding_names(method)
        self.vhost.bind_queue(queue, method.exchange, routing_key, method.arguments, self.client, self.dialect)
        if not method.nowait:
            self._reply(self.spec.QueueBindOk())

    def queue_unbind(self, method: Any) -> None:
        queue, routing_key = self._binding_names(method)
        self.vhost.unbind_queue(queue, method.exchange, routing_key, method.arguments, self.client, self.dialect)
        self._reply(self.spec.QueueUnbindOk())

    def queue_purge(self, method: Any) -> None:
        count = self.vhost.purge_queue(self._queue_name(method.queue), self.client)
        if not method.nowait:
            self._reply(self.spec.QueuePurgeOk(message_count=count))

    def queue_delete(self, method: Any) -> None:
        count = self.vhost.delete_queue_named(
            self._queue_name(method.queue),
            self.client,
            if_unused=method.if_unused,
            if_empty=method.if_empty,
            dialect=self.dialect,
        )
        if not method.nowait:
            self._reply(self.spec.QueueDeleteOk(message_count=count))

    # -- basic ---------------------------------------------------------------

    def basic_qos(self, method: Any) -> None:
        self.session.qos(method.prefetch_size, method.prefetch_count, method.global_)
        self._reply(self.spec.BasicQosOk())

    def basic_consume(self, method: Any) -> None:
        queue = self.vhost.queue(self._queue_name(method.queue), self.client)
        tag = method.consumer_tag or unique_name("amq.ctag-")
        consumer = self.session.consume(
            queue, tag, no_ack=method.no_ack, no_local=method.no_local, exclusive=method.exclusive,
            arguments=getattr(method, "arguments", None),
        )
        self._deliver_prefixes[tag] = _DELIVER_IDS + encode_shortstr(tag)
        if not method.nowait:
            self._reply(self.spec.BasicConsumeOk(consumer_tag=tag))
        consumer.start()

    def basic_cancel(self, method: Any) -> None:
        self.session.cancel(method.consumer_tag)
        self._deliver_prefixes.pop(method.consumer_tag, None)
        if not method.nowait:
            self._reply(self.spec.BasicCancelOk(consumer_tag=method.consumer_tag))

    def basic_get(self, method: Any) -> None:
        queue = self.vhost.queue(self._queue_name(method.queue), self.client)
        got = self.session.get(queue, method.no_ack)
        if got is None:
            self._send(method_frame(self.number, self.spec.BasicGetEmpty()))
            return
        tag, redelivered, message = got
        self._send(
            self._content(
                _GET_OK_IDS,
                _TAG_AND_FLAG.pack(tag, redelivered),
                message.envelope + _MESSAGE_COUNT.pack(queue.message_count),
                message,
            )
        )

    def basic_reject(self, method: Any) -> None:
        self.session.reject(method.delivery_tag, method.requeue)

    def basic_nack(self, method: Any) -> None:
        self.session.nack(method.delivery_tag, method.multiple, method.requeue)

    def basic_recover(self, method: Any) -> None:
        """basic.recover; 0-9-1 answers recover-ok, 0-8 and 0-9 have no answer."""
        self._recover(method.requeue)
        recover_ok = getattr(self.spec, "BasicRecoverOk", None)
        if recover_ok is not None:
            self._reply(recover_ok())

    def basic_recover_async(self, method: Any) -> None:
        self._recover(method.requeue)

    def _recover(self, requeue: bool) -> None:
        """basic.recover, refused on a transactional channel where the dialect says so."""
        if self.session.tx is not None and not self.dialect.recover_in_tx:
            raise PreconditionFailed("basic.recover is not allowed on a transactional channel")
        self.session.recover(requeue)

    # -- tx and confirm ------------------------------------------------------

    def transaction(self, verb: str) -> None:
        """``select``, ``commit`` or ``rollback`` the transaction of every class in use."""
        getattr(self.session, f"tx_{verb}")()
        if self.classes is not None:
            self.classes.tx(verb)

    def tx_select(self, method: Any) -> None:
        self.transaction("select")
        self._reply(self.spec.TxSelectOk())

    def tx_commit(self, method: Any) -> None:
        """Apply the transaction; commit-ok once what it wrote to the store is durable."""
        self.transaction("commit")
        self._reply(self.spec.TxCommitOk())

    def tx_rollback(self, method: Any) -> None:
        self.transaction("rollback")
        self._reply(self.spec.TxRollbackOk())

    def confirm_select(self, method: Any) -> None:
        self.session.confirm_select()
        if not method.nowait:
            self._reply(self.spec.ConfirmSelectOk())


def _blame(error: AMQPError, class_id: int, method_id: int) -> None:
    """Name the method that caused *error*, unless it names one already."""
    if not error.class_id:
        error.class_id, error.method_id = class_id, method_id


def _refusal(method: Method) -> Exception:
    """The error for a method no handler serves."""
    if "server" not in method.CHASSIS:
        return CommandInvalid(
            "unimplemented method", method.CLASS_ID, method.METHOD_ID,
            hint=f"{method.NAME} is sent by servers, not clients",
        )
    return AMQPNotImplemented(
        f"{method.NAME} is not implemented by this broker", method.CLASS_ID, method.METHOD_ID
    )


_TABLES: dict[ProtocolVersion, dict[type[Method], Handler]] = {}


def handlers_for(version: ProtocolVersion) -> dict[type[Method], Handler]:
    """The handler of every method of *version* a channel serves, by method class."""
    table = _TABLES.get(version)
    if table is None:
        table = _TABLES[version] = {}
        for cls in version.methods.values():
            if "server" not in cls.CHASSIS or cls.NAME.startswith("connection."):
                continue
            handler = getattr(ServerChannel, cls.NAME.replace(".", "_").replace("-", "_"), None)
            if handler is None:
                handler = class_handler(cls.NAME)
            if handler is not None:
                table[cls] = handler
    return table
