"""Base classes of the generated method and content-property classes.

The generated modules (``_amqp0_8``, ``_amqp0_9``, ``_amqp0_9_1``) subclass
:class:`Method` once per method and :class:`Properties` once per content
class; this module holds what they share: equality, representation, and the
dispatching decoders that turn malformed input into the spec's reply codes.
"""

from __future__ import annotations

import struct
from typing import Any, ClassVar, Mapping, NamedTuple

from txamqp09.wire.errors import AMQPError, AMQPSyntaxError, CommandInvalid, EncodeError

__all__ = [
    "AMQPClass",
    "ReplyCode",
    "Method",
    "Properties",
    "method_index",
    "decode_method",
    "decode_properties",
    "properties_error",
    "CONTENT_HEADER",
]

#: class-id, weight and body-size at the start of a content header payload.
CONTENT_HEADER = struct.Struct(">HHQ")
_unpack_index = struct.Struct(">I").unpack_from


def method_index(class_id: int, method_id: int) -> int:
    """The key of a method in a generated module's ``METHODS`` table."""
    return (class_id << 16) | method_id


class _Fielded:
    """Equality and repr over the ``FIELDS`` of a generated class."""

    __slots__ = ()
    NAME: ClassVar[str] = ""
    #: (python attribute name, AMQP type) for each field, in wire order.
    FIELDS: ClassVar[tuple[tuple[str, str], ...]] = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(
            getattr(self, name) == getattr(other, name) for name, _ in self.FIELDS
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={getattr(self, name)!r}" for name, _ in self.FIELDS
        )
        return f"<{self.NAME} {shown}>" if shown else f"<{self.NAME}>"

    def fields(self) -> dict[str, Any]:
        """The field values as a dict keyed by attribute name."""
        return {name: getattr(self, name) for name, _ in self.FIELDS}


class Method(_Fielded):
    """One AMQP method: its fields plus the spec's metadata as class attributes."""

    __slots__ = ()
    CLASS_ID: ClassVar[int] = 0
    METHOD_ID: ClassVar[int] = 0
    #: The method waits for one of RESPONSES before its sender goes on.
    SYNCHRONOUS: ClassVar[bool] = False
    #: The method is followed by a content header and body frames.
    CONTENT: ClassVar[bool] = False
    #: The methods that answer this one.
    RESPONSES: ClassVar[tuple[type[Method], ...]] = ()
    #: Chassis that must or may receive this method: "server", "client".
    CHASSIS: ClassVar[tuple[str, ...]] = ()
    #: The name of the Python method that handles it on either side:
    #: ``queue.declare`` -> ``queue_declare`` (``connection_open`` on a
    #: connection, ``basic_publish`` on a server channel, ...).
    HANDLER: ClassVar[str] = ""

    def encode(self) -> bytes:
        """The method frame payload: class id, method id, fields."""
        raise NotImplementedError

    @classmethod
    def decode(cls, buf: bytes, offset: int) -> Method:
        """Decode the fields that start at *offset* of a method payload."""
        raise NotImplementedError


class Properties(_Fielded):
    """The content properties of one content class; unset ones are None."""

    __slots__ = ()
    CLASS_ID: ClassVar[int] = 0

    def encode(self) -> bytes:
        """Property flags followed by the set properties."""
        raise NotImplementedError

    @classmethod
    def decode(cls, buf: bytes, offset: int) -> Properties:
        """Decode property flags and properties starting at *offset*."""
        raise NotImplementedError


_MALFORMED = (struct.error, IndexError, ValueError, OverflowError, EncodeError)


def decode_method(methods: Mapping[int, type[Method]], payload: bytes) -> Method:
    """Decode a method frame payload with a generated ``METHODS`` table.

    :raises CommandInvalid: unknown class or method id (503).
    :raises AMQPSyntaxError: fields that cannot be decoded (502).
    """
    try:
        # The index is class id and method id as one big-endian 32-bit int.
        index = _unpack_index(payload)[0]
    except struct.error:
        raise AMQPSyntaxError(
            f"method frame of {len(payload)} bytes is too short for its class "
            "and method ids"
        ) from None
    try:
        cls = methods[index]
    except KeyError:
        raise CommandInvalid(
            f"unknown method: class {index >> 16}, method {index & 0xFFFF}",
            index >> 16,
            index & 0xFFFF,
        ) from None
    try:
        return cls.decode(payload, 4)
    except AMQPError as exc:
        raise _in_command(exc, cls) from None
    except _MALFORMED as exc:
        raise _malformed(exc, cls, "frame ends inside a field or holds an illegal value") from None


def decode_properties(cls: type[Properties], payload: bytes, offset: int) -> Properties:
    """Decode content properties, mapping malformed input to 502."""
    try:
        return cls.decode(payload, offset)
    except Exception as exc:
        raise properties_error(cls, exc) from None


def properties_error(cls: type[Properties], exc: Exception) -> Exception:
    """What to raise for *exc*, raised while decoding properties of *cls*.

    An :class:`AMQPError` gains the class name in its text; the Python
    errors malformed input causes become 502; anything else is a bug and is
    returned unchanged.
    """
    if isinstance(exc, AMQPError):
        exc.reply_text = f"{cls.NAME}: {exc.reply_text}"
        return exc
    if isinstance(exc, _MALFORMED):
        return _malformed(
            exc, cls, "content header ends inside a property or holds an illegal value"
        )
    return exc


def _in_command(exc: AMQPError, cls: type[Method]) -> AMQPError:
    """*exc*, raised inside a method's fields, named after the method."""
    exc.reply_text = f"{cls.NAME}: {exc.reply_text}"
    exc.class_id, exc.method_id = cls.CLASS_ID, cls.METHOD_ID
    return exc


def _malformed(
    exc: Exception, cls: type[Method] | type[Properties], what: str
) -> AMQPSyntaxError:
    """The 502 for a Python error met while decoding *cls*."""
    if isinstance(exc, UnicodeDecodeError):
        text = (
            f"{cls.NAME}: a short string is not valid UTF-8 (byte {exc.start} of "
            f"{exc.object!r:.60}: {exc.reason})"
        )
    else:
        text = f"{cls.NAME}: {what} ({exc})"
    if issubclass(cls, Method):
        return AMQPSyntaxError(text, cls.CLASS_ID, cls.METHOD_ID)
    return AMQPSyntaxError(text)


class ReplyCode(NamedTuple):
    """A reply code constant of a spec and whether it is a hard error."""

    name: str
    code: int
    hard: bool


class AMQPClass:
    """Namespace of one AMQP class: its methods as attributes, e.g. ``Basic.Publish``."""

    NAME: ClassVar[str] = ""
    CLASS_ID: ClassVar[int] = 0
    METHODS: ClassVar[tuple[type[Method], ...]] = ()
    Properties: ClassVar[type[Properties] | None] = None
