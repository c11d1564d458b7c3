"""AMQP frames: an incremental reader, frame builders and the content assembler.

A frame is a 7-byte header (type octet, channel short, payload size long), the
payload, and the frame-end octet 0xCE. :class:`FrameReader` parses frames with
an offset straight out of the bytes it is fed when nothing is buffered, and
otherwise out of one growing :class:`bytearray` that it compacts once per
:meth:`~FrameReader.feed`; either way each payload is copied once. It checks
the frame size against ``frame_max``, the frame type, and the heartbeat's
channel and size as soon as a header arrives, before any of the payload is
buffered.

:class:`ContentAssembler` joins a content-carrying method with its content
header and body frames into a :class:`Command`.
"""

from __future__ import annotations

import struct
from typing import Generator, Mapping, Optional, Union

from txamqp09.wire.base import CONTENT_HEADER, Method, Properties, properties_error
from txamqp09.wire.errors import (
    AMQPNotImplemented,
    AMQPSyntaxError,
    FrameError,
    PreconditionFailed,
    UnexpectedFrame,
)

__all__ = [
    "FRAME_METHOD",
    "FRAME_HEADER",
    "FRAME_BODY",
    "FRAME_HEARTBEAT",
    "FRAME_END",
    "FRAME_MIN_SIZE",
    "FRAME_OVERHEAD",
    "HEARTBEAT_FRAME",
    "Frame",
    "FrameReader",
    "method_frame",
    "content_frames",
    "Command",
    "ContentAssembler",
]

FRAME_METHOD = 1
FRAME_HEADER = 2
FRAME_BODY = 3
FRAME_HEARTBEAT = 8
FRAME_END = 0xCE
#: The smallest frame_max a peer may negotiate, and the limit before tuning.
FRAME_MIN_SIZE = 4096
#: Bytes a frame adds to its payload: 7 of header, 1 of frame-end.
FRAME_OVERHEAD = 8

_HEADER = struct.Struct(">BHI")
_END = bytes((FRAME_END,))
#: The heartbeat frame: type 8, channel 0, empty payload.
HEARTBEAT_FRAME = _HEADER.pack(FRAME_HEARTBEAT, 0, 0) + _END

#: The frame types that carry commands: method, content header, body.
_CONTENT_TYPES = frozenset((FRAME_METHOD, FRAME_HEADER, FRAME_BODY))
_TYPE_NAMES = {
    4: "out-of-band method",
    5: "out-of-band header",
    6: "out-of-band body",
    7: "trace",
}

#: (frame type, channel, payload)
Frame = tuple[int, int, bytes]
BodyLike = Union[bytes, bytearray, memoryview]


class FrameReader:
    """Parses frames from a byte stream fed to it in chunks of any size.

    :param frame_max: the largest frame accepted, header and frame-end
        included; may be changed after tuning.
    :param reserved_types: frame types this version defines but that are not
        supported here (0-9's out-of-band and trace frames): they are refused
        with 540 not-implemented instead of 501 frame-error.
    """

    __slots__ = ("_buffer", "frame_max", "_reserved")

    def __init__(
        self, frame_max: int = FRAME_MIN_SIZE, reserved_types: frozenset[int] = frozenset()
    ) -> None:
        self._buffer = bytearray()
        self.frame_max = frame_max
        self._reserved = reserved_types

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buffer)

    def feed(self, data: BodyLike) -> Generator[Frame, None, None]:
        """Add *data* and yield every frame it completes, in order.

        This is a generator: *data* is taken and parsed as the result is
        iterated, so iterate it (a result never iterated drops *data*).
        Iteration raises :class:`FrameError` (501) at the first malformed
        frame, after yielding the frames before it. The bytes of frames not
        yet returned (an incomplete frame, or frames after the caller
        stopped iterating) stay buffered for the next feed.
        """
        # Frames are sliced from *data* itself in the common case, where no
        # partial frame is buffered: one copy per payload. Otherwise *data*
        # joins the buffer and payloads are copied out through a view.
        buffer = self._buffer
        whole: Optional[bytes] = None
        view: Optional[memoryview] = None
        source: Union[bytes, bytearray]
        if buffer or type(data) is not bytes:
            buffer += data
            source = buffer
            view = memoryview(buffer)
        else:
            source = whole = data
        size = len(source)
        pos = 0
        # Module constants as locals: looked up once per feed, not per frame.
        unpack_header, overhead, frame_end = _HEADER.unpack_from, FRAME_OVERHEAD, FRAME_END
        content_types = _CONTENT_TYPES
        try:
            while size - pos >= 7:
                frame_type, channel, length = unpack_header(source, pos)
                if length + overhead > self.frame_max:
                    raise FrameError(
                        f"frame of {length + FRAME_OVERHEAD} bytes exceeds "
                        f"frame_max {self.frame_max}"
                    )
                if frame_type not in content_types:
                    self._check_type(frame_type, channel, length)
                start = pos + 7
                end = start + length
                if end >= size:
                    break
                if source[end] != frame_end:
                    raise FrameError(
                        f"frame-end octet is {source[end]:#04x}, not 0xce: the "
                        "frame's size field does not match its contents"
                    )
                if whole is not None:
                    payload = whole[start:end]
                else:
                    assert view is not None
                    payload = view[start:end].tobytes()
                pos = end + 1
                yield frame_type, channel, payload
        finally:
            if view is not None:
                view.release()
                del buffer[:pos]
            elif pos < size:
                buffer += source[pos:]

    def _check_type(self, frame_type: int, channel: int, length: int) -> None:
        """Refuse a frame that is not method, header or body by its header alone."""
        if frame_type == FRAME_HEARTBEAT:
            if channel or length:
                raise FrameError(
                    "heartbeat frames must be on channel 0 with no payload"
                )
            return
        if frame_type in self._reserved:
            raise AMQPNotImplemented(
                f"{_TYPE_NAMES.get(frame_type, 'type %d' % frame_type)} frames "
                "are not supported"
            )
        raise FrameError(f"unknown frame type {frame_type}")


