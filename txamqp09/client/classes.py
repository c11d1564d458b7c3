"""Client side of the 0-8 / 0-9 classes beyond basic: file, stream, tunnel, dtx, message.

Each class is used through an object wrapping an open channel::

    files = FileClass(channel)
    yield files.publish(b"...", routing_key="q", identifier="report-42")
    consumer = yield files.consume("q", callback)

Deliveries arrive as :class:`~txamqp09.client.message.Message` objects whose
``ack`` and ``reject`` use the class's own methods (file.ack, message.ok...).
docs/amqp09-classes.rst describes the semantics the broker gives them.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from twisted.internet.defer import Deferred, fail

from txamqp09.client.base import PropertiesLike
from txamqp09.client.channel import Channel
from txamqp09.client.consumer import DEFAULT_MAX_BACKLOG, Consumer, DeliveryCallback
from txamqp09.client.errors import AlreadySettled, ClientError
from txamqp09.client.message import Message
from txamqp09.wire.errors import CommandInvalid
from txamqp09.wire.fields import Content
from txamqp09.wire.frames import Command

if TYPE_CHECKING:
    from txamqp09.wire import methods

__all__ = [
    "DEFAULT_STAGE_SIZE",
    "DtxClass",
    "FileClass",
    "FileMessage",
    "MessageClass",
    "MessageRejected",
    "StagingStore",
    "StreamClass",
    "TransferredMessage",
    "TunnelClass",
]

#: Bytes sent per file.stage or message.append by the publishing helpers.
DEFAULT_STAGE_SIZE = 1024 * 1024


class MessageRejected(ClientError):
    """The broker answered a message.transfer with message.reject.

    :ivar code: the reject code (313: ``immediate`` and no consumer took it).
    :ivar text: the reject text.
    """

    def __init__(self, code: int, text: str) -> None:
        super().__init__(f"message rejected: {code} {text}")
        self.code = code
        self.text = text


# -- file -------------------------------------------------------------------------


class StagingStore:
    """Content the server staged at this client, by staging identifier.

    Share one store between the connections of an application so that a
    file the server started staging before a reconnect is not sent again.
    """

    def __init__(self) -> None:
        self._staged: dict[str, list[bytes]] = {}

    def size(self, identifier: str) -> int:
        """Bytes staged under *identifier*."""
        return sum(len(chunk) for chunk in self._staged.get(identifier, ()))

    def append(self, identifier: str, chunk: bytes) -> None:
        """Stage *chunk* after what *identifier* holds."""
        self._staged.setdefault(identifier, []).append(chunk)

    def take(self, identifier: str) -> bytes:
        """The content staged under *identifier*, forgotten here."""
        return b"".join(self._staged.pop(identifier, ()))


class FileMessage(Message):
    """A file delivery: ack and reject send file.ack and file.reject."""

    __slots__ = ()
    #: File deliveries arrive on a :class:`Channel` (whose methods send the settlements).
    channel: Channel

    def ack(self, multiple: bool = False) -> None:
        """Acknowledge the file (file.ack)."""
        self._check_unsettled("ack")
        self.channel.call(self.channel.build("file.ack", delivery_tag=self.delivery_tag, multiple=multiple))
        self._settledHere(multiple)

    def reject(self, requeue: bool = True) -> None:
        """Refuse the file (file.reject); requeue it unless *requeue* is false."""
        self._check_unsettled("reject")
        self.channel.call(self.channel.build("file.reject", delivery_tag=self.delivery_tag, requeue=requeue))
        self._settledHere(False)

    def _settledHere(self, multiple: bool) -> None:
        self._settled = True
        if not multiple:
            # Delivery tags are shared by the classes of a channel: a settled
            # file lets later basic acks be sent as one basic.ack with multiple
            # (which settles basic deliveries only).
            self.channel._settle(self.delivery_tag, False)

    def nack(self, multiple: bool = False, requeue: bool = True) -> None:
        """The file class has no nack: use :meth:`reject`."""
        raise AlreadySettled("the file class has no nack; use reject")


class FileClass:
    """The file class on *channel*: staged publishing with resume, file consumers.

    :param staging: where content the server stages here is kept (a new
        :class:`StagingStore` if omitted).
    """

    def __init__(self, channel: Channel, staging: Optional[StagingStore] = None) -> None:
        self.channel = channel
        self.staging = staging if staging is not None else StagingStore()
        self._incoming: Optional[str] = None
        self._incoming_properties: Any = None
        channel.method_handlers["file.open"] = self._onOpen
        channel.method_handlers["file.stage"] = self._onStage
        channel.method_handlers["file.deliver"] = self._onDeliver

    def qos(self, prefetch_size: int = 0, prefetch_count: int = 0, global_: bool = False) -> Deferred[Any]:
        """file.qos: the prefetch window of file deliveries."""
        return self.channel.request(
            "file.qos", prefetch_size=prefetch_size, prefetch_count=prefetch_count, global_=global_
        )

    def consume(
        self,
        queue: str = "",
        callback: Optional[DeliveryCallback] = None,
        *,
        no_ack: bool = False,
        exclusive: bool = False,
        no_local: bool = False,
        consumer_tag: str = "",
        arguments: Optional[dict[str, Any]] = None,
        max_backlog: int = DEFAULT_MAX_BACKLOG,
    ) -> Deferred[Consumer]:
        """file.consume; fires with the :class:`Consumer`, whose messages are :class:`FileMessage`.

        :param arguments: 0-9's ``filter`` table, which the broker takes as
            basic.consume's arguments (``x-priority``, ``x-stream-offset``).
        """
        return self.channel.startConsumer(
            "file", queue, callback, consumer_tag=consumer_tag, no_ack=no_ack,
            max_backlog=max_backlog, exclusive=exclusive, no_local=no_local, filter=arguments or {},
        )

    def open(self, identifier: str, content_size: int) -> Deferred[int]:
        """file.open; fires with the bytes the server already holds for *identifier*."""
        opened = self.channel.request("file.open", identifier=identifier, content_size=content_size)
        return opened.addCallback(lambda ok: ok.staged_size)

    def stage(self, body: bytes, properties: PropertiesLike = None) -> None:
        """file.stage: send content after :meth:`open` (from the offset it gave)."""
        self.channel.callWithContent(self.channel.build("file.stage"), properties, body)

    def publish(
        self,
        body: bytes,
        exchange: str = "",
        routing_key: str = "",
        properties: PropertiesLike = None,
        *,
        identifier: str,
        mandatory: bool = False,
        immediate: bool = False,
        stage_size: int = DEFAULT_STAGE_SIZE,
    ) -> Deferred[int]:
        """Stage *body* under *identifier* (resuming where an earlier attempt
        stopped) and publish it; fires with the offset staging resumed from.

        Choose an identifier that names the content (the spec suggests a
        hash of its properties), and use the same one when publishing again
        after a broken connection.
        """

        def staged(offset: int) -> int:
            for start in range(offset, len(body), stage_size):
                self.stage(body[start : start + stage_size], properties)
            if offset == len(body) and not body:
                self.stage(b"", properties)
            self.channel.call(
                self.channel.build(
                    "file.publish", exchange=exchange, routing_key=routing_key, mandatory=mandatory,
                    immediate=immediate, identifier=identifier,
                )
            )
            return offset

        return self.open(identifier, len(body)).addCallback(staged)

    # -- deliveries -------------------------------------------------------------

    def _onOpen(self, command: Command[methods.FileOpen]) -> None:
        method = command.method
        self._incoming = method.identifier
        answer = self.channel.build("file.open-ok", staged_size=self.staging.size(method.identifier))
        self.channel.connection.sendMethod(self.channel.number, answer)

    def _onStage(self, command: Command) -> None:
        if self._incoming is None:
            raise CommandInvalid("file.stage from the server without a file.open before it", 70, 50)
        self.staging.append(self._incoming, command.body)
        self._incoming_properties = command

    def _onDeliver(self, command: Command[methods.FileDeliver]) -> None:
        method = command.method
        staged = self._incoming_properties
        self._incoming = self._incoming_properties = None
        content = Command(
            method, staged.raw_properties if staged is not None else b"",
            self.staging.take(method.identifier), self.channel.version.properties[70],
        )
        consumer = self.channel.consumers.get(method.consumer_tag)
        message = FileMessage(self.channel, content, settled=consumer is None or consumer.no_ack)
        if consumer is not None:
            consumer.deliver(message)


# -- stream -----------------------------------------------------------------------


class StreamClass:
    """The stream class on *channel*: lossy, unacknowledged streaming."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel

    def qos(
        self, prefetch_size: int = 0, prefetch_count: int = 0, consume_rate: int = 0, global_: bool = False
    ) -> Deferred[Any]:
        """stream.qos: the server's backlog for this channel and the rate in octets per second."""
        return self.channel.request(
            "stream.qos", prefetch_size=prefetch_size, prefetch_count=prefetch_count,
            consume_rate=consume_rate, global_=global_,
        )

    def consume(
        self,
        queue: str = "",
        callback: Optional[DeliveryCallback] = None,
        *,
        exclusive: bool = False,
        no_local: bool = False,
        consumer_tag: str = "",
        arguments: Optional[dict[str, Any]] = None,
        max_backlog: int = DEFAULT_MAX_BACKLOG,
    ) -> Deferred[Consumer]:
        """stream.consume; fires with the :class:`Consumer` (deliveries need no ack).

        :param arguments: 0-9's ``filter`` table (see :meth:`FileClass.consume`).
        """
        return self.channel.startConsumer(
            "stream", queue, callback, consumer_tag=consumer_tag, no_ack=True,
            max_backlog=max_backlog, exclusive=exclusive, no_local=no_local, filter=arguments or {},
        )

    def publish(
        self,
        body: bytes,
        exchange: str = "",
        routing_key: str = "",
        properties: PropertiesLike = None,
        *,
        mandatory: bool = False,
        immediate: bool = False,
    ) -> None:
        """stream.publish (returns arrive at ``channel.return_handler``)."""
        self.channel.callWithContent(
            self.channel.build(
                "stream.publish", exchange=exchange, routing_key=routing_key,
                mandatory=mandatory, immediate=immediate,
            ),
            properties, body,
        )


