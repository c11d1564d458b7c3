"""AMQP frames: the frame scanner, frame builders and the content assembler.

A frame is a 7-byte header (type octet, channel short, payload size long), the
payload, and the frame-end octet 0xCE. :class:`FrameScanner` is the one frame
loop of broker and client: it parses frames out of one :class:`bytearray` with
an offset, hands the hot path's frames in place to per-channel takers and
every other frame, copied once, to a general handler; large body frames go
to per-channel piece takers as the pieces that arrived, without passing
through that buffer. :class:`FrameReader` wraps it as an iterator for tools
and tests.

The builders (:func:`method_frame`, :func:`content_frames`,
:func:`encoded_content_frames`, :func:`tag_frame`) are the only code that
writes frames, for broker and client alike; the hot paths use the last two,
which work from already encoded pieces with precompiled structs.

:class:`ContentAssembler` joins a content-carrying method with its content
header and body frames into a :class:`Command`. Both it and the broker's
hot path follow :class:`ContentState`, and answer a frame that does not fit
it with :func:`unexpected_frame`.
"""

from __future__ import annotations

import enum
import struct
from typing import TYPE_CHECKING, Callable, Generic, Iterator, Mapping, Optional, Protocol, Sequence, TypeVar, Union

from txamqp09.wire.base import CONTENT_HEADER, Method, Properties, properties_error
from txamqp09.wire.errors import (
    AMQPError,
    AMQPNotImplemented,
    AMQPSyntaxError,
    ChannelLevelError,
    FrameError,
    PreconditionFailed,
    UnexpectedFrame,
)

if TYPE_CHECKING:
    from txamqp09.wire.methods import AnyMethod

