"""The 0-9 message class (marked work in progress by the specification).

Every method a client sends gets exactly one answer, in order:
message.ok, or message.empty (get of an empty queue), message.reject (a
transfer the broker refuses) or message.offset (resume). The one exception
follows the rule that a message cannot be acknowledged while its reference
is open: a transfer whose body names an open reference is answered when
that reference is closed, just before the close's own ok.

The broker's transfers to the client (deliveries of message.consume and
message.get) each expect one message.ok or message.reject from the client,
in the order they were sent; ok acknowledges the delivery, reject drops it
(it is not requeued). Transfers of no-ack consumers are answered the same
way, and the answer is ignored. A body that does not fit in one frame is
sent by reference: message.open, message.append (as many as needed), the
transfer naming the reference, message.close; the client answers each.

message.get is answered by the transfer (to the get's destination) and
then message.ok, or by message.empty.

References live on their channel; message.checkpoint copies a reference's
content (the same bytes objects, not copies) into the virtual host's
staging area under the checkpoint identifier and the user's name, where
message.resume finds it again on any connection; resuming an unknown
identifier opens an empty reference (offset 0).
"""

from __future__ import annotations

from collections import deque
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Optional

from txamqp09.broker.classes.common import DeliveringState, basic_message
from txamqp09.broker.classes.registry import register, vhost_classes
from txamqp09.broker.classes.staging import Staged
from txamqp09.broker.model import Consumer, Message, Mode
from txamqp09.wire.errors import CommandInvalid, NotFound, PreconditionFailed
from txamqp09.wire.fields import Content
from txamqp09.wire.frames import FRAME_OVERHEAD

if TYPE_CHECKING:
    from txamqp09.wire import methods

__all__ = ["MAX_OPEN_REFERENCES", "MessageState"]

#: References one channel may have open at once.
MAX_OPEN_REFERENCES = 64
#: Room left in a frame for a transfer's fields other than the body.
_TRANSFER_FIELDS_ROOM = 4096

#: message.transfer fields copied from basic properties of the same name.
_SAME_NAMES = (
    "priority", "delivery_mode", "message_id", "correlation_id", "reply_to",
    "content_type", "content_encoding", "user_id", "app_id",
)


class _Reference:
    """An open reference: its content and the transfers waiting for its close."""

    __slots__ = ("staged", "transfers")

    def __init__(self, staged: Staged) -> None:
        self.staged = staged
        self.transfers: list[methods.MessageTransfer] = []


