"""Primitive AMQP field codecs: strings, timestamps, field tables and arrays.

Python types on the wire
========================

* ``shortstr`` is :class:`str`, encoded as UTF-8; more than 255 encoded bytes
  is an :class:`~txamqp09.wire.errors.EncodeError`.
* ``longstr`` is :class:`bytes`, always; message bodies too.
* ``timestamp`` is a timezone-aware :class:`datetime.datetime` in UTC. Encoding
  also takes a naive datetime (read as UTC) or an integer number of seconds.
  The wire holds whole seconds: fractions are dropped.

Field tables and arrays
=======================

A table is a :class:`dict` with :class:`str` keys; an array is a :class:`list`
(a :class:`tuple` encodes as well). Values are encoded by this rule:

==========================  ============================================
Python value                wire type
==========================  ============================================
``bool``                    ``t`` boolean
``int``                     ``I`` signed 32-bit if it fits, otherwise the
                            signed 64-bit type (``l`` on 0-8 and 0-9-1,
                            ``L`` on 0-9)
``float``                   ``d`` double
``decimal.Decimal``         ``D`` decimal: scale octet, signed 32-bit value
``str``                     ``S`` long string, UTF-8
``bytes``                   ``S`` long string
``datetime.datetime``       ``T`` timestamp
``dict``                    ``F`` nested table
``list``, ``tuple``         ``A`` array
``None``                    ``V`` void
an :class:`Int8` ... value  the wire type it names (see below)
==========================  ============================================

Decoding gives the plain type for ``t I l L d D S T F A V`` (``S`` gives
:class:`bytes`) and an instance of one of the typed wrappers below for every
other type, so that decoding and encoding again gives the same bytes. The
wrappers are subclasses of :class:`int`, :class:`float`, :class:`str` or
:class:`bytes` and behave as those.

Two dialects exist because the 0-9 specification and RabbitMQ's 0-9-1 (which
every 0-9-1 client follows) give some letters different meanings:

========  ==========================  ==========================
letter    :data:`RABBITMQ` (0-8, 0-9-1)  :data:`AMQP0_9` (0-9)
========  ==========================  ==========================
``s``     signed 16-bit               short string
``U``     --                          signed 16-bit
``l``     signed 64-bit               unsigned 64-bit
``L``     --                          signed 64-bit
========  ==========================  ==========================

Both also read ``t b B u I i f d D S x A T F V`` the same way. The 0-8 spec's
own types (``S I D T F``) are a subset of the RabbitMQ dialect.

Limits: tables and arrays nest at most :data:`MAX_DEPTH` levels deep, and a
declared length never runs past the enclosing frame.
"""

from __future__ import annotations

import struct
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Callable, ClassVar, Union

from txamqp09.wire.errors import AMQPSyntaxError, EncodeError

__all__ = [
    "MAX_DEPTH",
    "Int8",
    "UInt8",
    "Int16",
    "UInt16",
    "UInt32",
    "Int64",
    "UInt64",
    "Float32",
    "ShortStr",
    "ByteArray",
    "Content",
    "TableCodec",
    "RABBITMQ",
    "AMQP0_9",
    "encode_shortstr",
    "decode_shortstr",
    "encode_longstr",
    "decode_longstr",
    "encode_timestamp",
    "decode_timestamp",
    "encode_content",
    "decode_content",
    "check_end",
    "field_text",
]

#: How deep tables and arrays may nest inside one another.
MAX_DEPTH = 64

Buffer = Union[bytes, bytearray, memoryview]
FieldValue = Any

_B = struct.Struct(">B")
_b = struct.Struct(">b")
_H = struct.Struct(">H")
_h = struct.Struct(">h")
_I = struct.Struct(">I")
_i = struct.Struct(">i")
_Q = struct.Struct(">Q")
_q = struct.Struct(">q")
_f = struct.Struct(">f")
_d = struct.Struct(">d")
_DECIMAL = struct.Struct(">Bi")

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


#: What decoding raises when the bytes end inside a fixed-size value.
_CUT_SHORT = (struct.error, IndexError)


def _truncated(what: str) -> AMQPSyntaxError:
    return AMQPSyntaxError(f"frame ends inside a {what}")


# -- strings and scalars ---------------------------------------------------


#: The length octet of every possible shortstr, by length.
_SHORT_LENGTHS = tuple(bytes((n,)) for n in range(256))


def encode_shortstr(value: str) -> bytes:
    """A shortstr: one length octet and at most 255 bytes of UTF-8."""
    try:
        data = value.encode()
        return _SHORT_LENGTHS[len(data)] + data
    except AttributeError:
        raise EncodeError(
            f"a short string must be str, not {type(value).__name__}"
        ) from None
    except IndexError:
        raise EncodeError(
            f"short string is {len(data)} bytes of UTF-8; the limit is 255"
        ) from None