# -- tunnel -----------------------------------------------------------------------


class TunnelClass:
    """The tunnel class on *channel*; a request that reaches no queue without
    ``broadcast`` comes back as basic.return, at ``channel.return_handler``."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel

    def request(
        self,
        body: bytes,
        meta_data: Optional[Mapping[str, Any]] = None,
        *,
        proxy_name: str = "",
        data_name: str = "",
        durable: bool = False,
        broadcast: bool = False,
        headers: Optional[Mapping[str, Any]] = None,
    ) -> None:
        """tunnel.request: *body* to the exchange *proxy_name* with routing key *data_name*."""
        properties = {
            "headers": dict(headers) if headers else None,
            "proxy_name": proxy_name,
            "data_name": data_name,
            "durable": int(durable),
            "broadcast": int(broadcast),
        }
        self.channel.callWithContent(
            self.channel.build("tunnel.request", meta_data=dict(meta_data or {})), properties, body
        )


# -- dtx --------------------------------------------------------------------------


class DtxClass:
    """The dtx class on *channel*; end the transaction with ``channel.tx_commit()``
    or ``channel.tx_rollback()``."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel

    def select(self) -> Deferred[Any]:
        """dtx.select: the channel becomes transactional."""
        return self.channel.request("dtx.select")

    def start(self, identifier: str) -> Deferred[Any]:
        """dtx.start: name the transaction (before publishing or consuming)."""
        return self.channel.request("dtx.start", dtx_identifier=identifier)


