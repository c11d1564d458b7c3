"""The file class (0-8, 0-9): staged, reliable transfer of large messages.

Publishing: file.open names a staging identifier and the content size and
is answered with the bytes already staged under that identifier (by this
user, in this virtual host, on any connection); file.stage sends content
from there on, in one or several stages; file.publish routes the complete
staged content as a message and frees the staging entry. Staged content
lives in the virtual host's :class:`~txamqp09.broker.classes.staging.StagingArea`.

Delivering: for each message a file consumer is to receive, the server
sends file.open (the identifier is fixed for the message's place in its
queue, so it stays the same when the message is delivered again), waits for
the client's file.open-ok, stages the content from the offset the client
reported, and sends file.deliver. One message is offered at a time per
channel. file.ack and file.reject settle deliveries as basic.ack and
basic.reject do.
"""

from __future__ import annotations

import hashlib
from collections import deque
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

from txamqp09.broker.classes.common import (
    FILENAME_HEADER,
    PERSISTENT,
    DeliveringState,
    basic_message,
    from_basic,
    to_basic,
)
from txamqp09.broker.classes.registry import register, vhost_classes
from txamqp09.broker.classes.staging import Staged
from txamqp09.broker.model import Consumer, Message
from txamqp09.wire.errors import CommandInvalid, NotFound, PreconditionFailed
from txamqp09.wire.frames import Command

if TYPE_CHECKING:
    from txamqp09.wire import methods

__all__ = ["FileState"]


class _Offer(NamedTuple):
    """A delivery waiting for the client's file.open-ok."""

    consumer_tag: str
    delivery_tag: int
    redelivered: bool
    message: Message
    body: bytes
    identifier: str