def decode_shortstr(buf: bytes, offset: int) -> tuple[str, int]:
    """Decode a shortstr at *offset*; return it and the offset after it."""
    end = offset + 1 + buf[offset]
    if end > len(buf):
        raise _truncated("short string")
    try:
        return buf[offset + 1 : end].decode("utf-8"), end
    except UnicodeDecodeError as exc:
        raise AMQPSyntaxError(
            f"short string is not valid UTF-8 (byte {exc.start}: "
            f"{exc.reason})"
        ) from None


def encode_longstr(value: bytes) -> bytes:
    """A longstr: a 32-bit length and that many bytes."""
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise EncodeError(
            f"a long string must be bytes, not {type(value).__name__}"
        )
    return _I.pack(len(value)) + value


def decode_longstr(buf: bytes, offset: int) -> tuple[bytes, int]:
    """Decode a longstr at *offset*; return it and the offset after it."""
    start = offset + 4
    end = start + _I.unpack_from(buf, offset)[0]
    if end > len(buf):
        raise _truncated("long string")
    return buf[start:end], end


def encode_timestamp(value: datetime | int) -> bytes:
    """A timestamp: 64-bit seconds since the Unix epoch."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        seconds = int((value - _EPOCH).total_seconds())
    elif isinstance(value, int):
        seconds = value
    else:
        raise EncodeError(
            f"a timestamp must be datetime or int, not {type(value).__name__}"
        )
    if not 0 <= seconds < 2**64:
        raise EncodeError(f"timestamp {value!r} is outside 1970 .. 2**64 s")
    return _Q.pack(seconds)


def decode_timestamp(buf: bytes, offset: int) -> tuple[datetime, int]:
    """Decode a timestamp at *offset* as an aware UTC datetime."""
    seconds = _Q.unpack_from(buf, offset)[0]
    try:
        value = datetime.fromtimestamp(seconds, timezone.utc)
    except (OverflowError, OSError, ValueError):
        raise AMQPSyntaxError(
            f"timestamp {seconds} is beyond the dates Python can hold"
        ) from None
    return value, offset + 8


def check_end(buf: bytes, offset: int) -> None:
    """Fail unless *offset*, where decoding stopped, is the end of *buf*.

    Decoding past the end means a length field pointed beyond the payload;
    stopping short means bytes were left after the last field.
    """
    if offset > len(buf):
        raise _truncated("field")
    if offset < len(buf):
        raise AMQPSyntaxError(
            f"{len(buf) - offset} unexpected bytes after the last field"
        )


# -- 0-9 message content ---------------------------------------------------


def field_text(value: Any) -> Any:
    """A field-table value with text read as :class:`str`; other values as they are.

    Tables decode long strings (``S``) as :class:`bytes`, whatever they hold;
    where a header or an argument is meant as text, this reads it as UTF-8,
    undecodable bytes becoming U+FFFD, so that a reply text can show it.
    """
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


class Content:
    """The 0-9 ``content`` field type of message.transfer.

    The 0-9 XML names this domain without defining it. It is encoded as the
    work-in-progress message class describes content: one octet saying whether
    the data is inline (0) or a reference (1), then a longstr holding the
    inline body or the reference identifier.
    """

    __slots__ = ("data", "is_reference")

    def __init__(self, data: bytes = b"", is_reference: bool = False) -> None:
        self.data = data
        self.is_reference = is_reference

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Content)
            and other.data == self.data
            and other.is_reference == self.is_reference
        )

    def __hash__(self) -> int:
        return hash((self.data, self.is_reference))

    def __repr__(self) -> str:
        return f"Content({self.data!r}, is_reference={self.is_reference})"


def encode_content(value: Content) -> bytes:
    """Encode a 0-9 :class:`Content` field."""
    return _B.pack(1 if value.is_reference else 0) + encode_longstr(value.data)


def decode_content(buf: bytes, offset: int) -> tuple[Content, int]:
    """Decode a 0-9 :class:`Content` field."""
    kind = buf[offset]
    if kind > 1:
        raise AMQPSyntaxError(
            f"content kind {kind} is neither inline (0) nor reference (1)"
        )
    data, offset = decode_longstr(buf, offset + 1)
    return Content(data, kind == 1), offset


# -- typed wrappers ----------------------------------------------------------


class _Typed:
    """Mixin: a value that names the field-table type it is encoded as."""

    __slots__ = ()
    kind: ClassVar[str]


class Int8(_Typed, int):
    """A signed 8-bit table value (``b``)."""

    kind = "int8"


class UInt8(_Typed, int):
    """An unsigned 8-bit table value (``B``)."""

    kind = "uint8"


class Int16(_Typed, int):
    """A signed 16-bit table value (``s`` on 0-9-1, ``U`` on 0-9)."""

    kind = "int16"


class UInt16(_Typed, int):
    """An unsigned 16-bit table value (``u``)."""

    kind = "uint16"


class UInt32(_Typed, int):
    """An unsigned 32-bit table value (``i``)."""

    kind = "uint32"


class Int64(_Typed, int):
    """A signed 64-bit table value (``l`` on 0-9-1, ``L`` on 0-9), even
    when it would fit 32 bits, as RabbitMQ writes its ``long`` headers
    (``x-delivery-count``). It decodes as a plain ``int``, as every value
    of that wire type does."""

    kind = "int64"


class UInt64(_Typed, int):
    """An unsigned 64-bit table value (``l`` on 0-9; 0-9-1 has no such type)."""

    kind = "uint64"


class Float32(_Typed, float):
    """A single-precision table value (``f``)."""

    kind = "float32"


class ShortStr(_Typed, str):
    """A short-string table value (``s`` on 0-9; 0-9-1 has no such type)."""

    kind = "shortstr"


class ByteArray(_Typed, bytes):
    """A byte-array table value (``x``)."""

    kind = "bytes"


# -- tables ----------------------------------------------------------------

_Decoder = Callable[[bytes, int, int], "tuple[Any, int]"]


def _fixed(fmt: struct.Struct, wrap: Callable[[Any], Any] | None = None) -> _Decoder:
    size = fmt.size
    unpack = fmt.unpack_from

    if wrap is None:

        def decode_plain(buf: bytes, offset: int, depth: int) -> tuple[Any, int]:
            return unpack(buf, offset)[0], offset + size

        return decode_plain

    def decode_wrapped(buf: bytes, offset: int, depth: int) -> tuple[Any, int]:
        return wrap(unpack(buf, offset)[0]), offset + size

    return decode_wrapped


def _decode_bool(buf: bytes, offset: int, depth: int) -> tuple[bool, int]:
    return buf[offset] != 0, offset + 1


def _decode_decimal(buf: bytes, offset: int, depth: int) -> tuple[Decimal, int]:
    scale, value = _DECIMAL.unpack_from(buf, offset)
    return Decimal(value).scaleb(-scale), offset + 5


def _decode_longstr(buf: bytes, offset: int, depth: int) -> tuple[bytes, int]:
    return decode_longstr(buf, offset)


def _decode_bytearray(buf: bytes, offset: int, depth: int) -> tuple[ByteArray, int]:
    value, offset = decode_longstr(buf, offset)
    return ByteArray(value), offset


def _decode_shortstr(buf: bytes, offset: int, depth: int) -> tuple[ShortStr, int]:
    value, offset = decode_shortstr(buf, offset)
    return ShortStr(value), offset


def _decode_timestamp(buf: bytes, offset: int, depth: int) -> tuple[datetime, int]:
    return decode_timestamp(buf, offset)


def _decode_void(buf: bytes, offset: int, depth: int) -> tuple[None, int]:
    return None, offset


class TableCodec:
    """Encodes and decodes field tables and arrays in one dialect.

    :param name: the dialect's name, for messages.
    :param letters: the wire letter of every value kind this dialect writes.
    """

    def __init__(self, name: str, letters: dict[str, bytes]) -> None:
        self.name = name
        self._letters = letters
        decoders: dict[int, _Decoder] = {
            ord("t"): _decode_bool,
            ord("D"): _decode_decimal,
            ord("S"): _decode_longstr,
            ord("T"): _decode_timestamp,
            ord("F"): self._decode_nested_table,
            ord("A"): self._decode_nested_array,
            ord("V"): _decode_void,
            ord("I"): _fixed(_i),
            ord("d"): _fixed(_d),
        }
        kinds: dict[str, _Decoder] = {
            "int8": _fixed(_b, Int8),
            "uint8": _fixed(_B, UInt8),
            "int16": _fixed(_h, Int16),
            "uint16": _fixed(_H, UInt16),
            "uint32": _fixed(_I, UInt32),
            "uint64": _fixed(_Q, UInt64),
            "int64": _fixed(_q),
            "float32": _fixed(_f, Float32),
            "shortstr": _decode_shortstr,
            "bytes": _decode_bytearray,
        }
        for kind, letter in letters.items():
            if kind in kinds:
                decoders[letter[0]] = kinds[kind]
        self._decoders = decoders

    # encoding

    def encode_table(self, table: dict[str, FieldValue] | None) -> bytes:
        """Encode *table* (None is the empty table) with its length prefix."""
        body = self._table_body(table, 1) if table else b""
        return _I.pack(len(body)) + body

    def encode_array(self, array: list[FieldValue] | tuple[FieldValue, ...]) -> bytes:
        """Encode *array* with its length prefix."""
        body = b"".join(self._value(item, 1) for item in array)
        return _I.pack(len(body)) + body

    def _table_body(self, table: dict[str, FieldValue], depth: int) -> bytes:
        if not isinstance(table, dict):
            raise EncodeError(f"a field table must be a dict, not {type(table).__name__}")
        parts = []
        for key, value in table.items():
            if not isinstance(key, str):
                raise EncodeError(f"field table key {key!r} is not a str")
            parts.append(encode_shortstr(key))
            parts.append(self._value(value, depth))
        return b"".join(parts)

    def _value(self, value: FieldValue, depth: int) -> bytes:
        if depth > MAX_DEPTH:
            raise EncodeError(f"field tables nest deeper than {MAX_DEPTH} levels")
        if isinstance(value, _Typed):
            return self._typed(value)
        if isinstance(value, bool):
            return b"t\x01" if value else b"t\x00"
        if isinstance(value, int):
            if _INT32_MIN <= value <= _INT32_MAX:
                return b"I" + _i.pack(value)
            if _INT64_MIN <= value <= _INT64_MAX:
                return self._letters["int64"] + _q.pack(value)
            raise EncodeError(f"integer {value} does not fit in 64 bits")
        if isinstance(value, str):
            return b"S" + encode_longstr(value.encode("utf-8"))
        if isinstance(value, (bytes, bytearray, memoryview)):
            return b"S" + encode_longstr(bytes(value))
        if isinstance(value, float):
            return b"d" + _d.pack(value)
        if isinstance(value, dict):
            body = self._table_body(value, depth + 1)
            return b"F" + _I.pack(len(body)) + body
        if isinstance(value, (list, tuple)):
            body = b"".join(self._value(item, depth + 1) for item in value)
            return b"A" + _I.pack(len(body)) + body
        if isinstance(value, datetime):
            return b"T" + encode_timestamp(value)
        if isinstance(value, Decimal):
            return b"D" + _encode_decimal(value)
        if value is None:
            return b"V"
        raise EncodeError(
            f"{type(value).__name__} values cannot go in a field table"
        )

    def _typed(self, value: _Typed) -> bytes:
        kind = value.kind
        letter = self._letters.get(kind)
        if letter is None:
            return self._fallback(value)
        try:
            if kind == "shortstr":
                return letter + encode_shortstr(str(value))
            if kind == "bytes":
                return letter + encode_longstr(bytes(value))  # type: ignore[call-overload]
            return letter + _STRUCTS[kind].pack(value)
        except struct.error:
            raise EncodeError(f"{value!r} does not fit a {kind} table value") from None

    def _fallback(self, value: _Typed) -> bytes:
        """A kind this dialect lacks is written as its nearest plain type."""
        if isinstance(value, str):
            return self._value(str(value), 1)
        if isinstance(value, int):
            return self._value(int(value), 1)
        raise EncodeError(f"the {self.name} dialect has no {value.kind} type")

    # decoding

    def decode_table(self, buf: bytes, offset: int) -> tuple[dict[str, FieldValue], int]:
        """Decode a table (with its length) at *offset*.

        :raises AMQPSyntaxError: the table is malformed or *buf* ends inside it.
        """
        try:
            return self._decode_nested_table(buf, offset, 1)
        except _CUT_SHORT:
            raise _truncated("field table") from None

    def decode_array(self, buf: bytes, offset: int) -> tuple[list[FieldValue], int]:
        """Decode an array (with its length) at *offset*.

        :raises AMQPSyntaxError: the array is malformed or *buf* ends inside it.
        """
        try:
            return self._decode_nested_array(buf, offset, 1)
        except _CUT_SHORT:
            raise _truncated("field array") from None

    def _bounds(self, buf: bytes, offset: int, depth: int, what: str) -> tuple[int, int]:
        if depth > MAX_DEPTH:
            raise AMQPSyntaxError(f"field tables nest deeper than {MAX_DEPTH} levels")
        start = offset + 4
        end = start + _I.unpack_from(buf, offset)[0]
        if end > len(buf):
            raise AMQPSyntaxError(
                f"{what} declares {end - start} bytes but its frame holds "
                f"{len(buf) - start}"
            )
        return start, end

    def _decode_nested_table(
        self, buf: bytes, offset: int, depth: int
    ) -> tuple[dict[str, FieldValue], int]:
        offset, end = self._bounds(buf, offset, depth, "field table")
        table: dict[str, FieldValue] = {}
        while offset < end:
            key, offset = decode_shortstr(buf, offset)
            table[key], offset = self._decode_value(buf, offset, end, depth)
        if offset != end:
            raise AMQPSyntaxError("field table value runs past the table's length")
        return table, end

    def _decode_nested_array(
        self, buf: bytes, offset: int, depth: int
    ) -> tuple[list[FieldValue], int]:
        offset, end = self._bounds(buf, offset, depth, "field array")
        array: list[FieldValue] = []
        while offset < end:
            value, offset = self._decode_value(buf, offset, end, depth)
            array.append(value)
        if offset != end:
            raise AMQPSyntaxError("field array value runs past the array's length")
        return array, end

    def _decode_value(
        self, buf: bytes, offset: int, end: int, depth: int
    ) -> tuple[FieldValue, int]:
        if offset >= end:
            raise AMQPSyntaxError("field table key has no value")
        decoder = self._decoders.get(buf[offset])
        if decoder is None:
            raise AMQPSyntaxError(
                f"unknown field table value type {chr(buf[offset])!r} "
                f"({self.name} dialect)"
            )
        return decoder(buf, offset + 1, depth + 1)


_STRUCTS: dict[str, struct.Struct] = {
    "int8": _b,
    "uint8": _B,
    "int16": _h,
    "uint16": _H,
    "uint32": _I,
    "int64": _q,
    "uint64": _Q,
    "float32": _f,
}


def _encode_decimal(value: Decimal) -> bytes:
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise EncodeError(f"decimal {value} is not a finite number")
    scale = -exponent
    if scale < 0:
        value, scale = value.scaleb(0).quantize(Decimal(1)), 0
    if scale > 255:
        raise EncodeError(f"decimal {value} needs more than 255 decimal places")
    unscaled = int(value.scaleb(scale))
    if not _INT32_MIN <= unscaled <= _INT32_MAX:
        raise EncodeError(f"decimal {value} does not fit in 32 bits at scale {scale}")
    return _DECIMAL.pack(scale, unscaled)


_COMMON_LETTERS = {
    "int8": b"b",
    "uint8": b"B",
    "uint16": b"u",
    "uint32": b"i",
    "float32": b"f",
    "bytes": b"x",
}

#: The dialect RabbitMQ and every 0-9-1 client speak; also used for 0-8.
RABBITMQ = TableCodec(
    "0-9-1", {**_COMMON_LETTERS, "int16": b"s", "int64": b"l"}
)

#: The field-table grammar of the AMQP 0-9 specification.
AMQP0_9 = TableCodec(
    "0-9",
    {**_COMMON_LETTERS, "int16": b"U", "int64": b"L", "uint64": b"l", "shortstr": b"s"},
)


# -- content property flags ------------------------------------------------


def encode_property_flags(flags: int) -> bytes:
    """Property flag words for *flags* (word k in bits 16k..16k+15).

    Each word carries 15 flags in bits 15..1; bit 0 says another word follows.
    Trailing words with no flag set are left out.
    """
    words = []
    while True:
        words.append(flags & 0xFFFE)
        flags >>= 16
        if not flags:
            break
    out = [_H.pack(word | 1) for word in words[:-1]]
    out.append(_H.pack(words[-1]))
    return b"".join(out)


def decode_property_flags(buf: bytes, offset: int, max_words: int) -> tuple[int, int]:
    """Read flag words at *offset*; at most *max_words* may be chained."""
    flags = 0
    for n in range(max_words):
        word = _H.unpack_from(buf, offset)[0]
        offset += 2
        flags |= (word & 0xFFFE) << (16 * n)
        if not word & 1:
            return flags, offset
    raise AMQPSyntaxError(
        f"property flags continue past the {max_words} word(s) this class has"
    )


def unknown_properties(name: str, flags: int) -> AMQPSyntaxError:
    """The error for property flags naming properties a class lacks."""
    return AMQPSyntaxError(f"{name}: flags {flags:#x} name properties this class lacks")


def property_flags_error(name: str, flags: int, words: int) -> AMQPSyntaxError:
    """The error for property flags with bits a class of *words* flag words lacks.

    :param flags: the flag words read, word k in bits 16k..16k+15.
    """
    if flags >> (16 * (words - 1)) & 1:
        return AMQPSyntaxError(
            f"property flags continue past the {words} word(s) this class has"
        )
    return unknown_properties(name, flags)
