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
    "Message", "delivery_mode", "message_ttl", "EXPIRATION_FLAG", "USER_ID_FLAG", "UNTRACKED", "RESIDENT", "PAGED_OUT",
    "SPILLED",
]

#: Message.paging: the message is not under the memory budget (a transient
#: message published while the broker was within its budget).
UNTRACKED = 0
#: Message.paging: the body is in memory, counted against the memory budget.
RESIDENT = 1
#: Message.paging: the body is on disk only, in the message store (a
#: persistent message whose every queue is durable).
PAGED_OUT = 2
#: Message.paging: a copy of the body is in the store's spill area; the body
#: is dropped from memory once that copy is on disk.
SPILLED = 3

#: Property flags of basic's first four properties (the same in 0-8, 0-9, 0-9-1).
_CONTENT_TYPE, _CONTENT_ENCODING, _HEADERS, _DELIVERY_MODE = 0x8000, 0x4000, 0x2000, 0x1000
#: The expiration bit in the first byte of the basic property flags: a
#: message with ``raw_properties[0] & EXPIRATION_FLAG`` has a per-message TTL.
EXPIRATION_FLAG = 0x01
#: The user-id bit in the second byte of the basic property flags.
USER_ID_FLAG = 0x10


def delivery_mode(raw_properties: bytes) -> int:
    """The delivery-mode of basic content properties, read in place (0 if absent).

    :raises AMQPSyntaxError: the properties end before the delivery-mode.
    """
    flags = int.from_bytes(raw_properties[:2], "big")
    if not flags & _DELIVERY_MODE:
        return 0
    position = 2
    try:
        if flags & _CONTENT_TYPE:
            position += 1 + raw_properties[position]
        if flags & _CONTENT_ENCODING:
            position += 1 + raw_properties[position]
        if flags & _HEADERS:
            position += 4 + int.from_bytes(raw_properties[position : position + 4], "big")
        return raw_properties[position]
    except IndexError:
        raise AMQPSyntaxError("content properties end before their delivery-mode") from None


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


class Message:
    """One published message, shared by every queue it is routed to.

    :ivar exchange: the exchange it was published to.
    :ivar routing_key: the routing key it was published with.
    :ivar envelope: exchange and routing key as the wire encodes them (two
        shortstrs), ready to end a deliver, get-ok or return method.
    :ivar raw_properties: the content header's property flags and list.
    :ivar body: the message body, or None while it is paged out (on disk only).
    :ivar size: the body size in bytes (what prefetch-size and length limits
        count), also while the body is paged out.
    :ivar publisher: the client that published it (for ``no-local``).
    :ivar store_id: its id in the message store, once written or spilled
        there (0: neither).
    :ivar paging: :data:`UNTRACKED`, :data:`RESIDENT`, :data:`PAGED_OUT` or
        :data:`SPILLED`.
    :ivar holders: while tracked, how many queues hold it (ready or
        delivered and unacknowledged).
    """

    __slots__ = (
        "exchange",
        "routing_key",
        "envelope",
        "raw_properties",
        "body",
        "size",
        "publisher",
        "store_id",
        "paging",
        "holders",
        "_properties",
        "__weakref__",
    )

    body: Optional[bytes]

    def __init__(
        self,
        exchange: str,
        routing_key: str,
        envelope: bytes,
        raw_properties: bytes,
        body: bytes,
        properties_class: type[Properties],
        publisher: Any = None,
    ) -> None:
        self.exchange = exchange
        self.routing_key = routing_key
        self.envelope = envelope
        self.raw_properties = raw_properties
        self.body = body
        self.size = len(body)
        self.publisher = publisher
        self.store_id = 0
        self.paging = 0  # UNTRACKED
        self.holders = 0
        #: The content-property class until the properties are decoded, then
        #: the decoded properties (one slot for both: 16 bytes less per message).
        self._properties: Union[type[Properties], Properties] = properties_class

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
        return Message(
            exchange, routing_key, envelope(exchange, routing_key),
            raw_properties, self.body, self.properties_class,
        )

    @property
    def headers(self) -> dict[str, Any]:
        """The ``headers`` property, or an empty table."""
        return getattr(self.properties, "headers", None) or {}

    def __repr__(self) -> str:
        return (
            f"<Message exchange={self.exchange!r} routing_key={self.routing_key!r} "
            f"{self.size} bytes>"
        )