@register
class FileState(DeliveringState):
    """The file class on one channel."""

    AMQP_CLASS = "file"

    def __init__(self, channel: Any) -> None:
        super().__init__(channel)
        self._staging = vhost_classes(channel.vhost).staging
        #: The identifier and entry file.open opened on this channel.
        self._open: Optional[tuple[tuple[str, str, str], Staged]] = None
        self._offers: deque[_Offer] = deque()

    def _key(self, identifier: str) -> tuple[str, str, str]:
        return (self.channel.user_name, "file", identifier)

    # -- consumers -----------------------------------------------------------

    def file_qos(self, method: methods.FileQos) -> None:
        """Set the prefetch window of file deliveries (channel, or connection with global)."""
        self.session.qos(method.prefetch_size, method.prefetch_count, method.global_)
        self.reply("file.qos-ok")

    def file_consume(self, method: methods.FileConsume) -> None:
        """Start a file consumer."""
        self.consume(
            method, method.consumer_tag, no_ack=method.no_ack,
            answer=None if method.nowait else "file.consume-ok",
        )

    def file_cancel(self, method: methods.FileCancel) -> None:
        """End a file consumer; messages already offered are still staged and delivered."""
        self.session.cancel(method.consumer_tag)
        if not method.nowait:
            self.reply("file.cancel-ok", consumer_tag=method.consumer_tag)

    def file_ack(self, method: methods.FileAck) -> None:
        """Acknowledge file deliveries."""
        self.session.ack(method.delivery_tag, method.multiple)

    def file_reject(self, method: methods.FileReject) -> None:
        """Refuse a file delivery, requeueing it if asked."""
        self.session.reject(method.delivery_tag, method.requeue)

    # -- publishing ------------------------------------------------------------

    def file_open(self, method: methods.FileOpen) -> None:
        """Open staging for an identifier; answer with the bytes already staged.

        :raises PreconditionFailed: the content is larger than the broker accepts.
        """
        limit = self.channel.max_body_size
        if method.content_size > limit:
            raise PreconditionFailed(
                f"file of {method.content_size} bytes exceeds the maximum message size of {limit} bytes"
            )
        key = self._key(method.identifier)
        staged = self._staging.open(key, method.content_size)
        self._open = (key, staged)
        self.reply("file.open-ok", staged_size=staged.size)

    def file_stage(self, command: Command) -> None:
        """Stage content after file.open (several stages may follow one open).

        :raises CommandInvalid: no file.open came first.
        :raises PreconditionFailed: more content than file.open announced.
        """
        if self._open is None:
            raise CommandInvalid("file.stage without a file.open before it on this channel")
        key, staged = self._open
        if staged.size + len(command.body) > staged.expected:
            self._staging.remove(key)
            self._open = None
            raise PreconditionFailed(
                f"file.stage brings {staged.size + len(command.body)} bytes in all for "
                f"{key[2]!r}, announced as {staged.expected}; the staged content is dropped"
            )
        if self._staging.get(key) is not staged:
            self._open = None
            raise NotFound(f"staged content of {key[2]!r} was dropped to make room; open it again")
        self._staging.append(key, staged, command.body)
        staged.raw_properties = command.raw_properties

    def cut_off(self, command: Command) -> None:
        """A file.stage cut off by a broken connection: keep the bytes that
        arrived (within the staging limit), so that file.open on a new
        connection reports them in staged-size and the sender resumes there."""
        if command.method.NAME != "file.stage" or self._open is None or not command.body:
            return
        key, staged = self._open
        if self._staging.get(key) is staged and staged.size + len(command.body) <= staged.expected:
            try:
                self._staging.append(key, staged, command.body)
            except PreconditionFailed:
                return  # beyond the staging limit: the stage is lost, not the rest
            staged.raw_properties = command.raw_properties

    def file_publish(self, method: methods.FilePublish) -> None:
        """Publish the content staged under the identifier; the staging entry goes.

        :raises NotFound: nothing is staged under the identifier.
        :raises PreconditionFailed: the staged content is not complete.
        """
        key = self._key(method.identifier)
        staged = self._staging.get(key)
        if staged is None:
            raise NotFound(f"no file staged under identifier {method.identifier!r}")
        if not staged.complete:
            raise PreconditionFailed(
                f"file {method.identifier!r} is staged up to {staged.size} of {staged.expected} "
                "bytes; stage the rest before publishing"
            )
        spec = self.channel.spec
        properties = spec.FileProperties.decode(staged.raw_properties, 0) if staged.raw_properties else None
        filename = getattr(properties, "filename", None)
        raw = to_basic(
            properties, self.channel.version.properties[60], delivery_mode=PERSISTENT,
            extra_headers={FILENAME_HEADER: filename} if filename else None,
        )
        message = basic_message(self.channel, method.exchange, method.routing_key, raw, staged.content())
        self.publish(method.exchange, message, method.mandatory, method.immediate)
        self._staging.remove(key)
        if self._open is not None and self._open[0] == key:
            self._open = None

    # -- delivering ------------------------------------------------------------

    def deliver(self, consumer: Consumer, delivery_tag: int, redelivered: bool, message: Message) -> None:
        """Offer *message* with file.open (after the offers before it)."""
        delivery = self.session.unacked.get(delivery_tag)
        place = (
            f"{delivery.queue.name}\0{delivery.sequence}" if delivery is not None
            else f"{consumer.tag}\0{delivery_tag}"
        )
        identifier = hashlib.sha1(place.encode("utf-8")).hexdigest()
        offer = _Offer(consumer.tag, delivery_tag, redelivered, message, message.body or b"", identifier)
        self._offers.append(offer)
        if len(self._offers) == 1:
            self._offer()

    def _offer(self) -> None:
        offer = self._offers[0]
        self.send("file.open", identifier=offer.identifier, content_size=len(offer.body))

    def file_open_ok(self, method: methods.FileOpenOk) -> None:
        """The client is ready for the offered message: stage it from its offset, deliver it.

        :raises CommandInvalid: the server offered nothing.
        :raises PreconditionFailed: the client claims more than the whole content.
        """
        if not self._offers:
            raise CommandInvalid("file.open-ok, but the server sent no file.open on this channel")
        offer = self._offers[0]
        if method.staged_size > len(offer.body):
            raise PreconditionFailed(
                f"file.open-ok reports {method.staged_size} bytes staged of a "
                f"{len(offer.body)}-byte file"
            )
        self._offers.popleft()
        spec = self.channel.spec
        self.send_content(
            "file.stage", from_basic(offer.message, spec.FileProperties), offer.body[method.staged_size:]
        )
        self.send(
            "file.deliver", consumer_tag=offer.consumer_tag, delivery_tag=offer.delivery_tag,
            redelivered=offer.redelivered, exchange=offer.message.exchange,
            routing_key=offer.message.routing_key, identifier=offer.identifier,
        )
        if self._offers:
            self._offer()

    def interrupted(self) -> None:
        self._offers.clear()
        self._open = None
        super().interrupted()