# -- message (0-9) ----------------------------------------------------------------


class TransferredMessage(Message):
    """A message.transfer from the server: ack answers message.ok, reject message.reject.

    Answers reach the server in the order the transfers arrived: an answer
    waits for the answers to earlier transfers.
    """

    __slots__ = ("_answer",)

    def __init__(self, channel: Channel, command: Command, answer: Callable[[str], None], settled: bool) -> None:
        super().__init__(channel, command, settled)
        self._answer = answer

    @property
    def properties(self) -> Any:
        """The transfer itself: its fields are the message's properties."""
        return self.method

    @property
    def headers(self) -> dict[str, Any]:
        """The application headers."""
        return self.method.application_headers or {}  # type: ignore[no-any-return]

    @property
    def consumer_tag(self) -> Optional[str]:
        """The destination the message was transferred to."""
        return self.method.destination  # type: ignore[no-any-return]

    def ack(self, multiple: bool = False) -> None:
        """Accept the message (message.ok)."""
        self._check_unsettled("ack")
        self._settled = True
        self._answer("message.ok")

    def reject(self, requeue: bool = False) -> None:
        """Refuse the message (message.reject); the broker drops it."""
        self._check_unsettled("reject")
        self._settled = True
        self._answer("message.reject")

    def nack(self, multiple: bool = False, requeue: bool = True) -> None:
        """The message class has no nack: use :meth:`reject`."""
        raise AlreadySettled("the message class has no nack; use reject")


class _Answer:
    """One server request of the message class waiting for this client's answer."""

    __slots__ = ("name",)

    def __init__(self, name: Optional[str] = None) -> None:
        self.name = name


