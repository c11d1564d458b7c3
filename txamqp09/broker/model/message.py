"""Messages as the broker holds them: routing data, raw properties, body.

The broker forwards what it receives: a message keeps its content header's
property bytes exactly as they arrived and decodes them only when routing
needs a property (the headers exchange reads ``headers``).
"""

from __future__ import annotations

import re
from typing import Any, Optional, Union

from txamqp09.broker.model.arguments import MAX_EXPIRY
from txamqp09.wire.base import Properties, decode_properties
from txamqp09.wire.errors import AMQPSyntaxError, PreconditionFailed
from txamqp09.wire.forwarding import envelope

__all__ = [
    "Message", "Origin", "Tracking", "origin", "delivery_mode", "reply_to_span", "message_ttl", "EXPIRATION_FLAG", "USER_ID_FLAG", "UNTRACKED", "RESIDENT", "PAGED_OUT",
    "SPILLED",
]

#: Message.paging: the message is not under the memory budget (a transient
#: message published while the broker was within its budget): it has no
#: :class:`Tracking` record.
UNTRACKED = 0
#: Tracking.paging: the body is in memory, counted against the memory budget.
RESIDENT = 1
#: Tracking.paging: the body is on disk only, in the message store (a
#: persistent message whose every queue is durable).
PAGED_OUT = 2
#: Tracking.paging: a copy of the body is in the store's spill area; the body
#: is dropped from memory once that copy is on disk.
SPILLED = 3

#: Property flags of basic's first seven properties (the same in 0-8, 0-9,
#: 0-9-1), all in the first byte of the flags.
_CONTENT_TYPE, _CONTENT_ENCODING, _HEADERS, _DELIVERY_MODE = 0x80, 0x40, 0x20, 0x10
_PRIORITY, _CORRELATION_ID, _REPLY_TO = 0x08, 0x04, 0x02
#: The expiration bit in the first byte of the basic property flags: a
#: message with ``raw_properties[0] & EXPIRATION_FLAG`` has a per-message TTL.
EXPIRATION_FLAG = 0x01
#: The user-id bit in the second byte of the basic property flags.
USER_ID_FLAG = 0x10


def _after_headers(raw_properties: bytes, flags: int) -> int:
    """Where the basic properties after content-type, content-encoding and
    headers begin (*flags*: the first byte of the property flags).

    :raises IndexError: the properties end before.
    """
    position = 2
    if flags & _CONTENT_TYPE:
        position += 1 + raw_properties[position]
    if flags & _CONTENT_ENCODING:
        position += 1 + raw_properties[position]
    if flags & _HEADERS:
        position += 4 + int.from_bytes(raw_properties[position : position + 4], "big")
    return position


def delivery_mode(raw_properties: bytes) -> int:
    """The delivery-mode of basic content properties, read in place (0 if absent).

    :raises AMQPSyntaxError: the properties end before the delivery-mode.
    """
    flags = raw_properties[0] if raw_properties else 0
    if not flags & _DELIVERY_MODE:
        return 0
    try:
        return raw_properties[_after_headers(raw_properties, flags)]
    except IndexError:
        raise AMQPSyntaxError("content properties end before their delivery-mode") from None


def reply_to_span(raw_properties: bytes) -> tuple[int, int]:
    """Where the reply-to of basic content properties is, read in place:
    (start, end) of the short string, its length octet included; (0, 0)
    when the properties have none.

    :raises AMQPSyntaxError: the properties end before it.
    """
    flags = raw_properties[0] if raw_properties else 0
    if not flags & _REPLY_TO:
        return 0, 0
    try:
        position = _after_headers(raw_properties, flags)
        position += bool(flags & _DELIVERY_MODE) + bool(flags & _PRIORITY)
        if flags & _CORRELATION_ID:
            position += 1 + raw_properties[position]
        end = position + 1 + raw_properties[position]
    except IndexError:
        raise AMQPSyntaxError("content properties end before their reply-to") from None
    if end > len(raw_properties):
        raise AMQPSyntaxError("content properties end inside their reply-to")
    return position, end


#: The integer an expiration starts with (RabbitMQ reads it with Erlang's
#: string:to_integer: a sign, then ASCII digits).
_LEADING_INTEGER = re.compile(r"[+-]?[0-9]+")


def message_ttl(message: Message) -> Optional[int]:
    """The per-message TTL in milliseconds (the ``expiration`` property), or None.

    :raises PreconditionFailed: the expiration is not a non-negative
        integer (406, as RabbitMQ refuses it at publish).
    """
    if not message.raw_properties[0] & EXPIRATION_FLAG:
        return None
    expiration = getattr(message.properties, "expiration", None)
    if expiration is None:
        return None
    number = _LEADING_INTEGER.match(expiration)
    if number is None:
        reason = "no_integer"
    elif number.end() < len(expiration):
        reason = f'{{leftover_string,"{expiration[number.end():]}"}}'
    elif int(number.group()) < 0:
        reason = f"{{value_negative,{int(number.group())}}}"
    elif int(number.group()) > MAX_EXPIRY:
        reason = f"{{value_too_large,{int(number.group())}}}"
    else:
        return int(number.group())
    raise PreconditionFailed(
        f"invalid expiration {expiration!r}: {reason}",
        hint=f"expected a non-negative integer number of milliseconds, at most {MAX_EXPIRY}",
    )


#: Where a message comes from: (exchange, routing key, the two as the wire
#: encodes them, the publishing client or None). Messages published with the
#: same exchange and routing key on one channel share one such tuple.
Origin = tuple[str, str, bytes, Any]


