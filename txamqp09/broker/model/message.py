"""Messages as the broker holds them: routing data, raw properties, body.

The broker forwards what it receives: a message keeps its content header's
property bytes exactly as they arrived and decodes them only when routing
needs a property (the headers exchange reads ``headers``).
"""

from __future__ import annotations

from typing import Any, Optional

from txamqp09.wire.base import Properties, decode_properties

__all__ = ["Message"]


class Message:
    """One published message, shared by every queue it is routed to.

    :ivar exchange: the exchange it was published to.
    :ivar routing_key: the routing key it was published with.
    :ivar envelope: exchange and routing key as the wire encodes them (two
        shortstrs), ready to end a deliver, get-ok or return method.
    :ivar raw_properties: the content header's property flags and list.
    :ivar body: the message body.
    :ivar publisher: the client that published it (for ``no-local``).
    """

    __slots__ = (
        "exchange",
        "routing_key",
        "envelope",
        "raw_properties",
        "body",
        "publisher",
        "_properties_class",
        "_properties",
    )

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
        self.publisher = publisher
        self._properties_class = properties_class
        self._properties: Optional[Properties] = None

    @property
    def size(self) -> int:
        """The body size in bytes (what prefetch-size and length limits count)."""
        return len(self.body)

    @property
    def properties(self) -> Properties:
        """The decoded content properties.

        :raises AMQPSyntaxError: the property bytes are malformed (502).
        """
        if self._properties is None:
            self._properties = decode_properties(self._properties_class, self.raw_properties, 0)
        return self._properties

    @property
    def headers(self) -> dict[str, Any]:
        """The ``headers`` property, or an empty table."""
        return getattr(self.properties, "headers", None) or {}

    def __repr__(self) -> str:
        return (
            f"<Message exchange={self.exchange!r} routing_key={self.routing_key!r} "
            f"{len(self.body)} bytes>"
        )
