"""Precompiled frames for the client's hot path: publish and acknowledge.

basic.publish, basic.ack, basic.nack and basic.reject have the same layout in
0-8, 0-9 and 0-9-1, so their frames are built here with one
:class:`struct.Struct` call each instead of through the generic method
objects. Everything else goes through :mod:`txamqp09.wire.frames`.
"""

from __future__ import annotations

import struct

from txamqp09.wire.fields import encode_shortstr
from txamqp09.wire.frames import (
    FRAME_BODY,
    FRAME_END,
    FRAME_HEADER,
    FRAME_METHOD,
    FRAME_OVERHEAD,
)

__all__ = [
    "NO_PROPERTIES",
    "publish_method_frame",
    "content_frames",
    "ack_frame",
    "nack_frame",
    "reject_frame",
]

BASIC_CLASS = 60
_PUBLISH = 40
_ACK_ID = 80
_REJECT_ID = 90
_NACK_ID = 120

_END = bytes((FRAME_END,))
_METHOD_START = struct.Struct(">BHIHHH")
#: type, channel, size, class, weight, body size: a content header frame's start.
_HEADER_START = struct.Struct(">BHIHHQ")
#: frame-end of the content header, then a body frame's header.
_HEADER_END_BODY_START = struct.Struct(">BBHI")
_BODY_START = struct.Struct(">BHI")
#: A whole ack, nack or reject frame: header, class, method, tag, flags, frame-end.
_TAG_FRAME = struct.Struct(">BHIHHQBB")

#: The encoded form of an empty basic properties list: no flag set.
NO_PROPERTIES = b"\x00\x00"


def publish_method_frame(
    channel: int, exchange: str, routing_key: str, mandatory: bool, immediate: bool
) -> bytes:
    """A whole basic.publish method frame (reserved ticket 0)."""
    fields = (
        encode_shortstr(exchange)
        + encode_shortstr(routing_key)
        + bytes(((1 if mandatory else 0) | (2 if immediate else 0),))
    )
    return (
        _METHOD_START.pack(FRAME_METHOD, channel, 6 + len(fields), BASIC_CLASS, _PUBLISH, 0)
        + fields
        + _END
    )


def content_frames(
    method_frame: bytes, channel: int, properties: bytes, body: bytes, frame_max: int
) -> bytes:
    """*method_frame* followed by a basic content header and body frames.

    :param properties: encoded properties (flags and values).
    :param frame_max: the negotiated frame_max; bodies are split to fit it.
    """
    size = len(body)
    header = _HEADER_START.pack(
        FRAME_HEADER, channel, 12 + len(properties), BASIC_CLASS, 0, size
    )
    chunk = frame_max - FRAME_OVERHEAD
    if size <= chunk:
        if not size:
            return b"".join((method_frame, header, properties, _END))
        return b"".join(
            (
                method_frame,
                header,
                properties,
                _HEADER_END_BODY_START.pack(FRAME_END, FRAME_BODY, channel, size),
                body,
                _END,
            )
        )
    parts = [method_frame, header, properties, _END]
    for start in range(0, size, chunk):
        piece = body[start : start + chunk]
        parts += (_BODY_START.pack(FRAME_BODY, channel, len(piece)), piece, _END)
    return b"".join(parts)


def ack_frame(channel: int, delivery_tag: int, multiple: bool) -> bytes:
    """A basic.ack frame."""
    return _TAG_FRAME.pack(
        FRAME_METHOD, channel, 13, BASIC_CLASS, _ACK_ID, delivery_tag, multiple, FRAME_END
    )


def reject_frame(channel: int, delivery_tag: int, requeue: bool) -> bytes:
    """A basic.reject frame."""
    return _TAG_FRAME.pack(
        FRAME_METHOD, channel, 13, BASIC_CLASS, _REJECT_ID, delivery_tag, requeue, FRAME_END
    )


def nack_frame(channel: int, delivery_tag: int, multiple: bool, requeue: bool) -> bytes:
    """A basic.nack frame (0-9-1 only)."""
    flags = (1 if multiple else 0) | (2 if requeue else 0)
    return _TAG_FRAME.pack(
        FRAME_METHOD, channel, 13, BASIC_CLASS, _NACK_ID, delivery_tag, flags, FRAME_END
    )