@register
class MessageState(DeliveringState):
    """The message class on one channel.

    :ivar references: open references by name.
    """

    AMQP_CLASS = "message"

    def __init__(self, channel: Any) -> None:
        super().__init__(channel)
        self.references: dict[bytes, _Reference] = {}
        #: For each transfer sent to the client and not yet answered: its
        #: delivery tag, or None when the answer settles nothing.
        self._awaiting: deque[Optional[int]] = deque()
        #: The reply code and text of a transfer the broker returned.
        self._returned: Optional[tuple[int, str]] = None

    # -- transfers from the client ---------------------------------------------

    def message_transfer(self, method: methods.MessageTransfer) -> None:
        """Publish a message to the destination exchange.

        Answered with ok, or with reject (313) when ``immediate`` is set and
        no consumer could take it at once.
        """
        body: Content = method.body
        if not body.is_reference:
            self._publish(method, body.data)
            return
        reference = self._reference(body.data, method)
        reference.transfers.append(method)

    def _publish(self, method: methods.MessageTransfer, body: bytes) -> None:
        channel = self.channel
        basic: Any = channel.version.properties[60]
        now = datetime.fromtimestamp(int(channel.clock.seconds()), timezone.utc)
        values = {name: getattr(method, name) for name in _SAME_NAMES if getattr(method, name)}
        if method.application_headers:
            values["headers"] = method.application_headers
        if method.ttl:
            values["expiration"] = str(method.ttl)
        raw = basic(timestamp=now, **values).encode()
        message = basic_message(channel, method.destination, method.routing_key, raw, body)
        self._returned = None
        self.publish(method.destination, message, False, method.immediate)
        returned, self._returned = self._returned, None
        if returned is not None:
            self.reply("message.reject", code=returned[0], text=returned[1])
        else:
            self.reply("message.ok")

    def returned(self, reply_code: int, reply_text: str, message: Message) -> None:
        """An immediate transfer no consumer took: its answer becomes reject."""
        self._returned = (reply_code, reply_text)

    # -- consumers and get -----------------------------------------------------

    def message_qos(self, method: methods.MessageQos) -> None:
        """Set the prefetch window of message deliveries."""
        self.session.qos(method.prefetch_size, method.prefetch_count, method.global_)
        self.reply("message.ok")

    def message_consume(self, method: methods.MessageConsume) -> None:
        """Start a consumer; its transfers carry its destination (the consumer tag)."""
        self.consume(method, method.destination, no_ack=method.no_ack, answer="message.ok")

    def message_cancel(self, method: methods.MessageCancel) -> None:
        """End the consumer of a destination (ok also when there is none)."""
        self.session.cancel(method.destination)
        self.reply("message.ok")

    def message_get(self, method: methods.MessageGet) -> None:
        """Transfer one message to the destination, then ok; or empty."""
        channel = self.channel
        queue = channel.vhost.queue(channel.queue_name(method.queue), channel.client)
        got = self.session.get(queue, method.no_ack)
        if got is None:
            self.reply("message.empty")
            return
        tag, redelivered, message = got
        self._transfer(method.destination, None if method.no_ack else tag, redelivered, message)
        self.reply("message.ok")

    def message_recover(self, method: methods.MessageRecover) -> None:
        """Send every unacknowledged delivery again (or requeue them).

        :raises PreconditionFailed: the channel is transactional, as the spec requires.
        """
        if self.session.mode is Mode.TX:
            raise PreconditionFailed("message.recover is not allowed on a transactional channel")
        self.session.recover(method.requeue)
        self.reply("message.ok")

    # -- answers from the client -----------------------------------------------

    def _answered(self, method: methods.AnyMethod) -> Optional[int]:
        if not self._awaiting:
            raise CommandInvalid(f"{method.NAME}, but no message.transfer awaits an answer on this channel")
        return self._awaiting.popleft()

    def message_ok(self, method: methods.MessageOk) -> None:
        """The client took the oldest unanswered transfer: acknowledge it."""
        tag = self._answered(method)
        if tag is not None and tag in self.session.unacked:
            self.session.ack(tag)

    def message_reject(self, method: methods.MessageReject) -> None:
        """The client refused the oldest unanswered transfer: drop it."""
        tag = self._answered(method)
        if tag is not None and tag in self.session.unacked:
            self.session.reject(tag, False)

    def message_empty(self, method: methods.MessageEmpty) -> None:
        """The broker never sends message.get, so never expects empty."""
        raise CommandInvalid("message.empty answers message.get, which this broker never sends")

    def message_offset(self, method: methods.MessageOffset) -> None:
        """The broker never sends message.resume, so never expects offset."""
        raise CommandInvalid("message.offset answers message.resume, which this broker never sends")

    # -- references ------------------------------------------------------------

    def _reference(self, name: bytes, method: methods.AnyMethod) -> _Reference:
        reference = self.references.get(name)
        if reference is None:
            raise NotFound(f"{method.NAME}: no open reference {name!r} on this channel")
        return reference

    def _open(self, name: bytes, staged: Staged) -> None:
        if name in self.references:
            raise PreconditionFailed(f"reference {name!r} is already open on this channel")
        if len(self.references) >= MAX_OPEN_REFERENCES:
            raise PreconditionFailed(
                f"{MAX_OPEN_REFERENCES} references are open on this channel; close one first"
            )
        self.references[name] = _Reference(staged)

    def message_open(self, method: methods.MessageOpen) -> None:
        """Open an empty reference."""
        self._open(method.reference, Staged())
        self.reply("message.ok")

    def message_append(self, method: methods.MessageAppend) -> None:
        """Append bytes to an open reference.

        :raises PreconditionFailed: the reference would exceed the maximum message size.
        """
        reference = self._reference(method.reference, method)
        staged = reference.staged
        limit = self.channel.max_body_size
        if staged.size + len(method.bytes) > limit:
            raise PreconditionFailed(
                f"reference {method.reference!r} would exceed the maximum message size of {limit} bytes"
            )
        staged.chunks.append(method.bytes)
        staged.size += len(method.bytes)
        self.reply("message.ok")

    def message_close(self, method: methods.MessageClose) -> None:
        """Close a reference: publish the transfers that named it, then ok."""
        reference = self._reference(method.reference, method)
        del self.references[method.reference]
        if reference.transfers:
            body = reference.staged.content()
            for transfer in reference.transfers:
                self._publish(transfer, body)
        self.reply("message.ok")

    def _checkpoint_key(self, identifier: str) -> tuple[str, str, str]:
        return (self.channel.user_name, "message", identifier)

    def message_checkpoint(self, method: methods.MessageCheckpoint) -> None:
        """Keep the reference's content so far under the checkpoint identifier."""
        reference = self._reference(method.reference, method)
        snapshot = Staged(chunks=reference.staged.chunks)
        vhost_classes(self.channel.vhost).staging.put(self._checkpoint_key(method.identifier), snapshot)
        self.reply("message.ok")

    def message_resume(self, method: methods.MessageResume) -> None:
        """Open the reference with the checkpointed content; answer its size (offset)."""
        saved = vhost_classes(self.channel.vhost).staging.get(self._checkpoint_key(method.identifier))
        staged = Staged(chunks=saved.chunks if saved is not None else None)
        self._open(method.reference, staged)
        self.reply("message.offset", value=staged.size)

    def _kept_key(self, channel_id: bytes, name: bytes) -> tuple[str, str, bytes, bytes]:
        return (self.channel.user_name, "reference", channel_id, name)

    def kept(self) -> Any:
        """Open references survive an interrupted channel, for channel.resume.

        They wait in the staging area (within its limit, dropped oldest
        first like staged files); transfers waiting for them are not kept.
        """
        classes = self.channel.classes
        if not self.references or classes is None:
            return None
        staging = vhost_classes(self.channel.vhost).staging
        kept = []
        for name, reference in self.references.items():
            try:
                staging.put(self._kept_key(classes.channel_id, name), reference.staged)
            except PreconditionFailed:
                continue
            kept.append(name)
        return kept

    def resume(self, kept: Any) -> None:
        """Reopen the references the interrupted channel had open."""
        classes = self.channel.classes
        assert classes is not None
        staging = vhost_classes(self.channel.vhost).staging
        for name in kept:
            staged = staging.remove(self._kept_key(classes.channel_id, name))
            if staged is not None:
                self.references[name] = _Reference(staged)

    # -- transfers to the client -----------------------------------------------

    def deliver(self, consumer: Consumer, delivery_tag: int, redelivered: bool, message: Message) -> None:
        """Transfer *message* to the consumer's destination."""
        self._transfer(consumer.tag, None if consumer.no_ack else delivery_tag, redelivered, message)

    def _transfer(self, destination: str, tag: Optional[int], redelivered: bool, message: Message) -> None:
        properties: Any = message.properties
        body = message.body or b""
        values = {name: getattr(properties, name) for name in _SAME_NAMES if getattr(properties, name)}
        if properties.timestamp is not None:
            values["timestamp"] = properties.timestamp
        room = self.channel.frame_max - FRAME_OVERHEAD - _TRANSFER_FIELDS_ROOM
        by_reference = len(body) > room
        name = f"amq.ref-{tag if tag is not None else id(message)}".encode()
        if by_reference:
            self._send_awaited(None, "message.open", reference=name)
            for start in range(0, len(body), room):
                self._send_awaited(None, "message.append", reference=name, bytes=body[start : start + room])
        self._send_awaited(
            tag, "message.transfer", destination=destination, redelivered=redelivered,
            exchange=message.exchange, routing_key=message.routing_key,
            application_headers=properties.headers or {},
            body=Content(name, True) if by_reference else Content(body), **values,
        )
        if by_reference:
            self._send_awaited(None, "message.close", reference=name)

    def _send_awaited(self, tag: Optional[int], name: str, **fields: Any) -> None:
        self._awaiting.append(tag)
        self.send(name, **fields)

    def interrupted(self) -> None:
        self._awaiting.clear()
        super().interrupted()