_METHOD_HEADER = struct.Struct(">BHI")


def method_frame(channel: int, method: Method) -> bytes:
    """One method frame."""
    payload = method.encode()
    return _METHOD_HEADER.pack(FRAME_METHOD, channel, len(payload)) + payload + _END


_HEADER_FRAME = struct.Struct(">BHIHHQ")


def content_frames(
    channel: int,
    method: Method,
    properties: Union[Properties, bytes],
    body: BodyLike,
    frame_max: int,
) -> bytes:
    """A method frame, its content header frame and body frames, joined.

    :param properties: the properties, or their already encoded form (flags
        and property list) when forwarding a received header unchanged.
    :param frame_max: the negotiated frame_max; 0 means no limit.
    """
    payload = method.encode()
    encoded = properties if isinstance(properties, bytes) else properties.encode()
    body_size = len(body)
    parts: list[BodyLike] = [
        _METHOD_HEADER.pack(FRAME_METHOD, channel, len(payload)),
        payload,
        _END,
        _HEADER_FRAME.pack(
            FRAME_HEADER, channel, 12 + len(encoded), method.CLASS_ID, 0, body_size
        ),
        encoded,
        _END,
    ]
    chunk = frame_max - FRAME_OVERHEAD if frame_max else body_size
    for start in range(0, body_size, chunk or 1):
        piece = body[start : start + chunk]
        parts.append(_HEADER.pack(FRAME_BODY, channel, len(piece)))
        parts.append(piece)
        parts.append(_END)
    return b"".join(parts)


_unpack_content_header = CONTENT_HEADER.unpack_from


class Command:
    """A method, with its content when the method carries one.

    The content header's properties are decoded the first time
    :attr:`properties` is read; :attr:`raw_properties` holds them as received
    (flags and property list) so that a broker can forward them unchanged.
    """

    __slots__ = ("method", "raw_properties", "body", "_properties", "_cls")

    def __init__(
        self,
        method: Method,
        raw_properties: bytes = b"",
        body: bytes = b"",
        properties_class: Optional[type[Properties]] = None,
    ) -> None:
        self.method = method
        self.raw_properties = raw_properties
        self.body = body
        self._properties: Optional[Properties] = None
        self._cls = properties_class

    @property
    def properties(self) -> Optional[Properties]:
        """The decoded content properties (None for a method without content).

        :raises AMQPSyntaxError: the properties are malformed (502).
        """
        properties = self._properties
        if properties is None:
            cls = self._cls
            if cls is None:
                return None
            try:
                properties = self._properties = cls.decode(self.raw_properties, 0)
            except Exception as exc:
                raise properties_error(cls, exc) from None
        return properties

    def __repr__(self) -> str:
        if self._cls is None:
            return f"Command({self.method!r})"
        return f"Command({self.method!r}, {len(self.body)} body bytes)"


