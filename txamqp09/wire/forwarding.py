"""The wire forms a broker writes for messages it forwards without decoding them.

A broker passes a message's content properties on exactly as the publisher
encoded them. Two things about a forwarded message still need the wire's
encoders:

* its *envelope*: the exchange and routing key as two shortstrs, which end
  basic.deliver, basic.get-ok and basic.return (:func:`envelope`);
* a header the broker adds to the properties, such as the
  ``x-stream-offset`` of a message read from a stream (:class:`LongHeader`).
"""

from __future__ import annotations

import functools
import struct

from txamqp09.wire.fields import RABBITMQ, encode_shortstr

__all__ = ["LongHeader", "envelope"]

#: Distinct (exchange, routing key) pairs whose envelope is kept for reuse.
ENVELOPES_KEPT = 1024

_LENGTH = struct.Struct(">I")
_FLAGS = struct.Struct(">H")
_VALUE = struct.Struct(">q")
#: The first three basic properties, in every version: content-type,
#: content-encoding (two shortstrs) and headers (a table).
_CONTENT_TYPE, _CONTENT_ENCODING, _HEADERS = 0x8000, 0x4000, 0x2000


@functools.lru_cache(maxsize=ENVELOPES_KEPT)
def envelope(exchange: str, routing_key: str) -> bytes:
    """*exchange* and *routing_key* as the wire encodes them: two shortstrs.

    The same pair gives the same bytes object while it is among the
    :data:`ENVELOPES_KEPT` most recently asked for, so that many messages
    share one.

    :raises EncodeError: a name longer than 255 bytes in UTF-8.
    """
    return encode_shortstr(exchange) + encode_shortstr(routing_key)


class LongHeader:
    """A header of type long-long (``l``) that a broker sets in encoded basic
    content properties, leaving every other property as it was encoded.

    :param name: the header's name.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._key = encode_shortstr(name)
        #: The header's name and type, which its value follows.
        self._prefix = self._key + b"l"

    def stamp(self, raw_properties: bytes, value: int) -> bytes:
        """Encoded basic properties: *raw_properties* with this header set to *value*."""
        head, tail = self.split(raw_properties)
        return head + _VALUE.pack(value) + tail

    def split(self, raw_properties: bytes) -> tuple[bytes, bytes]:
        """*raw_properties* with this header set, cut where the header's
        value goes: (head, tail), so that ``head + value + tail`` (the
        value's eight bytes, big-endian) are the stamped properties: whoever
        stamps many messages published alike can keep the split.

        The header table is extended in place when it does not hold the
        name already; otherwise it is decoded, the old value dropped, and
        encoded again (with RabbitMQ's field types); the header goes last.
        """
        flags = _FLAGS.unpack_from(raw_properties)[0]
        position = 2
        if flags & _CONTENT_TYPE:
            position += 1 + raw_properties[position]
        if flags & _CONTENT_ENCODING:
            position += 1 + raw_properties[position]
        prefix = self._prefix
        if not flags & _HEADERS:
            head = b"".join((
                _FLAGS.pack(flags | _HEADERS), raw_properties[2:position],
                _LENGTH.pack(len(prefix) + _VALUE.size), prefix,
            ))
            return head, raw_properties[position:]
        length = _LENGTH.unpack_from(raw_properties, position)[0]
        end = position + 4 + length
        table = raw_properties[position + 4 : end]
        if self._key in table:
            headers, _ = RABBITMQ.decode_table(raw_properties, position)
            headers.pop(self.name, None)
            table = RABBITMQ.encode_table(headers)[4:]
        head = b"".join((
            raw_properties[:position], _LENGTH.pack(len(table) + len(prefix) + _VALUE.size), table, prefix,
        ))
        return head, raw_properties[end:]
