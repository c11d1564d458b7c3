"""Client channels: requests and responses, content, consumers, confirms, flow.

A :class:`Channel` sends methods and matches the server's responses to them
in order: a method that has responses returns a Deferred firing with the
response method (or a :class:`~txamqp09.client.message.Message` for one with
content, such as basic.get-ok), a method without responses returns None.
Every method of the connection's version is available as a method of the
channel (``channel.queue_bind(queue=..., exchange=...)``), generated from
the spec module by :mod:`txamqp09.client.api`; the common operations have
explicit wrappers here.

Lifecycle, in :class:`ChannelState`: OPENING until channel.open-ok, OPEN,
CLOSING after this side sent channel.close, CLOSED. Once closed, pending and
later calls fail with :class:`~txamqp09.client.errors.ChannelClosed` (the
server's reply code, text, class and method when the server closed it) or
:class:`~txamqp09.client.errors.ConnectionClosed`.
"""

from __future__ import annotations

from collections import deque
from itertools import count
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, Optional, Sequence

from twisted.internet.defer import Deferred, fail, succeed
from twisted.logger import Logger

from txamqp09.client.base import BodyLike, ChannelState, ConnectionLike, PropertiesLike
from txamqp09.client.confirms import ConfirmTracker
from txamqp09.client.consumer import DEFAULT_MAX_BACKLOG, Consumer, DeliveryCallback
from txamqp09.client.errors import (
    ChannelClosed,
    ChannelEnding,
    ClientError,
    NotInThisVersion,
    channel_closed,
)
from txamqp09.client.message import Message
from txamqp09.client.outcome import Outcome
from txamqp09.client.rpc import RPCClient
from txamqp09.wire.base import Method, Properties
from txamqp09.wire.errors import (
    ChannelLevelError,
    CommandInvalid,
    PreconditionFailed,
    error_for_code,
)
from txamqp09.wire.frames import (
    BASIC_ACK,
    BASIC_CLASS,
    BASIC_NACK,
    BASIC_REJECT,
    FRAME_OVERHEAD,
    NO_PROPERTIES,
    Command,
    content_frames,
    encoded_content_frames,
    encoded_contents_frames,
    tag_frame,
)
from txamqp09.wire.versions import DIRECT_REPLY_TO, ProtocolVersion

if TYPE_CHECKING:
    from txamqp09.wire import methods

__all__ = ["Channel"]

_log = Logger()

#: Turns a response command into what the request's Deferred fires with.
_Unwrap = Callable[["Channel", Command], Any]
_Handler = Callable[["Channel", Command], None]


_OPEN = ChannelState.OPEN


class _Request(NamedTuple):
    responses: tuple[type[Method], ...]
    deferred: Deferred[Any]
    unwrap: _Unwrap


def _response_value(channel: Channel, command: Command) -> Any:
    """A response's method, or a settled-by-default Message for one with content."""
    if command.method.CONTENT:
        return Message(channel, command)
    return command.method