class ContentAssembler:
    """Joins a content method, its header frame and its body frames (one channel).

    :param properties: the version's ``PROPERTIES`` table (class id -> class).
    :param max_body_size: the largest body accepted; a larger announced size
        fails with 406 precondition-failed before any body is buffered.
    """

    __slots__ = ("_properties", "max_body_size", "_command", "_size", "_parts", "_received")

    def __init__(self, properties: Mapping[int, type[Properties]], max_body_size: int) -> None:
        self._properties = properties
        self.max_body_size = max_body_size
        #: The command whose content is being received.
        self._command: Optional[Command] = None
        #: The announced body size, or -1 before the content header.
        self._size = -1
        #: Body frames so far, when the body spans several.
        self._parts: list[bytes] = []
        self._received = 0

    @property
    def busy(self) -> bool:
        """A content method is waiting for its header or body."""
        return self._command is not None

    def reset(self) -> None:
        """Drop any partly received content."""
        self._command = None
        self._size = -1
        if self._parts:
            self._parts = []
        self._received = 0

    def partial(self) -> Optional[Command]:
        """The content method under way with the body received so far (for a
        connection that broke mid-content), or None when no content header
        has arrived."""
        command = self._command
        if command is None or self._size < 0:
            return None
        return Command(command.method, command.raw_properties, b"".join(self._parts), command._cls)

    def method(self, method: Method) -> Optional[Command]:
        """Take a method frame's method; a complete command if it has no content."""
        if self._command is not None:
            waiting = self._command.method
            expected = (
                f"expected content header for class {waiting.CLASS_ID}, got non content header "
                "frame instead" if self._size < 0 else
                "expected content body, got non content body frame instead"
            )
            self.reset()
            raise UnexpectedFrame(
                expected, hint=f"{method.NAME} arrived while {waiting.NAME} still waited for its content"
            )
        command = Command(method)
        if method.CONTENT:
            self._command = command
            return None
        return command

    def header(self, payload: bytes) -> Optional[Command]:
        """Take a content header payload; the command if its body is empty."""
        command = self._command
        if command is None:
            raise UnexpectedFrame(
                "expected method frame, got non method frame instead",
                hint="a content header frame came without a content method before it",
            )
        if self._size >= 0:
            raise UnexpectedFrame(
                "expected content body, got non content body frame instead",
                hint=f"a second content header frame came for one {command.method.NAME}",
            )
        if len(payload) < 14:  # class id, weight, body size, one flag word
            raise FrameError(f"content header of {len(payload)} bytes is too short")
        class_id, _weight, size = _unpack_content_header(payload)
        method = command.method
        if class_id != method.CLASS_ID:
            raise UnexpectedFrame(
                f"content header for class {class_id} follows {method.NAME}"
            )
        if size > self.max_body_size:
            self.reset()
            raise PreconditionFailed(
                f"{method.NAME}: message body of {size} bytes exceeds the maximum of "
                f"{self.max_body_size} bytes",
                method.CLASS_ID,
                method.METHOD_ID,
            )
        try:
            cls = self._properties[class_id]
        except KeyError:
            raise AMQPSyntaxError(f"class {class_id} has no content properties") from None
        command.raw_properties = payload[12:]
        command._cls = cls
        if size == 0:
            self._command = None
            return command
        self._size = size
        return None

    def body(self, payload: bytes) -> Optional[Command]:
        """Take a body frame payload; the command once the body is complete."""
        size = self._size
        received = self._received + len(payload)
        if received != size:
            if size < 0:
                if self._command is None:
                    raise UnexpectedFrame(
                        "expected method frame, got non method frame instead",
                        hint="a body frame came without a content method before it",
                    )
                raise UnexpectedFrame(
                    f"expected content header for class {self._command.method.CLASS_ID}, "
                    "got non content header frame instead",
                    hint="a body frame came before the content header",
                )
            if received > size:
                raise FrameError(
                    f"body frames carry {received} bytes but the content "
                    f"header announced {size}"
                )
            self._received = received
            self._parts.append(payload)
            return None
        # The body is complete (the common case: in one frame). A command is
        # pending whenever _size is set, so no None check is needed.
        command: Command = self._command  # type: ignore[assignment]
        parts = self._parts
        if parts:
            parts.append(payload)
            payload = b"".join(parts)
            self._parts = []
            self._received = 0
        command.body = payload
        self._command = None
        self._size = -1
        return command