__all__ = [
    "FRAME_METHOD",
    "FRAME_HEADER",
    "FRAME_BODY",
    "FRAME_HEARTBEAT",
    "FRAME_END",
    "FRAME_MIN_SIZE",
    "FRAME_OVERHEAD",
    "HEARTBEAT_FRAME",
    "NO_PROPERTIES",
    "BASIC_CLASS",
    "BASIC_ACK",
    "BASIC_REJECT",
    "BASIC_NACK",
    "Frame",
    "FrameHandler",
    "FrameTaker",
    "RunTaker",
    "PieceTaker",
    "PIECES_FROM",
    "FrameScanner",
    "FrameReader",
    "method_frame",
    "content_frames",
    "encoded_content_frames",
    "encoded_contents_frames",
    "encoded_content_parts",
    "tag_frame",
    "Command",
    "ContentState",
    "unexpected_frame",
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

_TYPE_NAMES = {
    4: "out-of-band method",
    5: "out-of-band header",
    6: "out-of-band body",
    7: "trace",
}

#: (frame type, channel, payload)
Frame = tuple[int, int, bytes]
BodyLike = Union[bytes, bytearray, memoryview]


#: What the scanner calls with each frame no taker took: (type, channel, payload).
FrameHandler = Callable[[int, int, bytes], None]
#: A channel's hot-path receiver: (frame type, buffer, payload start, payload
#: end) -> whether it took the frame (else the frame goes to the general
#: handler). It reads the payload in place, without a copy.
FrameTaker = Callable[[int, bytearray, int, int], bool]
#: A connection's receiver of runs of frames: (buffer, frame_max) -> (how
#: many bytes of frames at the start of the buffer it took, whether the
#: frames after them wait for more bytes). See :attr:`FrameScanner.run_taker`.
RunTaker = Callable[[bytearray, int], tuple[int, bool]]
#: What the scanner calls when handling a frame raised a channel-level error.
ChannelErrorHandler = Callable[[int, ChannelLevelError], None]

#: Body frames of at least this many payload bytes go to a channel's
#: :class:`PieceTaker` as they arrive (smaller ones are scanned whole).
PIECES_FROM = 16 * 1024


class PieceTaker(Protocol):
    """A channel's receiver of large body frames in the pieces that arrived.

    The scanner offers a body frame of at least :data:`PIECES_FROM` payload
    bytes to the channel's piece taker as soon as its header is in; if
    taken, the payload goes to :meth:`takePiece` piece by piece, as received
    (without being gathered in the scanner's buffer), and :meth:`endPieces`
    follows once the frame-end octet is checked.
    """

    def startPieces(self, size: int) -> bool:
        """A body frame of *size* payload bytes begins: whether to take it in
        pieces (False: it is buffered and handed to the frame taker whole,
        which answers a frame that does not fit with the right error)."""

    def takePiece(self, piece: BodyLike) -> None:
        """The next piece of the frame's payload. The piece is the taker's
        to keep: the scanner never changes it afterwards."""

    def endPieces(self) -> None:
        """The frame is complete (its frame-end octet checked)."""


#: Frames that may come between two large body frames for the frame
#: scanner to keep passing body frames on without its buffer: the next
#: message's method and content header frames.
_FRAMES_BEFORE_A_BODY = 2


def _frame_end_error(octet: int) -> FrameError:
    """The error for a frame whose frame-end position holds *octet*."""
    return FrameError(
        f"frame-end octet is {octet:#04x}, not 0xce: the frame's size field does not match its contents"
    )


def _piece(data: BodyLike, start: int, end: int) -> BodyLike:
    """``data[start:end]`` to keep: a view of received :class:`bytes` that it
    covers at least a quarter of (so that it pins no more than four times its
    size), else a copy (a bytearray changes, a small view would pin a large
    block)."""
    if type(data) is bytes and (end - start) * 4 >= len(data):
        return memoryview(data)[start:end]
    return bytes(memoryview(data)[start:end])


class FrameScanner:
    """Parses frames out of one :class:`bytearray` with an offset.

    Each :meth:`scan` appends the received bytes to the buffer, walks the
    complete frames in it with :func:`struct.unpack_from`, and removes them
    once at the end. A frame on a channel with a *taker* (see
    :attr:`takers`) is offered to it first, in place; every other frame is
    copied out once and passed to the general *handler*. This is the frame
    loop of both the broker and the client: the broker's takers read
    basic.publish, its content and basic.ack; the client's read basic.deliver
    and its content.

    The frame size is checked against :attr:`frame_max` as soon as a
    header is in, and the frame type (with the heartbeat's channel and size)
    before any of the payload is buffered or a frame no taker took is handled
    (takers take method, header and body frames only).

    :param handler: called with every frame no taker took.
    :param frame_max: the largest frame accepted, header and frame-end
        included; may be changed after tuning.
    :param reserved_types: frame types the version defines but that are not
        supported here (0-9's out-of-band and trace frames): they are refused
        with 540 not-implemented instead of 501 frame-error.
    :param channel_error: if given, a channel-level error raised while a
        frame is handled is passed to it (with the channel number) and
        scanning goes on; otherwise the error ends the scan.

    A body frame of :data:`PIECES_FROM` payload bytes or more on a channel
    with a *piece taker* (see :attr:`piece_takers`) that is not all in the
    buffer goes to that taker piece by piece: what the frame still lacks is
    handed over from each received block as it arrives, a view of the block
    where it is :class:`bytes` (see :class:`PieceTaker`), and so are the body
    frames that follow it in the same block. The frames of a large body are
    thus never copied into the buffer and out again.

    A connection that receives one kind of frames in bulk (a consumer's
    deliveries with their content) may set a *run taker*
    (:attr:`run_taker`): each scan offers it the buffer first, and it takes
    as many whole frames from the start as it recognises (in one call,
    without a call per frame), or asks that the frames wait for more bytes
    (the start of a message it will take whole); the frames after what it
    took are scanned as usual.
    """

    __slots__ = (
        "_buffer", "frame_max", "reserved_types", "_handler", "takers", "piece_takers",
        "channel_error", "halted", "_stopped", "_piece_taker", "_piece_channel", "_piece_due",
        "run_taker",
    )

    def __init__(
        self,
        handler: FrameHandler,
        frame_max: int = FRAME_MIN_SIZE,
        reserved_types: frozenset[int] = frozenset(),
        channel_error: Optional[ChannelErrorHandler] = None,
    ) -> None:
        self._buffer = bytearray()
        self.frame_max = frame_max
        self.reserved_types = reserved_types
        self._handler = handler
        #: The hot-path receivers, by channel number.
        self.takers: dict[int, FrameTaker] = {}
        #: The receivers of large body frames in pieces, by channel number.
        self.piece_takers: dict[int, PieceTaker] = {}
        #: The receiver offered the buffer before each scan of its frames.
        self.run_taker: Optional[RunTaker] = None
        #: The piece taker of the body frame under way, its channel, and the
        #: payload bytes it still lacks (its frame-end octet follows them).
        self._piece_taker: Optional[PieceTaker] = None
        self._piece_channel = 0
        self._piece_due = 0
        #: Where channel-level errors go (None: they end the scan).
        self.channel_error = channel_error
        #: Frames are not handled now (paused or stopped): checked after each frame.
        self.halted = False
        self._stopped = False

    @property
    def buffered(self) -> int:
        """Bytes received but not yet handled as frames."""
        return len(self._buffer)

    def stop(self) -> None:
        """Handle no more frames, from the one after the current one on, ever."""
        self.halted = self._stopped = True
        self._buffer.clear()
        self._piece_taker = None

    def pause(self) -> None:
        """Handle no more frames until :meth:`resume`, from the one after
        the current one on; what arrives meanwhile is buffered."""
        self.halted = True

    def resume(self) -> None:
        """Handle frames again (unless stopped), starting with the next
        :meth:`scan`: ``scan(b"")`` handles what was buffered."""
        self.halted = self._stopped

    def scan(self, data: BodyLike) -> None:
        """Add *data* and handle every frame it completes, in order.

        :raises FrameError: (501) at the first malformed frame, after the
            frames before it were handled; the connection is then unusable.
        """
        buf = self._buffer
        if self.halted:
            if not self._stopped:
                buf += data
            return
        if self._piece_taker is not None or (
            not buf and type(data) is bytes and len(data) >= PIECES_FROM and self.piece_takers
        ):
            if buf:  # received while paused in the middle of a frame
                data = bytes(buf) + data
                buf.clear()
            used = self._scanDirect(data)
            if used == len(data):
                return
            data = memoryview(data)[used:]
            if self.halted:
                if not self._stopped:
                    buf += data
                return
        buf += data
        self._scanBuffer()

    def _scanBuffer(self) -> None:
        """Handle the complete frames in the buffer, and remove them."""
        buf = self._buffer
        size = len(buf)
        pos = 0
        # Attributes and module constants as locals: looked up once per scan.
        unpack_header, limit = _HEADER.unpack_from, self.frame_max
        takers, handler = self.takers, self._handler
        try:
            if self.run_taker is not None:
                pos, wait = self.run_taker(buf, limit)
                if wait or self.halted:
                    return
            while size - pos >= 7:
                frame_type, channel, length = unpack_header(buf, pos)
                if length + FRAME_OVERHEAD > limit:
                    raise FrameError(
                        f"frame of {length + FRAME_OVERHEAD} bytes exceeds frame_max {limit}"
                    )
                start = pos + 7
                end = start + length
                if end >= size:
                    if frame_type > FRAME_BODY or not frame_type:
                        self._check_type(frame_type, channel, length)
                    elif frame_type == FRAME_BODY and length >= PIECES_FROM and self._startPieces(channel, length):
                        # The rest of the buffer is the payload's first piece.
                        pos = size
                        self._piece_due = end - size
                        self._takePiece(buf, start, size)
                    break
                if buf[end] != FRAME_END:
                    raise _frame_end_error(buf[end])
                pos = end + 1
                try:
                    taker = takers.get(channel)
                    if taker is None or not taker(frame_type, buf, start, end):
                        # Takers take only method, header and body frames.
                        if frame_type > FRAME_BODY or not frame_type:
                            self._check_type(frame_type, channel, length)
                        handler(frame_type, channel, bytes(buf[start:end]))
                except ChannelLevelError as error:
                    if self.channel_error is None:
                        raise
                    self.channel_error(channel, error)
                if self.halted:
                    return
        finally:
            del buf[:pos]

    def _scanDirect(self, data: BodyLike) -> int:
        """Handle *data* without the buffer (which is empty) as long as it
        holds large body frames with a few small frames between them: the
        body frames go to their piece takers in pieces of *data*, each small
        frame through the buffer alone. How many bytes of *data* that used
        (the rest goes through the buffer)."""
        size = len(data)
        pos = 0
        unpack_header = _HEADER.unpack_from
        while True:
            if self._piece_taker is not None:
                pos = self._passPieces(data, pos)
                if self._piece_taker is not None or self.halted:
                    return pos
            # The next large body frame, behind a message's method and header frames.
            at = pos
            for _ in range(_FRAMES_BEFORE_A_BODY + 1):
                if size - at < 7:
                    return pos
                frame_type, channel, length = unpack_header(data, at)
                if frame_type == FRAME_BODY and length >= PIECES_FROM:
                    break
                at += length + FRAME_OVERHEAD
            else:
                return pos
            if at > pos:
                self._buffer += memoryview(data)[pos:at]
                self._scanBuffer()
                if self.halted or self._buffer:
                    return at
            if not self._startPieces(channel, length):
                return at
            pos = at + 7
            self._piece_due = length

    def _startPieces(self, channel: int, size: int) -> bool:
        """Whether *channel*'s piece taker takes the body frame of *size* payload bytes."""
        taker = self.piece_takers.get(channel)
        if taker is None or size + FRAME_OVERHEAD > self.frame_max or not taker.startPieces(size):
            return False
        self._piece_taker = taker
        self._piece_channel = channel
        return True

    def _takePiece(self, data: BodyLike, start: int, end: int) -> None:
        """Hand ``data[start:end]`` to the piece taker under way."""
        if end > start:
            taker = self._piece_taker
            assert taker is not None
            taker.takePiece(_piece(data, start, end))

    def _passPieces(self, data: BodyLike, pos: int) -> int:
        """Pass ``data[pos:]`` to the body frame under way, up to its end;
        the offset after its frame-end octet (the end of *data* while the
        frame is still under way)."""
        size = len(data)
        channel, due = self._piece_channel, self._piece_due
        if size - pos <= due:
            self._takePiece(data, pos, size)
            self._piece_due = due - (size - pos)
            return size
        self._takePiece(data, pos, pos + due)
        pos += due
        if data[pos] != FRAME_END:
            raise _frame_end_error(data[pos])
        taker = self._piece_taker
        assert taker is not None
        self._piece_taker = None
        self._piece_due = 0
        try:
            taker.endPieces()
        except ChannelLevelError as error:
            if self.channel_error is None:
                raise
            self.channel_error(channel, error)
        return pos + 1

    def _check_type(self, frame_type: int, channel: int, length: int) -> None:
        """Refuse a frame that is not method, header or body by its header alone."""
        if frame_type == FRAME_HEARTBEAT:
            if channel or length:
                raise FrameError("heartbeat frames must be on channel 0 with no payload")
            return
        if frame_type in self.reserved_types:
            raise AMQPNotImplemented(
                f"{_TYPE_NAMES.get(frame_type, 'type %d' % frame_type)} frames "
                "are not supported"
            )
        raise FrameError(f"unknown frame type {frame_type}")


class FrameReader:
    """A :class:`FrameScanner` as an iterator of frames, for tools and tests.

    :param frame_max: as for :class:`FrameScanner`.
    :param reserved_types: as for :class:`FrameScanner`.
    """

    __slots__ = ("_scanner", "_frames")

    def __init__(
        self, frame_max: int = FRAME_MIN_SIZE, reserved_types: frozenset[int] = frozenset()
    ) -> None:
        self._frames: list[Frame] = []
        self._scanner = FrameScanner(
            lambda *frame: self._frames.append(frame), frame_max, reserved_types
        )

    @property
    def frame_max(self) -> int:
        """The largest frame accepted."""
        return self._scanner.frame_max

    @frame_max.setter
    def frame_max(self, frame_max: int) -> None:
        self._scanner.frame_max = frame_max

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return self._scanner.buffered

    def feed(self, data: BodyLike) -> Iterator[Frame]:
        """Add *data* and return every frame it completes, in order.

        A malformed frame raises :class:`FrameError` (501) from the iteration,
        after the frames before it were returned.
        """
        self._frames = []
        try:
            self._scanner.scan(data)
        except AMQPError as error:
            return _then_raise(self._frames, error)
        return iter(self._frames)


def _then_raise(frames: list[Frame], error: AMQPError) -> Iterator[Frame]:
    """*frames*, then *error*."""
    yield from frames
    raise error


#: frame-end of the method frame, then the content header frame up to its properties.
_CONTENT_HEADER_FRAME = struct.Struct(">BBHIHHQ")
#: frame-end of the previous frame, then a body frame's header.
_BODY_FRAME = struct.Struct(">BBHI")
#: A whole basic method frame of a delivery tag and one octet of bits.
_TAG_FRAME = struct.Struct(">BHIHHQBB")

#: The encoded form of an empty basic properties list: no flag set.
NO_PROPERTIES = b"\x00\x00"
#: The basic class's id and its methods built by :func:`tag_frame`.
BASIC_CLASS = 60
BASIC_ACK = 80
BASIC_REJECT = 90
BASIC_NACK = 120


def method_frame(channel: int, method: Method) -> bytes:
    """One method frame."""
    payload = method.encode()
    return _HEADER.pack(FRAME_METHOD, channel, len(payload)) + payload + _END


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
    encoded = properties if isinstance(properties, bytes) else properties.encode()
    return encoded_content_frames(
        channel, method.CLASS_ID, method.encode(), b"", b"", encoded, body,
        frame_max - FRAME_OVERHEAD if frame_max else len(body) or 1,
    )


def encoded_content_frames(
    channel: int,
    class_id: int,
    head: bytes,
    middle: bytes,
    tail: bytes,
    properties: bytes,
    body: BodyLike,
    body_max: int,
    several: Optional[Callable[[list[BodyLike]], bytes]] = None,
) -> bytes:
    """A content method's frames, from its encoded parts: the hot paths' builder.

    The method frame's payload is ``head + middle + tail``, taken in three
    pieces so that callers need not join them first (typically: the ids and
    the fields fixed per consumer, the fields of this message, the envelope).

    :param class_id: the class of the content header.
    :param properties: the encoded properties (flags and property list).
    :param body_max: the largest body frame payload (frame_max less 8).
    :param several: if given, a body of several frames is not joined: the
        frames' parts (see :func:`encoded_content_parts`) go to it, and what
        it returns is returned (the small bodies' path pays nothing for it).
    """
    size = len(body)
    method_frame = _HEADER.pack(FRAME_METHOD, channel, len(head) + len(middle) + len(tail))
    header = _CONTENT_HEADER_FRAME.pack(
        FRAME_END, FRAME_HEADER, channel, 12 + len(properties), class_id, 0, size
    )
    if size <= body_max:
        if not size:
            return b"".join((method_frame, head, middle, tail, header, properties, _END))
        return b"".join(
            (method_frame, head, middle, tail, header, properties,
             _BODY_FRAME.pack(FRAME_END, FRAME_BODY, channel, size), body, _END)
        )
    parts = encoded_content_parts(channel, class_id, head, middle, tail, properties, body, body_max)
    return b"".join(parts) if several is None else several(parts)


def encoded_contents_frames(
    channel: int, class_id: int, method: bytes, properties: Sequence[bytes], bodies: Sequence[bytes],
    body_max: int,
) -> bytes:
    """The frames of one content method per body, joined: the method's
    encoded payload *method* (the same for each), then a content header
    with the body's encoded *properties* and the body frames.

    What :func:`encoded_content_frames` gives for each (method, properties,
    body), built without a call per body for bodies of one frame.
    """
    method_frame = _HEADER.pack(FRAME_METHOD, channel, len(method)) + method
    header, body_frame = _CONTENT_HEADER_FRAME.pack, _BODY_FRAME.pack
    parts: list[bytes] = []
    add = parts.extend
    for encoded, body in zip(properties, bodies, strict=True):
        size = len(body)
        if not size or size > body_max:
            add((encoded_content_frames(channel, class_id, method, b"", b"", encoded, body, body_max),))
            continue
        add((
            method_frame, header(FRAME_END, FRAME_HEADER, channel, 12 + len(encoded), class_id, 0, size), encoded,
            body_frame(FRAME_END, FRAME_BODY, channel, size), body, _END,
        ))
    return b"".join(parts)


def encoded_content_parts(
    channel: int, class_id: int, head: bytes, middle: bytes, tail: bytes, properties: bytes, body: BodyLike,
    body_max: int,
) -> list[BodyLike]:
    """The frames of :func:`encoded_content_frames`, not joined: the body's
    frames as views of *body* between the frame headers (for a large body,
    to be written without a copy of it)."""
    method_frame = _HEADER.pack(FRAME_METHOD, channel, len(head) + len(middle) + len(tail))
    size = len(body)
    header = _CONTENT_HEADER_FRAME.pack(
        FRAME_END, FRAME_HEADER, channel, 12 + len(properties), class_id, 0, size
    )
    parts: list[BodyLike] = [method_frame, head, middle, tail, header, properties]
    view = memoryview(body)
    for start in range(0, size, body_max):
        piece = view[start : start + body_max]
        parts += (_BODY_FRAME.pack(FRAME_END, FRAME_BODY, channel, len(piece)), piece)
    parts.append(_END)
    return parts


def tag_frame(channel: int, method_id: int, delivery_tag: int, bits: int) -> bytes:
    """A whole basic.ack, basic.reject or basic.nack frame (*method_id*
    :data:`BASIC_ACK`, :data:`BASIC_REJECT` or :data:`BASIC_NACK`): the
    delivery tag and the method's bits (multiple 1, requeue 2 for nack;
    requeue 1 for reject). The three have this layout in every version."""
    return _TAG_FRAME.pack(FRAME_METHOD, channel, 13, BASIC_CLASS, method_id, delivery_tag, bits, FRAME_END)


_unpack_content_header = CONTENT_HEADER.unpack_from


class ContentState(enum.Enum):
    """What a channel expects next of the content it receives.

    ::

        METHOD --content method--> HEADER --header, body size > 0--> BODY
        HEADER --header, empty body--> METHOD
        BODY --the frame that completes the body--> METHOD

    Any other frame on the channel (a method frame while content is due, a
    header or body frame when none is) is 505 unexpected-frame, from
    :func:`unexpected_frame`.
    """

    #: No content is due: any method frame.
    METHOD = "method"
    #: A content method arrived: its content header frame is due.
    HEADER = "header"
    #: The header announced a body: body frames are due until it is complete.
    BODY = "body"


_EXPECTED = {
    ContentState.METHOD: "expected method frame, got non method frame instead",
    ContentState.HEADER: "expected content header for class {}, got non content header frame instead",
    ContentState.BODY: "expected content body, got non content body frame instead",
}


def unexpected_frame(state: ContentState, class_id: int, hint: str) -> UnexpectedFrame:
    """The 505 error for a frame that does not fit *state* (RabbitMQ's
    texts), for content of *class_id*; *hint* says what came instead."""
    return UnexpectedFrame(_EXPECTED[state].format(class_id), hint=hint)


#: The method type of a :class:`Command` (``Command[methods.BasicDeliver]``).
_M = TypeVar("_M", bound="AnyMethod")


class Command(Generic[_M]):
    """A method, with its content when the method carries one.

    Generic in its method's type for handlers to name what they take
    (``Command[methods.StreamPublish]``); a plain ``Command`` holds any method.

    The content header's properties are decoded the first time
    :attr:`properties` is read; :attr:`raw_properties` holds them as received
    (flags and property list) so that a broker can forward them unchanged.
    """

    __slots__ = ("method", "raw_properties", "body", "_properties", "_cls")

    def __init__(
        self,
        method: _M,
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

    @property
    def state(self) -> ContentState:
        """What the channel expects next."""
        if self._command is None:
            return ContentState.METHOD
        return ContentState.HEADER if self._size < 0 else ContentState.BODY

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
            error = unexpected_frame(
                self.state, waiting.CLASS_ID,
                f"{method.NAME} arrived while {waiting.NAME} still waited for its content",
            )
            self.reset()
            raise error
        command = Command(method)
        if method.CONTENT:
            self._command = command
            return None
        return command

    def header(self, payload: bytes) -> Optional[Command]:
        """Take a content header payload; the command if its body is empty."""
        command = self._command
        if command is None or self._size >= 0:
            raise unexpected_frame(
                self.state, 0,
                f"a second content header frame came for one {command.method.NAME}" if command
                else "a content header frame came without a content method before it",
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
                waiting = self._command
                raise unexpected_frame(
                    self.state, waiting.method.CLASS_ID if waiting else 0,
                    "a body frame came before the content header" if waiting
                    else "a body frame came without a content method before it",
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