class Channel:
    """One AMQP channel of a :class:`~txamqp09.client.connection.ClientConnection`
    (seen here as a :class:`~txamqp09.client.base.ConnectionLike`).

    Get one with ``channel = yield connection.channel()`` (or ``await``).

    :ivar number: the channel number.
    :ivar state: a :class:`ChannelState`.
    :ivar consumers: the active consumers by tag.
    :ivar return_handler: called with each message the server returns
        (basic.return: unroutable mandatory or undeliverable immediate
        messages); returned messages are logged when it is None.
    :ivar method_handlers: handlers for other methods the server may send
        (``"channel.alert"`` on 0-8, the ``message`` class on 0-9, ...) by
        method name; each is called with the :class:`Command`.
    """

    #: The handler of each method the server may send, per version.
    _dispatch_tables: dict[str, dict[type[Method], _Handler]] = {}

    def __init__(self, connection: ConnectionLike, number: int) -> None:
        assert connection.version is not None
        self.connection = connection
        self.number = number
        self.version: ProtocolVersion = connection.version
        self.spec: methods.Spec = self.version.spec
        self.state = ChannelState.OPENING
        self.consumers: dict[str, Consumer] = {}
        self.return_handler: Optional[Callable[[Message], object]] = None
        self.method_handlers: dict[str, Callable[[Command], object]] = {}
        self._dispatch = self._dispatchTable(self.version)
        self._requests: deque[_Request] = deque()
        self._closed_by: Optional[ChannelEnding] = None
        self._closing_cleanly = True
        self._closed: Outcome[ChannelEnding] = Outcome()
        self._confirms: Optional[ConfirmTracker] = None
        self._flow_active = True
        self._held: list[bytes] = []
        self._publish_methods: dict[tuple[str, str, bool, bool], bytes] = {}
        self._settled_through = 0
        self._last_ack: Optional[bytes] = None
        self._consumer_tags = count(1)
        #: 0-9: the id the server gave the channel in channel.open-ok, for
        #: channel.resume after the connection breaks (empty otherwise).
        self.channel_id = b""
        #: Acks, nacks and rejects made once the channel is closed are
        #: dropped instead of raising: the server requeued those deliveries
        #: (set by a recovering channel, which has a successor channel).
        self.drop_stale_settlements = False

    def __repr__(self) -> str:
        return f"<Channel {self.number} ({self.state.value})>"

    if TYPE_CHECKING:
        # The methods txamqp09.client.api generates from the spec, seen by
        # type checkers as what they are: callables.
        def __getattr__(self, name: str) -> Callable[..., Any]: ...

    # -- generic requests ------------------------------------------------------

    def call(self, method: Method) -> Optional[Deferred[Any]]:
        """Send *method*; a Deferred for its response when it has one.

        The Deferred fires with the response method (a :class:`Message` for
        a response with content), or with None at once when the method's
        ``nowait`` is set. Methods without responses return None.

        :raises ChannelClosed: (or fails the Deferred) the channel is closed.
        """
        return self._call(method, _response_value)

    def _call(self, method: Method, unwrap: _Unwrap) -> Optional[Deferred[Any]]:
        if not method.RESPONSES:
            self._checkOpen()
            self.connection.sendMethod(self.number, method)
            return None
        if self.state is not _OPEN:
            return fail(self._unusable())
        self.connection.sendMethod(self.number, method)
        if getattr(method, "nowait", False):
            return succeed(None)
        return self._expect(method.RESPONSES, unwrap)

    def _expect(self, responses: tuple[type[Method], ...], unwrap: _Unwrap) -> Deferred[Any]:
        deferred: Deferred[Any] = Deferred()
        self._requests.append(_Request(responses, deferred, unwrap))
        return deferred

    def callWithContent(
        self, method: Method, properties: PropertiesLike = None, body: BodyLike = b""
    ) -> None:
        """Send a content-carrying *method* with its properties and body."""
        self._checkOpen()
        encoded = self._encodeProperties(method.CLASS_ID, properties)
        self._send(
            content_frames(
                self.number,
                method,
                encoded,
                body if type(body) is bytes else _as_bytes(body),
                self.connection.body_frame_limit,
            )
        )

    def build(self, name: str, **fields: Any) -> Method:
        """The method *name* of this channel's version, with *fields* set.

        Fields the version lacks are left out when given their default
        (false or empty) value.

        :raises NotInThisVersion: the version lacks the method, or a field
            that was given a value.
        """
        cls = self.spec.BY_NAME.get(name)
        if cls is None:
            raise NotInThisVersion(f"{name} does not exist in AMQP {self.version.name}")
        known = {field for field, _ in cls.FIELDS}
        for field in [field for field in fields if field not in known]:
            if fields.pop(field):
                raise NotInThisVersion(
                    f"{name} has no {field} field in AMQP {self.version.name}"
                )
        method: Method = cls(**fields)
        return method

    # -- state -----------------------------------------------------------------

    def _checkOpen(self) -> None:
        if self.state is not _OPEN:
            raise self._unusable()

    def _unusable(self) -> ChannelEnding:
        if self._closed_by is not None:
            return self._closed_by
        return ChannelClosed(504, f"channel {self.number} is {self.state.value}")

    @property
    def closed_by(self) -> Optional[ChannelEnding]:
        """Why the channel closed (ChannelClosed or ConnectionClosed), or None."""
        return self._closed_by

    def whenClosed(self) -> Deferred[ChannelEnding]:
        """Fires with the ChannelClosed or ConnectionClosed that ended the channel."""
        return self._closed.when()

    def _opened(self, command: Command) -> Channel:
        """channel.open-ok (or 0-9's channel.ok to channel.resume) arrived: the channel is usable."""
        self.state = _OPEN
        self.channel_id = getattr(command.method, "channel_id", self.channel_id)
        return self

    def open(self) -> Deferred[Channel]:
        """Send channel.open; fires with this channel once the server opened it."""
        self.connection.sendMethod(self.number, self.build("channel.open"))
        return self._expect((self.spec.BY_NAME["channel.open-ok"],), Channel._opened)

    def resume(self, channel_id: bytes) -> Deferred[Channel]:
        """0-9: send channel.resume instead of channel.open; fires with this channel
        once the server answered channel.ok (see docs/amqp09-classes.rst)."""
        try:
            method = self.build("channel.resume", channel_id=channel_id)
        except NotInThisVersion as error:
            self.connection.forgetChannel(self.number)
            return fail(error)
        self.connection.sendMethod(self.number, method)
        self.channel_id = channel_id
        return self._expect((self.spec.BY_NAME["channel.ok"],), Channel._opened)

    def close(self, reply_code: int = 200, reply_text: str = "normal shutdown") -> Deferred[Any]:
        """Close the channel; fires once the server confirmed (channel.close-ok).

        Pending calls fail with :class:`ChannelClosed` at once; consumers end.
        """
        if self.state in (ChannelState.CLOSING, ChannelState.CLOSED):
            return self.whenClosed().addCallback(lambda _: None)
        self._startClosing(ChannelClosed(reply_code, f"{reply_text} (closed by the client)"), True)
        self.connection.sendMethod(
            self.number,
            self.spec.ChannelClose(reply_code=reply_code, reply_text=reply_text[:255]),
        )
        return self.whenClosed().addCallback(lambda _: None)

    def _startClosing(self, error: ChannelEnding, clean: bool) -> None:
        self.state = ChannelState.CLOSING
        self._closed_by = error
        self._closing_cleanly = clean
        self.connection.closing_channels.add(self.number)
        self._failPending(error, clean)

    def closedByClient(self, error: ChannelLevelError) -> None:
        """This side sent channel.close because the server broke the protocol."""
        self._startClosing(channel_closed(error, self.connection.method_names), False)

    def shutdown(self, error: ChannelEnding, clean: bool = False) -> None:
        """The channel is gone: fail everything pending with *error*.

        :param clean: consumers end their iteration normally instead of
            raising *error*.
        """
        if self.state is ChannelState.CLOSED:
            return
        self.state = ChannelState.CLOSED
        if self._closed_by is None:
            self._closed_by = error
        self.connection.forgetChannel(self.number)
        self._failPending(self._closed_by, clean)
        self._closed.succeed(self._closed_by)

    def _failPending(self, error: ChannelEnding, clean: bool) -> None:
        requests, self._requests = self._requests, deque()
        for request in requests:
            request.deferred.errback(error)
        if self._confirms is not None:
            self._confirms.failAll(error)
        self._held = []
        consumers, self.consumers = self.consumers, {}
        for consumer in consumers.values():
            consumer.finish(None if clean else error)

    # -- input -----------------------------------------------------------------

    def commandReceived(self, command: Command) -> None:
        """Handle one command the server sent on this channel."""
        handler = self._dispatch.get(type(command.method))
        if handler is None:
            method = command.method
            raise CommandInvalid(
                f"the server sent {method.NAME}, which a client never receives",
                method.CLASS_ID,
                method.METHOD_ID,
            )
        handler(self, command)

    def _onResponse(self, command: Command) -> None:
        method = command.method
        requests = self._requests
        if not requests or type(method) not in requests[0].responses:
            waiting = requests[0].responses[0].NAME if requests else "nothing"
            raise CommandInvalid(
                f"{method.NAME} arrived on channel {self.number} while it waited for {waiting}",
                method.CLASS_ID,
                method.METHOD_ID,
            )
        request = requests.popleft()
        request.deferred.callback(request.unwrap(self, command))

    def _onClose(self, command: Command[methods.ChannelClose]) -> None:
        method = command.method
        self.connection.sendMethod(self.number, self.spec.ChannelCloseOk())
        self.connection.channelClosed(self.number)
        if self.state is ChannelState.CLOSING:
            # Both sides closed at once: this close answers ours.
            self.shutdown(self._unusable(), self._closing_cleanly)
            return
        error = error_for_code(
            method.reply_code, method.reply_text, method.class_id, method.method_id, hard=False
        )
        self.shutdown(channel_closed(error, self.connection.method_names))

    def _onCloseOk(self, command: Command) -> None:
        if self.state is not ChannelState.CLOSING:
            raise CommandInvalid(
                f"channel.close-ok on channel {self.number}, which did not close", 20, 41
            )
        self.connection.channelClosed(self.number)
        self.shutdown(self._unusable(), self._closing_cleanly)

    def _onFlow(self, command: Command[methods.ChannelFlow]) -> None:
        active = command.method.active
        self._flow_active = active
        self.connection.sendMethod(self.number, self.spec.ChannelFlowOk(active=active))
        if active and self._held:
            held, self._held = self._held, []
            self.connection.write(b"".join(held))

    @property
    def flow_active(self) -> bool:
        """False while the server has paused this channel's publishing (channel.flow)."""
        return self._flow_active

    def _onPing(self, command: Command) -> None:
        """0-9: the server's channel.ping: answer ok, then send a pong."""
        self.connection.sendMethod(self.number, self.build("channel.ok"))
        self.connection.sendMethod(self.number, self.build("channel.pong"))
        self._expect((self.spec.BY_NAME["channel.ok"],), _response_value)

    def _onPong(self, command: Command) -> None:
        """0-9: the server's channel.pong: answer ok."""
        self.connection.sendMethod(self.number, self.build("channel.ok"))

    def _onDeliver(
        self, command: Command[methods.BasicDeliver | methods.FileDeliver | methods.StreamDeliver]
    ) -> None:
        consumer = self.consumers.get(command.method.consumer_tag)
        if consumer is None:
            self._onOtherRequest(command)
            return
        # A direct reply comes under the tag of the channel's next delivery,
        # which it does not use up: it settles nothing.
        if consumer.no_ack and consumer.queue != DIRECT_REPLY_TO:
            self._settle(command.method.delivery_tag, False)
        consumer.deliver(Message(self, command, consumer.no_ack))

    def _onReturn(self, command: Command) -> None:
        message = Message(self, command, settled=True)
        if self.return_handler is None:
            _log.warn(
                "message returned by the server ({code} {text}) on channel {channel}; "
                "set Channel.return_handler to handle returns",
                code=message.method.reply_code,
                text=message.method.reply_text,
                channel=self.number,
            )
            return
        try:
            self.return_handler(message)
        except Exception:
            _log.failure("return handler failed on {message}", message=message)

    def _onServerCancel(
        self, command: Command[methods.BasicCancel | methods.FileCancel | methods.StreamCancel]
    ) -> None:
        method = command.method
        consumer = self.consumers.pop(method.consumer_tag, None)
        if not method.nowait:
            amqp_class = method.NAME.split(".")[0]
            self.connection.sendMethod(
                self.number, self.build(f"{amqp_class}.cancel-ok", consumer_tag=method.consumer_tag)
            )
        if consumer is not None:
            consumer.serverCancelled()

    def _onConfirm(self, command: Command[methods.BasicAck | methods.BasicNack]) -> None:
        method = command.method
        if self._confirms is None:
            raise PreconditionFailed(
                f"{method.NAME} on channel {self.number}, which is not in confirm mode",
                method.CLASS_ID,
                method.METHOD_ID,
            )
        if method.NAME == "basic.ack":
            self._confirms.acked(method.delivery_tag, method.multiple)
        else:
            self._confirms.nacked(method.delivery_tag, method.multiple)

    def _onOtherRequest(self, command: Command) -> None:
        handler = self.method_handlers.get(command.method.NAME)
        if handler is None:
            _log.info(
                "ignored {method} on channel {channel}: no handler in Channel.method_handlers",
                method=command.method.NAME,
                channel=self.number,
            )
            return
        handler(command)

    @classmethod
    def _dispatchTable(cls, version: ProtocolVersion) -> dict[type[Method], _Handler]:
        table = cls._dispatch_tables.get(version.name)
        if table is None:
            table = cls._dispatch_tables[version.name] = _build_dispatch(version)
        return table

    # -- content ---------------------------------------------------------------

    def _send(self, data: bytes) -> None:
        if self._flow_active:
            self.connection.write(data)
        else:
            self._held.append(data)

    def _encodeProperties(self, class_id: int, properties: PropertiesLike) -> bytes:
        if properties is None:
            return NO_PROPERTIES
        if type(properties) is bytes:
            return properties
        if isinstance(properties, Properties):
            return properties.encode()
        assert isinstance(properties, Mapping)
        return self.version.properties[class_id](**properties).encode()

    def basic_publish(
        self,
        body: BodyLike,
        exchange: str = "",
        routing_key: str = "",
        properties: PropertiesLike = None,
        *,
        mandatory: bool = False,
        immediate: bool = False,
        confirmation: Optional[Deferred[int]] = None,
    ) -> Optional[Deferred[int]]:
        """Publish a message.

        :param body: the body, as bytes (encode text first).
        :param properties: ``BasicProperties`` or a mapping of its fields
            (``{"content_type": "text/plain", "delivery_mode": 2}``).
        :param mandatory: have the server return the message (to
            :attr:`return_handler`) when no queue takes it.
        :param confirmation: in confirm mode, the Deferred to return (a new
            one when None).
        :returns: None; in confirm mode (:meth:`confirm_select`) a Deferred
            firing with the message's delivery tag when the server acks it,
            failing with :class:`~txamqp09.client.errors.MessageNacked` on nack.
        :raises ChannelClosed: the channel is closed.
        """
        if self.state is not _OPEN:
            raise self._unusable()
        self._send(self._publishFrames(
            body, exchange, routing_key, properties, mandatory, immediate,
            self.connection.body_frame_limit - FRAME_OVERHEAD,
        ))
        if self._confirms is not None:
            return self._confirms.published(confirmation)
        return None

    #: The same operation, under the name most clients use.
    publish = basic_publish

    def basic_publish_many(
        self, messages: Sequence[tuple[BodyLike, str, str, PropertiesLike]], *, mandatory: bool = False
    ) -> Optional[Deferred[int]]:
        """Publish several messages with one write to the connection.

        :param messages: ``(body, exchange, routing_key, properties)`` of
            each, in order; what :meth:`basic_publish` takes.
        :returns: None; in confirm mode (and with at least one message) one
            Deferred for all of them, firing with the last one's delivery tag
            once the server acked every one, or failing with
            :class:`~txamqp09.client.errors.MessageNacked` (naming the first
            refused tag) once it settled every one and refused any.
        :raises ChannelClosed: the channel is closed.
        """
        if self.state is not _OPEN:
            raise self._unusable()
        if not messages:
            return None
        body_max = self.connection.body_frame_limit - FRAME_OVERHEAD
        frames = self._publishFrames
        self._send(b"".join([
            frames(body, exchange, routing_key, properties, mandatory, False, body_max)
            for body, exchange, routing_key, properties in messages
        ]))
        if self._confirms is not None:
            return self._confirms.published_group(len(messages))
        return None

    def basic_publish_encoded(
        self, exchange: str, routing_key: str, properties: Sequence[bytes], bodies: Sequence[bytes],
        *, mandatory: bool = False,
    ) -> Optional[Deferred[int]]:
        """Publish a message per body to one exchange with one routing key,
        with one write: :meth:`basic_publish_many` for messages whose
        properties are encoded already (each as ``Properties.encode()``
        of the channel's protocol version gives them), without a call per
        message.

        :param properties: each message's encoded properties, in order.
        :param bodies: each message's body, as many.
        :returns: as :meth:`basic_publish_many`.
        :raises ChannelClosed: the channel is closed.
        :raises ValueError: not as many properties as bodies.
        """
        if self.state is not _OPEN:
            raise self._unusable()
        if len(properties) != len(bodies):
            raise ValueError(f"{len(properties)} encoded properties for {len(bodies)} bodies")
        if not bodies:
            return None
        key = (exchange, routing_key, mandatory, False)
        method = self._publish_methods.get(key) or self._cachePublishMethod(key)
        self._send(encoded_contents_frames(
            self.number, BASIC_CLASS, method, properties, bodies, self.connection.body_frame_limit - FRAME_OVERHEAD,
        ))
        if self._confirms is not None:
            return self._confirms.published_group(len(bodies))
        return None

    def _publishFrames(
        self, body: BodyLike, exchange: str, routing_key: str, properties: PropertiesLike,
        mandatory: bool, immediate: bool, body_max: int,
    ) -> bytes:
        """The frames of one basic.publish with its content."""
        if type(body) is not bytes:
            body = _as_bytes(body)
        key = (exchange, routing_key, mandatory, immediate)
        method = self._publish_methods.get(key)
        if method is None:
            method = self._cachePublishMethod(key)
        encoded = NO_PROPERTIES if properties is None else self._encodeProperties(BASIC_CLASS, properties)
        return encoded_content_frames(self.number, BASIC_CLASS, method, b"", b"", encoded, body, body_max)

    def _cachePublishMethod(self, key: tuple[str, str, bool, bool]) -> bytes:
        """The encoded basic.publish for (exchange, routing key, mandatory, immediate)."""
        if len(self._publish_methods) >= 256:
            self._publish_methods.clear()
        exchange, routing_key, mandatory, immediate = key
        method = self._publish_methods[key] = self.spec.BasicPublish(
            exchange=exchange, routing_key=routing_key, mandatory=mandatory, immediate=immediate
        ).encode()
        return method

    # -- acknowledgements ------------------------------------------------------

    # Delivery tags count up from 1 per channel. Every tag up to
    # _settled_through is settled (acked, nacked, rejected, or delivered
    # without acknowledgement), so an ack with multiple set up to it acks
    # nothing else: acks made in order while output waits for the end of
    # a batch become one basic.ack frame instead of one per message.

    def _settle(self, delivery_tag: int, multiple: bool) -> bool:
        """Record a settlement; whether every tag up to *delivery_tag* is now settled."""
        if multiple or delivery_tag == self._settled_through + 1:
            if delivery_tag > self._settled_through:
                self._settled_through = delivery_tag
            return True
        return False

    def _settleable(self) -> bool:
        """Whether a settlement may be sent: the channel is open. A stale one
        (the channel closed, :attr:`drop_stale_settlements` set) is dropped.

        :raises ChannelClosed: (or ConnectionClosed) the channel is not open.
        """
        if self.state is _OPEN:
            return True
        if self.drop_stale_settlements and self.state is ChannelState.CLOSED:
            return False
        raise self._unusable()

    def ack(self, delivery_tag: int, multiple: bool = False) -> None:
        """Acknowledge a delivery (and with *multiple* all before it)."""
        if self.state is not _OPEN and not self._settleable():
            return
        if not self._settle(delivery_tag, multiple):
            self.connection.write(tag_frame(self.number, BASIC_ACK, delivery_tag, False))
            return
        frame = tag_frame(self.number, BASIC_ACK, self._settled_through, True)
        if not self.connection.replaceQueued(self._last_ack, frame):
            self.connection.write(frame)
        self._last_ack = frame

    def nack(self, delivery_tag: int, multiple: bool = False, requeue: bool = True) -> None:
        """Refuse deliveries (basic.nack, 0-9-1 only)."""
        if "basic.nack" not in self.spec.BY_NAME:
            raise NotInThisVersion(f"basic.nack does not exist in AMQP {self.version.name}; use reject")
        if not self._settleable():
            return
        self._settle(delivery_tag, multiple)
        self.connection.write(
            tag_frame(self.number, BASIC_NACK, delivery_tag, (1 if multiple else 0) | (2 if requeue else 0))
        )

    def reject(self, delivery_tag: int, requeue: bool = True) -> None:
        """Refuse one delivery (basic.reject)."""
        if not self._settleable():
            return
        self._settle(delivery_tag, False)
        self.connection.write(tag_frame(self.number, BASIC_REJECT, delivery_tag, requeue))

    # -- explicit wrappers of the common methods ---------------------------------

    def exchange_declare(
        self,
        exchange: str,
        type: str = "direct",
        *,
        passive: bool = False,
        durable: bool = False,
        auto_delete: bool = False,
        internal: bool = False,
        nowait: bool = False,
        arguments: Optional[dict[str, Any]] = None,
    ) -> Deferred[Any]:
        """Declare an exchange; fires with exchange.declare-ok."""
        return self.request(
            "exchange.declare",
            exchange=exchange,
            type=type,
            passive=passive,
            durable=durable,
            auto_delete=auto_delete,
            internal=internal,
            nowait=nowait,
            arguments=arguments or {},
        )

    def queue_declare(
        self,
        queue: str = "",
        *,
        passive: bool = False,
        durable: bool = False,
        exclusive: bool = False,
        auto_delete: bool = False,
        nowait: bool = False,
        arguments: Optional[dict[str, Any]] = None,
    ) -> Deferred[Any]:
        """Declare a queue (the server names it when *queue* is empty).

        Fires with queue.declare-ok: its ``queue``, ``message_count`` and
        ``consumer_count``.
        """
        return self.request(
            "queue.declare",
            queue=queue,
            passive=passive,
            durable=durable,
            exclusive=exclusive,
            auto_delete=auto_delete,
            nowait=nowait,
            arguments=arguments or {},
        )

    def basic_qos(
        self, prefetch_count: int = 0, *, prefetch_size: int = 0, global_: bool = False
    ) -> Deferred[Any]:
        """Limit unacknowledged deliveries to *prefetch_count* messages (0: no limit)."""
        return self.request(
            "basic.qos", prefetch_count=prefetch_count, prefetch_size=prefetch_size, global_=global_
        )

    def basic_consume(
        self,
        queue: str = "",
        callback: Optional[DeliveryCallback] = None,
        *,
        no_ack: bool = False,
        exclusive: bool = False,
        no_local: bool = False,
        consumer_tag: str = "",
        arguments: Optional[dict[str, Any]] = None,
        nowait: bool = False,
        max_backlog: int = DEFAULT_MAX_BACKLOG,
    ) -> Deferred[Consumer]:
        """Start consuming *queue*; fires with the :class:`Consumer`.

        :param callback: called with each :class:`Message`; without one,
            iterate the consumer with ``async for``.
        :param no_ack: the server forgets messages as it sends them.
        :param max_backlog: deliveries the application may fall behind by
            before the connection stops reading; see :mod:`~txamqp09.client.consumer`.
        """
        return self.startConsumer(
            "basic", queue, callback, consumer_tag=consumer_tag, no_ack=no_ack,
            max_backlog=max_backlog, no_local=no_local, exclusive=exclusive, nowait=nowait,
            arguments=arguments or {},
        )

    def startConsumer(
        self,
        amqp_class: str,
        queue: str,
        callback: Optional[DeliveryCallback],
        *,
        consumer_tag: str,
        no_ack: bool,
        max_backlog: int,
        tag_field: str = "consumer_tag",
        **fields: Any,
    ) -> Deferred[Consumer]:
        """Send ``<amqp_class>.consume`` (basic, or 0-9's file, stream and
        message) for a new :class:`Consumer` of *queue*; fires with it once
        the server agreed.

        :param consumer_tag: the tag (named by *tag_field* in the method), or
            "" for one made up here.
        :param no_ack: whether deliveries need no ack (sent when the method
            has that field).
        :param fields: the method's other fields.
        """
        tag = consumer_tag or f"txamqp09.{self.number}.{next(self._consumer_tags)}"
        if tag in self.consumers:
            return fail(ValueError(f"consumer tag {tag!r} is in use on channel {self.number}"))
        name = f"{amqp_class}.consume"
        if ("no_ack", "bit") in getattr(self.spec.BY_NAME.get(name), "FIELDS", ()):
            fields["no_ack"] = no_ack
        try:
            method = self.build(name, queue=queue, **{tag_field: tag}, **fields)
        except NotInThisVersion as error:
            return fail(error)
        consumer = Consumer(
            self, queue, tag, no_ack=no_ack, callback=callback, max_backlog=max_backlog,
            amqp_class=amqp_class,
        )
        if self.state is _OPEN:
            self.consumers[tag] = consumer
        registered = self.call(method)
        assert registered is not None
        return registered.addCallback(lambda _: consumer)

    def cancelConsumer(self, consumer: Consumer) -> Deferred[Any]:
        """Cancel *consumer*; fires once the server confirmed."""
        if not consumer.active:
            return succeed(None)
        # 0-9's message class names consumers by their destination.
        field = "destination" if consumer.amqp_class == "message" else "consumer_tag"
        cancelled = self.request(f"{consumer.amqp_class}.cancel", **{field: consumer.tag})

        def forget(result: Any) -> Any:
            self.consumers.pop(consumer.tag, None)
            consumer.finish(None)
            return result

        return cancelled.addCallback(forget)

    def rpc_client(self) -> Deferred[RPCClient]:
        """Start an :class:`~txamqp09.client.rpc.RPCClient` on this channel:
        calls whose replies come back through direct reply-to (RabbitMQ, or
        this project's broker on any version). Fires once it consumes its replies."""
        return RPCClient.start(self)

    def basic_get(self, queue: str = "", *, no_ack: bool = False) -> Deferred[Optional[Message]]:
        """Fetch one message from *queue*; fires with a :class:`Message`, or None when empty."""

        def unwrap(channel: Channel, command: Command) -> Optional[Message]:
            if command.method.NAME == "basic.get-empty":
                return None
            if no_ack:
                channel._settle(command.method.delivery_tag, False)  # type: ignore[attr-defined]
            return Message(channel, command, settled=no_ack)

        try:
            method = self.build("basic.get", queue=queue, no_ack=no_ack)
        except NotInThisVersion as error:
            return fail(error)
        fetched = self._call(method, unwrap)
        assert fetched is not None
        return fetched

    def confirm_select(self, *, nowait: bool = False) -> Deferred[Any]:
        """Put the channel in confirm mode: :meth:`basic_publish` then returns Deferreds."""
        if self.state is _OPEN and self._confirms is None and "confirm.select" in self.spec.BY_NAME:
            self._confirms = ConfirmTracker()
        return self.request("confirm.select", nowait=nowait)

    @property
    def unconfirmed(self) -> int:
        """Messages published in confirm mode and not yet acked or nacked."""
        return self._confirms.unconfirmed if self._confirms is not None else 0

    @property
    def confirms(self) -> Optional[ConfirmTracker]:
        """The tracker of published messages in confirm mode, else None."""
        return self._confirms

    def tx_select(self) -> Deferred[Any]:
        """Make the channel transactional: publishes and acks wait for :meth:`tx_commit`."""
        return self.request("tx.select")

    def tx_commit(self) -> Deferred[Any]:
        """Commit the current transaction."""
        return self.request("tx.commit")

    def tx_rollback(self) -> Deferred[Any]:
        """Abandon the current transaction's publishes and acks."""
        return self.request("tx.rollback")

    def request(self, name: str, **fields: Any) -> Deferred[Any]:
        """Send the method called *name* with *fields*; a Deferred for its response.

        ``channel.request("queue.bind", queue="q", exchange="x")`` is the
        untyped form of ``channel.queue_bind(...)``. Failures, including
        :class:`NotInThisVersion`, come through the Deferred, which fires with
        None for a method without a response.
        """
        try:
            requested = self.call(self.build(name, **fields))
        except ClientError as error:
            return fail(error)
        return requested if requested is not None else succeed(None)


