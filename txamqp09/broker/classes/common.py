"""What the file, stream, message, tunnel and dtx classes share on the broker.

Every class of a channel that has consumers or deliveries of its own gets a
:class:`ClassSession`: a model session with its own consumers, unacknowledged
deliveries and prefetch window, whose delivery tags come from the channel's
basic session, so that a tag names one delivery on the channel whatever its
class. Acknowledgements of one class settle only that class's deliveries.

Messages of every class are held in the model as basic messages: the
class's content properties are translated into basic properties when the
message is published (:func:`to_basic`) and back into the consumer's class
when it is delivered (:func:`from_basic`), so that exchanges, queues,
persistence and the queue arguments treat them all alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Optional

from zope.interface import implementer

from txamqp09.broker.classes.registry import ChannelLike, ClassState
from txamqp09.broker.model import Consumer, ISink, Message, Mode, Session, origin
from txamqp09.broker.model.names import unique_name
from txamqp09.wire.base import Properties
from txamqp09.wire.fields import field_text

if TYPE_CHECKING:
    from txamqp09.wire import methods

__all__ = [
    "ClassSession",
    "DeliveringState",
    "FILENAME_HEADER",
    "basic_message",
    "from_basic",
    "to_basic",
]

#: The basic header that carries the file class's ``filename`` property.
FILENAME_HEADER = "x-filename"
#: delivery-mode values of basic properties.
TRANSIENT, PERSISTENT = 1, 2


class ClassSession(Session):
    """The session of one content class on one channel.

    :param main: the channel's basic session; delivery tags are drawn from it.
    :param sink: what delivers this class's messages to the client.
    """

    def __init__(self, main: Session, sink: ISink) -> None:
        self._main = main
        super().__init__(main.vhost, main.client, sink, per_consumer_qos=False)
        self.flow_active = main.flow_active
        self.update_sending()
        if main.mode is Mode.TX:
            self.tx_select()

    @property  # type: ignore[override]
    def last_tag(self) -> int:
        """The channel's last delivery tag, shared by every class."""
        return self._main.last_tag

    @last_tag.setter
    def last_tag(self, value: int) -> None:
        if value > self._main.last_tag:
            self._main.last_tag = value


@implementer(ISink)
class DeliveringState(ClassState):
    """A class with consumers, deliveries and returns of its own.

    It is the :class:`~txamqp09.broker.model.ISink` of its
    :class:`ClassSession`.

    :ivar session: this class's session on the channel.
    """

    def __init__(self, channel: ChannelLike) -> None:
        super().__init__(channel)
        self.session = self.new_session()

    def new_session(self) -> ClassSession:
        """The class's session (a subclass may use its own kind)."""
        return ClassSession(self.channel.session, self)

    def deliver(self, consumer: Consumer, delivery_tag: int, redelivered: bool, message: Message) -> None:
        """Send *message* to *consumer* (each class has its own methods)."""
        raise NotImplementedError

    def returned(self, reply_code: int, reply_text: str, message: Message) -> None:
        """*message* could not be routed or delivered: ``<class>.return`` with its content."""
        method = self.channel.spec.BY_NAME[f"{self.AMQP_CLASS}.return"]
        self.send_content(
            method.NAME, from_basic(message, self.channel.version.properties[method.CLASS_ID]),
            message.body or b"", reply_code=reply_code, reply_text=reply_text,
            exchange=message.exchange, routing_key=message.routing_key,
        )

    def confirmed(self, sequence: int, ack: bool) -> None:
        """Publisher confirms are a basic-class feature: nothing to send."""

    def cancelled(self, consumer: Consumer) -> None:
        """The consumer's queue was deleted; these classes have no method to say so."""

    def interrupted(self) -> None:
        self.session.close()

    def flow(self, active: bool) -> None:
        self.session.flow(active)

    def tx(self, verb: str) -> None:
        getattr(self.session, f"tx_{verb}")()

    def consume(
        self, method: methods.FileConsume | methods.StreamConsume | methods.MessageConsume, tag: str,
        *, no_ack: bool, answer: Optional[str],
    ) -> None:
        """Start a consumer of ``method.queue`` (the channel's last queue when
        empty) as *method* asks; answer with the method *answer* (with the
        consumer tag when it has that field) unless None.

        0-9's ``filter`` table is taken as basic.consume's arguments
        (``x-priority``, ``x-stream-offset``...).
        """
        channel = self.channel
        queue = channel.vhost.queue(channel.queue_name(method.queue), channel.client)
        consumer = self.session.consume(
            queue, tag or unique_name("amq.ctag-"), no_ack=no_ack, no_local=method.no_local,
            exclusive=method.exclusive, arguments=getattr(method, "filter", None) or {},
        )
        if answer is not None:
            answer_class = channel.spec.BY_NAME[answer]
            fields = {"consumer_tag": consumer.tag} if answer_class.FIELDS else {}
            channel.reply(answer_class(**fields))
        consumer.start()

    def publish(self, exchange: str, message: Message, mandatory: bool, immediate: bool) -> None:
        """Publish *message* through this class's session."""
        self.channel.publisher.other_publishes += 1
        self.session.publish(exchange, message, mandatory, immediate)


def to_basic(
    properties: Optional[Properties],
    basic_class: type[Properties],
    *,
    delivery_mode: int = 0,
    extra_headers: Optional[Mapping[str, Any]] = None,
    **fields: Any,
) -> bytes:
    """The encoded basic properties for another class's *properties*.

    Properties both classes have are copied by name; *fields* and
    *delivery_mode* (when not 0) set more; *extra_headers* join the
    ``headers`` table.
    """
    names = {name for name, _ in basic_class.FIELDS}
    values: dict[str, Any] = {}
    if properties is not None:
        values = {
            name: value for name, value in properties.fields().items()
            if name in names and value is not None
        }
    values.update((name, value) for name, value in fields.items() if value is not None)
    if delivery_mode:
        values["delivery_mode"] = delivery_mode
    if extra_headers:
        headers = dict(values.get("headers") or {})
        headers.update(extra_headers)
        values["headers"] = headers
    return basic_class(**values).encode()


def from_basic(message: Message, target: type[Properties]) -> Properties:
    """*message*'s basic properties as properties of the *target* class.

    Properties the target class lacks are dropped; the file class's
    ``filename`` is read from (and removed from) the ``x-filename`` header.
    """
    source = message.properties.fields()
    names = {name for name, _ in target.FIELDS}
    values = {name: value for name, value in source.items() if name in names and value is not None}
    headers = values.get("headers")
    if "filename" in names and headers and FILENAME_HEADER in headers:
        headers = dict(headers)
        filename = headers.pop(FILENAME_HEADER)
        values["filename"] = str(field_text(filename))
        values["headers"] = headers or None
    return target(**values)


def basic_message(
    channel: ChannelLike, exchange: str, routing_key: str, raw_properties: bytes, body: bytes
) -> Message:
    """A model message published on *channel* with basic properties *raw_properties*."""
    return Message(
        origin(exchange, routing_key, channel.client), raw_properties, body, channel.version.properties[60]
    )