class MessageClass:
    """The 0-9 message class on *channel*."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        #: Answers owed to the server, in the order its requests arrived.
        self._answers: deque[_Answer] = deque()
        #: Contents of references the server opened, by name.
        self._references: dict[bytes, list[bytes]] = {}
        #: Transfers naming a reference this client has open, waiting for its close.
        self._waiting: dict[bytes, list[Deferred[Any]]] = {}
        #: Transfers for a pending get, by destination.
        self._gotten: dict[str, TransferredMessage] = {}
        channel.method_handlers.update({
            "message.transfer": self._onTransfer,
            "message.open": self._onOpen,
            "message.append": self._onAppend,
            "message.close": self._onClose,
            "message.checkpoint": self._onOtherRequest,
            "message.resume": self._onOtherRequest,
        })
        channel.whenClosed().addCallback(self._channelEnded)

    def _channelEnded(self, ending: Exception) -> None:
        """Transfers still waiting for their reference's close fail with the channel."""
        waiting, self._waiting = self._waiting, {}
        for waiters in waiting.values():
            for waiter in waiters:
                waiter.errback(ending)

    def _request(self, name: str, **fields: Any) -> Deferred[Any]:
        return self.channel.request(name, **fields)

    # -- publishing -------------------------------------------------------------

    def transfer(
        self,
        body: bytes = b"",
        destination: str = "",
        routing_key: str = "",
        *,
        reference: Optional[bytes] = None,
        immediate: bool = False,
        application_headers: Optional[Mapping[str, Any]] = None,
        **fields: Any,
    ) -> Deferred[Any]:
        """message.transfer to the exchange *destination*; fires once the broker
        took it (message.ok) or fails with :class:`MessageRejected`.

        With *reference*, the body is the content of that open reference, and
        the answer comes once the reference is closed (:meth:`close`).
        """
        content = Content(reference, True) if reference is not None else Content(body)
        try:
            method = self.channel.build(
                "message.transfer", destination=destination, routing_key=routing_key,
                immediate=immediate, application_headers=dict(application_headers or {}),
                body=content, **fields,
            )
        except ClientError as error:
            return fail(error)
        if reference is None:
            answered = self.channel.call(method)
            assert answered is not None
            return answered.addCallback(_accepted)
        self.channel.connection.sendMethod(self.channel.number, method)
        waiter: Deferred[Any] = Deferred()
        self._waiting.setdefault(reference, []).append(waiter)
        return waiter.addCallback(_accepted)

    def open(self, reference: bytes) -> Deferred[Any]:
        """message.open: an empty reference."""
        return self._request("message.open", reference=reference)

    def append(self, reference: bytes, data: bytes) -> Deferred[Any]:
        """message.append: add *data* to an open reference (the method must fit in a frame)."""
        return self._request("message.append", reference=reference, bytes=data)

    def checkpoint(self, reference: bytes, identifier: str) -> Deferred[Any]:
        """message.checkpoint: the broker keeps the reference's content so far."""
        return self._request("message.checkpoint", reference=reference, identifier=identifier)

    def resume(self, reference: bytes, identifier: str) -> Deferred[int]:
        """message.resume: reopen a checkpointed reference; fires with its size."""
        return self._request("message.resume", reference=reference, identifier=identifier).addCallback(
            lambda offset: offset.value
        )

    def close(self, reference: bytes) -> Deferred[Any]:
        """message.close: the transfers naming the reference are answered first."""
        for waiter in self._waiting.pop(reference, []):
            self.channel._expect(self.channel.spec.BY_NAME["message.transfer"].RESPONSES, _method).chainDeferred(waiter)
        return self._request("message.close", reference=reference)

    def transfer_large(
        self,
        body: bytes,
        destination: str = "",
        routing_key: str = "",
        *,
        identifier: str,
        chunk_size: int = DEFAULT_STAGE_SIZE,
        **fields: Any,
    ) -> Deferred[int]:
        """Send *body* through a reference, checkpointed after each chunk under
        *identifier*, resuming from the broker's checkpoint; fires with the
        offset it resumed from once the broker took the message.

        Chunks are at most *chunk_size* bytes, and small enough for a frame.
        """
        reference = identifier.encode("utf-8")
        # message.append is a method: each chunk must fit in one frame.
        chunk_size = min(chunk_size, self.channel.connection.body_frame_limit - len(reference) - 64)

        def resumed(offset: int) -> Deferred[int]:
            for start in range(offset, len(body), chunk_size):
                self.append(reference, body[start : start + chunk_size])
                self.checkpoint(reference, identifier)
            sent = self.transfer(destination=destination, routing_key=routing_key, reference=reference, **fields)
            self.close(reference)
            return sent.addCallback(lambda _: offset)

        return self.resume(reference, identifier).addCallback(resumed)

    # -- consuming --------------------------------------------------------------

    def qos(self, prefetch_size: int = 0, prefetch_count: int = 0, global_: bool = False) -> Deferred[Any]:
        """message.qos: the prefetch window of message transfers."""
        return self._request(
            "message.qos", prefetch_size=prefetch_size, prefetch_count=prefetch_count, global_=global_
        )

    def consume(
        self,
        queue: str = "",
        callback: Optional[DeliveryCallback] = None,
        *,
        destination: str = "",
        no_ack: bool = False,
        exclusive: bool = False,
        no_local: bool = False,
        arguments: Optional[dict[str, Any]] = None,
        max_backlog: int = DEFAULT_MAX_BACKLOG,
    ) -> Deferred[Consumer]:
        """message.consume; fires with the :class:`Consumer` (its tag is the
        destination; ``consumer.cancel()`` sends message.cancel).

        :param arguments: the ``filter`` table (see :meth:`FileClass.consume`).
        """
        return self.channel.startConsumer(
            "message", queue, callback, consumer_tag=destination, tag_field="destination",
            no_ack=no_ack, max_backlog=max_backlog, exclusive=exclusive, no_local=no_local,
            filter=arguments or {},
        )

    def get(self, queue: str = "", *, destination: str = "get", no_ack: bool = False) -> Deferred[Optional[TransferredMessage]]:
        """message.get: fires with the message, or None when the queue is empty."""

        def unwrap(channel: Channel, command: Command) -> Optional[TransferredMessage]:
            if command.method.NAME == "message.empty":
                return None
            return self._gotten.pop(destination)

        try:
            method = self.channel.build("message.get", queue=queue, destination=destination, no_ack=no_ack)
        except ClientError as error:
            return fail(error)
        self._gotten.pop(destination, None)
        fetched = self.channel._call(method, unwrap)
        assert fetched is not None
        return fetched

    def recover(self, requeue: bool = False) -> Deferred[Any]:
        """message.recover: the broker sends unacknowledged transfers again."""
        return self._request("message.recover", requeue=requeue)

    # -- requests from the broker -------------------------------------------------

    def _answer(self) -> _Answer:
        """A place for the answer to the request that just arrived, in arrival order."""
        answer = _Answer()
        self._answers.append(answer)
        return answer

    def _onOpen(self, command: Command[methods.MessageOpen]) -> None:
        answer = self._answer()
        self._references[command.method.reference] = []
        self._settle(answer, "message.ok")

    def _onAppend(self, command: Command[methods.MessageAppend]) -> None:
        answer = self._answer()
        self._references.setdefault(command.method.reference, []).append(command.method.bytes)
        self._settle(answer, "message.ok")

    def _onClose(self, command: Command[methods.MessageClose]) -> None:
        answer = self._answer()
        self._references.pop(command.method.reference, None)
        self._settle(answer, "message.ok")

    def _onOtherRequest(self, command: Command) -> None:
        """message.checkpoint or message.resume: answered ok."""
        self._settle(self._answer(), "message.ok")

    def _onTransfer(self, command: Command[methods.MessageTransfer]) -> None:
        method = command.method
        answer = self._answer()
        body: Content = method.body
        data = b"".join(self._references.get(body.data, ())) if body.is_reference else body.data
        consumer = self.channel.consumers.get(method.destination)
        no_ack = consumer is not None and consumer.no_ack
        message = TransferredMessage(
            self.channel, Command(method, b"", data), lambda name: self._settle(answer, name), no_ack
        )
        if no_ack:
            self._settle(answer, "message.ok")
        if consumer is not None:
            consumer.deliver(message)
        else:
            self._gotten[method.destination] = message

    def _settle(self, answer: _Answer, name: str) -> None:
        answer.name = name
        answers = self._answers
        while answers and answers[0].name is not None:
            ready = answers.popleft()
            assert ready.name is not None
            self.channel.call(self.channel.build(ready.name))


def _accepted(answer: Any) -> Any:
    if answer.NAME == "message.reject":
        raise MessageRejected(answer.code, answer.text)
    return answer


def _method(channel: Channel, command: Command) -> Any:
    return command.method