def _as_bytes(body: BodyLike) -> bytes:
    if isinstance(body, (bytearray, memoryview)):
        return bytes(body)
    raise TypeError(
        f"message bodies are bytes, not {type(body).__name__}; encode text first"
    )


#: Handlers of methods the server sends, by name, beyond responses.
_NAMED_HANDLERS: dict[str, _Handler] = {
    "channel.close": Channel._onClose,
    "channel.close-ok": Channel._onCloseOk,
    "channel.flow": Channel._onFlow,
    "basic.ack": Channel._onConfirm,
    "basic.nack": Channel._onConfirm,
    "channel.ping": Channel._onPing,
    "channel.pong": Channel._onPong,
    # A request from the server (file.open-ok's answer, but sent by the server).
    "file.stage": Channel._onOtherRequest,
}


def _handler_for(cls: type[Method], responses: set[type[Method]]) -> _Handler:
    name = cls.NAME
    fields = {field for field, _ in cls.FIELDS}
    handler = _NAMED_HANDLERS.get(name)
    if handler is not None:
        return handler
    if name.endswith(".deliver") and "consumer_tag" in fields and cls.CONTENT:
        return Channel._onDeliver
    if name.endswith(".return") and cls.CONTENT:
        return Channel._onReturn
    if name.endswith(".cancel") and "consumer_tag" in fields:
        return Channel._onServerCancel
    if cls in responses:
        return Channel._onResponse
    return Channel._onOtherRequest


def _build_dispatch(version: ProtocolVersion) -> dict[type[Method], _Handler]:
    """The handler of every non-connection method a server may send in *version*."""
    responses = {response for cls in version.methods.values() for response in cls.RESPONSES}
    return {
        cls: _handler_for(cls, responses)
        for cls in version.methods.values()
        if "client" in cls.CHASSIS and not cls.NAME.startswith("connection.")
    }