#: Origins without a publisher (restored, dead-lettered, federated
#: messages...) by exchange and routing key, shared by the messages alike.
_ORIGINS: dict[tuple[str, str], Origin] = {}
#: Origins :data:`_ORIGINS` holds at most before it starts over.
_ORIGINS_KEPT = 1024


def origin(exchange: str, routing_key: str, publisher: Any = None) -> Origin:
    """The :data:`Origin` of a message *publisher* published to *exchange*
    with *routing_key* (one tuple for the messages without a publisher alike)."""
    if publisher is not None:
        return (exchange, routing_key, envelope(exchange, routing_key), publisher)
    names = (exchange, routing_key)
    found = _ORIGINS.get(names)
    if found is None:
        if len(_ORIGINS) >= _ORIGINS_KEPT:
            _ORIGINS.clear()
        found = _ORIGINS[names] = (exchange, routing_key, envelope(exchange, routing_key), None)
    return found


class Tracking:
    """A message's place under the memory budget and in the message store
    (only messages the budget tracks have one).

    :ivar store_id: its id in the message store, once written or spilled
        there (0: neither).
    :ivar paging: :data:`RESIDENT`, :data:`PAGED_OUT` or :data:`SPILLED`.
    :ivar holders: how many queues hold it (ready or delivered and
        unacknowledged).
    """

    __slots__ = ("store_id", "paging", "holders")

    def __init__(self, store_id: int, paging: int, holders: int) -> None:
        self.store_id = store_id
        self.paging = paging
        self.holders = holders

    def __repr__(self) -> str:
        return f"<Tracking store_id={self.store_id} paging={self.paging} holders={self.holders}>"


class Message:
    """One published message, shared by every queue it is routed to.

    A queued message is one of the broker's largest costs at scale, so it
    keeps few slots: what messages from one publisher share sits in one
    :data:`Origin` tuple, and what only tracked messages need in a
    :class:`Tracking` record.

    :ivar origin: exchange, routing key, their wire encoding (two shortstrs,
        ready to end a deliver, get-ok or return method) and publisher.
    :ivar raw_properties: the content header's property flags and list.
    :ivar body: the message body, or None while it is paged out (on disk only).
    :ivar size: the body size in bytes (what prefetch-size and length limits
        count), also while the body is paged out.
    :ivar tracking: its :class:`Tracking` record while the memory budget
        tracks it, else None.
    """

    __slots__ = (
        "origin",
        "raw_properties",
        "body",
        "size",
        "tracking",
        "_properties",
    )

    body: Optional[bytes]
    tracking: Optional[Tracking]

    def __init__(
        self, origin: Origin, raw_properties: bytes, body: bytes, properties_class: type[Properties],
    ) -> None:
        self.origin = origin
        self.raw_properties = raw_properties
        self.body = body
        self.size = len(body)
        self.tracking = None
        #: The content-property class until the properties are decoded, then
        #: the decoded properties (one slot for both).
        self._properties: Union[type[Properties], Properties] = properties_class

    # The hot path reads origin[1] (routing), origin[2] (deliver) and
    # origin[3] (no-local) in place: a property costs a Python call.

    @property
    def exchange(self) -> str:
        """The exchange it was published to."""
        return self.origin[0]

    @property
    def routing_key(self) -> str:
        """The routing key it was published with."""
        return self.origin[1]

    @property
    def envelope(self) -> bytes:
        """Exchange and routing key as the wire encodes them (two shortstrs)."""
        return self.origin[2]

    @property
    def publisher(self) -> Any:
        """The client that published it (for ``no-local``), or None."""
        return self.origin[3]

    @property
    def paging(self) -> int:
        """:data:`UNTRACKED`, or its :attr:`Tracking.paging`."""
        tracking = self.tracking
        return UNTRACKED if tracking is None else tracking.paging

    @property
    def properties(self) -> Properties:
        """The decoded content properties.

        :raises AMQPSyntaxError: the property bytes are malformed (502).
        """
        properties = self._properties
        if isinstance(properties, type):
            properties = self._properties = decode_properties(properties, self.raw_properties, 0)
        return properties

    @property
    def properties_class(self) -> type[Properties]:
        """The content-property class of the protocol version it arrived with."""
        properties = self._properties
        return properties if isinstance(properties, type) else type(properties)

    def copy(self, exchange: str, routing_key: str, raw_properties: bytes) -> Message:
        """A new message with this body, published to *exchange* with
        *routing_key* and *raw_properties* (the body must be in memory)."""
        assert self.body is not None, "read a paged-out body back before copying the message"
        return Message(origin(exchange, routing_key), raw_properties, self.body, self.properties_class)

    def with_header(self, name: str, value: Any) -> Message:
        """A copy to send with the ``headers`` property's *name* set to
        *value* (replaced in place, or added last; the body must be in memory)."""
        properties = decode_properties(self.properties_class, self.raw_properties, 0)
        headers = dict(getattr(properties, "headers", None) or {})
        headers[name] = value
        properties.headers = headers  # type: ignore[attr-defined]
        return self.copy(self.exchange, self.routing_key, properties.encode())

    @property
    def headers(self) -> dict[str, Any]:
        """The ``headers`` property, or an empty table."""
        return getattr(self.properties, "headers", None) or {}

    def __repr__(self) -> str:
        return (
            f"<Message exchange={self.exchange!r} routing_key={self.routing_key!r} "
            f"{self.size} bytes>"
        )
