"""A stream queue's deliveries read off the connection straight into Arrow
columns, without a client :class:`~txamqp09.client.Message` per delivery.

:class:`StreamDeliveryTaker` is the frame taker (see
:class:`~txamqp09.wire.frames.FrameScanner`) of the channel that consumes a
stream for the data source. It takes the consumer's basic.deliver frames
with their content frames in place, and for each delivery in the range it
reads keeps no more than its stream offset and body size, appends the body
to one buffer, and notes which envelope and properties it came with.

Deliveries of one stream mostly differ from the one before only in their
delivery tag, their ``x-stream-offset`` header's value and their body. So
the taker compares each method frame with the last envelope (consumer tag,
then the same redelivered flag, exchange and routing key after the delivery
tag) and each content header with the last properties *layout*: the same
encoded properties except the eight bytes of the offset's value. Only a
delivery that differs is decoded in full (with the version's generated
decoders); the layouts of decoded properties are kept (at most
:data:`LAYOUTS_KEPT`). Comparing bytes outside the value is exact: a long-long
value cannot change how the rest of the properties parse.

:class:`DeliveryColumns` holds the deliveries taken since the last batch and
builds the record batch (in :data:`~txamqp09.spark.arrow.ARROW_SCHEMA`, with
the values :func:`~txamqp09.spark.arrow.message_batch` gives) column by
column with Arrow and numpy: bodies from the one buffer, the other columns
from the few distinct envelopes and layouts, indexed per row.

Needs pyarrow and numpy (the ``spark`` extra).
"""

from __future__ import annotations

import struct
from datetime import datetime
from itertools import accumulate
from typing import Any, Callable, Iterator, NamedTuple, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txamqp09.spark.arrow import ARROW_SCHEMA, TEXT_MAP, header_entries, property_entries
from txamqp09.spark.rows import STREAM_OFFSET_HEADER
from txamqp09.wire.base import CONTENT_HEADER, Properties, decode_method, properties_error
from txamqp09.wire.errors import AMQPSyntaxError, FrameError, PreconditionFailed, UnexpectedFrame
from txamqp09.wire.fields import encode_shortstr
from txamqp09.wire.frames import BASIC_CLASS, FRAME_BODY, FRAME_HEADER, FRAME_METHOD, FrameTaker

__all__ = ["DeliveryColumns", "StreamDeliveryTaker", "NotAStream", "LAYOUTS_KEPT"]

#: Class and method ids of basic.deliver at the start of its frame payload.
_DELIVER_IDS = bytes((0, BASIC_CLASS, 0, 60))
_TAG = struct.Struct(">Q")
#: The offset header's name and type (long-long) in an encoded header table.
_OFFSET_ENTRY = encode_shortstr(STREAM_OFFSET_HEADER) + b"l"
_OFFSET_VALUE = struct.Struct(">q")
#: Bytes of a content header payload before its properties.
_PROPERTIES_AT = CONTENT_HEADER.size
#: Distinct property layouts kept for comparison (then forgotten at once).
LAYOUTS_KEPT = 1024
#: The most body bytes of one record batch (Arrow binary offsets are 32-bit).
_BATCH_BYTES = 2**31 - 1

_METHOD, _HEADER, _BODY = range(3)


class NotAStream(ValueError):
    """A delivery without an ``x-stream-offset`` header: the queue is no stream."""


class Envelope(NamedTuple):
    """What a basic.deliver says besides its consumer and delivery tags."""

    exchange: str
    routing_key: str
    redelivered: bool
    #: Its frame payload's size, and the bytes after the delivery tag.
    size: int
    tail: bytes


class Layout:
    """The properties of deliveries encoded alike but for their offset.

    :ivar size: the content header payload's size (-1: the offset's place
        is unknown, the properties are decoded for each delivery).
    :ivar head: the encoded properties up to the offset's value.
    :ivar tail: the encoded properties after it.
    :ivar fields: reads class id, body size and offset from a content header payload.
    :ivar properties: the ``properties`` column's entries.
    :ivar headers: the ``headers`` column's entries, the offset's value None.
    :ivar offset_entry: the offset's place among :attr:`headers`.
    :ivar timestamp: the ``timestamp`` column's value.
    """

    __slots__ = ("size", "head", "tail", "fields", "properties", "headers", "offset_entry", "timestamp")

    def __init__(self, decoded: Properties, raw: bytes, value_at: int) -> None:
        table = getattr(decoded, "headers", None) or {}
        self.properties = property_entries(decoded)
        self.headers = [(name, None if name == STREAM_OFFSET_HEADER else text)
                        for name, text in header_entries(table)]
        self.offset_entry = list(table).index(STREAM_OFFSET_HEADER)
        self.timestamp: Optional[datetime] = getattr(decoded, "timestamp", None)
        if value_at < 0:
            self.size, self.head, self.tail = -1, b"", b""
            self.fields = CONTENT_HEADER
        else:
            self.size = _PROPERTIES_AT + len(raw)
            self.head, self.tail = raw[:value_at], raw[value_at + 8 :]
            self.fields = struct.Struct(f">H2xQ{value_at}xq")


def _value_at(cls: type[Properties], raw: bytes, decoded: Properties, offset: int) -> int:
    """Where the eight bytes of the offset's value are in *raw* (-1: not
    found as a long-long): the place whose change changes only the offset."""
    table = decoded.headers  # type: ignore[attr-defined]
    position = raw.find(_OFFSET_ENTRY)
    while position >= 0:
        at = position + len(_OFFSET_ENTRY)
        if raw[at : at + 8] == _OFFSET_VALUE.pack(offset):
            changed = raw[:at] + _OFFSET_VALUE.pack(offset ^ 1) + raw[at + 8 :]
            try:
                other = cls.decode(changed, 0)
            except Exception:
                other = None
            if (other is not None
                    and other.headers == {**table, STREAM_OFFSET_HEADER: offset ^ 1}  # type: ignore[attr-defined]
                    and property_entries(other) == property_entries(decoded)
                    and other.timestamp == decoded.timestamp):  # type: ignore[attr-defined]
                return at
        position = raw.find(_OFFSET_ENTRY, position + 1)
    return -1


class DeliveryColumns:
    """Deliveries taken since the last batch, in the form the record batch is built from.

    :ivar offsets: each delivery's stream offset.
    :ivar sizes: each delivery's body size.
    :ivar data: the bodies, one after the other (possibly followed by the
        part of the next body received so far).
    :ivar envelopes: (first row, envelope) each time the envelope changed.
    :ivar layouts: (first row, layout) each time the layout changed.
    """

    __slots__ = ("offsets", "sizes", "data", "envelopes", "layouts")

    def __init__(self, data: Optional[bytearray] = None) -> None:
        self.offsets: list[int] = []
        self.sizes: list[int] = []
        self.data = bytearray() if data is None else data
        self.envelopes: list[tuple[int, Envelope]] = []
        self.layouts: list[tuple[int, Layout]] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def record_batches(self) -> Iterator[pa.RecordBatch]:
        """The rows as record batches in :data:`ARROW_SCHEMA` (one, unless
        the bodies exceed what one binary column can hold)."""
        rows = len(self.offsets)
        if not rows:
            return
        ends = np.fromiter(accumulate(self.sizes), np.int64, rows)
        starts = ends - np.asarray(self.sizes, np.int64)
        first = 0
        while first < rows:
            last = int(np.searchsorted(ends, starts[first] + _BATCH_BYTES, "right"))
            last = max(last, first + 1)
            yield self._batch(first, last, int(starts[first]), ends[first:last] - starts[first])
            first = last

    def _batch(self, first: int, last: int, data_start: int, ends: np.ndarray) -> pa.RecordBatch:
        rows = last - first
        body_offsets = np.zeros(rows + 1, np.int32)
        body_offsets[1:] = ends
        data = memoryview(self.data)[data_start : data_start + int(ends[-1]) if rows else data_start]
        bodies = pa.Array.from_buffers(pa.binary(), rows, [None, pa.py_buffer(body_offsets), pa.py_buffer(data)])
        envelopes, envelope_rows = _distinct(self.envelopes, len(self.offsets))
        layouts, layout_rows = _distinct(self.layouts, len(self.offsets))
        envelope_rows, layout_rows = envelope_rows[first:last], layout_rows[first:last]
        offsets = pa.array(np.asarray(self.offsets[first:last], np.int64))
        return pa.RecordBatch.from_arrays(
            [
                bodies,
                pa.array([envelope.routing_key for envelope in envelopes], pa.string()).take(envelope_rows),
                pa.array([envelope.exchange for envelope in envelopes], pa.string()).take(envelope_rows),
                _entries_map([layout.properties for layout in layouts]).take(layout_rows),
                _headers(layouts, layout_rows, offsets),
                offsets,
                pa.array([layout.timestamp for layout in layouts], ARROW_SCHEMA.field("timestamp").type)
                .take(layout_rows),
                pa.array([envelope.redelivered for envelope in envelopes], pa.bool_()).take(envelope_rows),
            ],
            schema=ARROW_SCHEMA,
        )


def _distinct(runs: Sequence[tuple[int, Any]], rows: int) -> tuple[list[Any], np.ndarray]:
    """The distinct values of *runs* ((first row, value) each time the value
    changed) and each of the *rows* rows' index among them."""
    values: list[Any] = []
    index: dict[int, int] = {}
    run_values = []
    for _, value in runs:
        number = index.get(id(value))
        if number is None:
            number = index[id(value)] = len(values)
            values.append(value)
        run_values.append(number)
    starts = [row for row, _ in runs] + [rows]
    return values, np.repeat(np.asarray(run_values, np.int64), np.diff(starts))


def _entries_map(rows: Sequence[Sequence[tuple[str, Optional[str]]]]) -> pa.MapArray:
    """A ``map<string,string>`` array of the entries of each of *rows*."""
    offsets = [0, *accumulate(len(entries) for entries in rows)]
    return pa.MapArray.from_arrays(
        pa.array(offsets, pa.int32()),
        pa.array([name for entries in rows for name, _ in entries], pa.string()),
        pa.array([text for entries in rows for _, text in entries], pa.string()),
        type=TEXT_MAP,
    )


def _headers(layouts: Sequence[Layout], layout_rows: np.ndarray, offsets: pa.Array) -> pa.MapArray:
    """The ``headers`` column: each row's layout's entries, the offset's
    value being the row's offset as text."""
    counts = np.asarray([len(layout.headers) for layout in layouts], np.int64)
    entry_starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    row_counts = counts[layout_rows]
    row_starts = np.concatenate(([0], np.cumsum(row_counts)))
    entries = int(row_starts[-1])
    # Each entry of each row: its place among all layouts' entries.
    template = np.repeat(entry_starts[layout_rows] - row_starts[:-1], row_counts) + np.arange(entries)
    # The offset's entry takes its text from after the layouts' entries.
    template_entries = int(counts.sum())
    values = template.copy()
    rows = len(layout_rows)
    offset_entries = np.asarray([layout.offset_entry for layout in layouts], np.int64)
    values[row_starts[:-1] + offset_entries[layout_rows]] = template_entries + np.arange(rows)
    names = pa.array([name for layout in layouts for name, _ in layout.headers], pa.string())
    texts = pa.concat_arrays([
        pa.array([text for layout in layouts for _, text in layout.headers], pa.string()),
        pc.cast(offsets, pa.string()),
    ])
    return pa.MapArray.from_arrays(
        pa.array(row_starts, pa.int32()), names.take(template), texts.take(values), type=TEXT_MAP
    )


class StreamDeliveryTaker:
    """The frame taker of a channel consuming a stream for the data source.

    It takes the basic.deliver frames of consumer *consumer_tag* and their
    content; any other frame between deliveries goes to *fallback* (the
    channel's ordinary taker), and a frame that does not fit a delivery
    under way is 505 unexpected-frame.

    Deliveries with offsets from *start* up to (not including) *end* become
    rows of :attr:`columns`; *arrived* is called after each delivery with
    its offset and delivery tag. A delivery without an offset calls
    *failed* with :class:`NotAStream` and is dropped.

    :param connection: the channel's connection (its version and body limit).
    :param number: the channel's number.
    """

    def __init__(
        self,
        connection: Any,
        number: int,
        consumer_tag: str,
        fallback: FrameTaker,
        start: int,
        end: int,
        arrived: Callable[[int, int], None],
        failed: Callable[[Exception], None],
    ) -> None:
        self._connection = connection
        self._number = number
        self._prefix = _DELIVER_IDS + encode_shortstr(consumer_tag)
        self._fallback = fallback
        self.start = start
        self.end = end
        self._arrived = arrived
        self._failed = failed
        self.columns = DeliveryColumns()
        #: Where in :attr:`columns`' data the bodies of complete deliveries end.
        self._complete = 0
        self._state = _METHOD
        self._envelope = Envelope("", "", False, -1, b"")
        self._envelope_noted: Optional[Envelope] = None
        self._layout: Optional[Layout] = None
        self._layout_noted: Optional[Layout] = None
        self._layouts: dict[tuple[bytes, bytes], Layout] = {}
        self._tag = 0
        self._offset = 0
        self._size = 0
        self._keep = False
        self._remaining = 0

    def take(self, frame_type: int, buf: bytearray, start: int, end: int) -> bool:
        """The channel's :data:`~txamqp09.wire.frames.FrameTaker`."""
        state = self._state
        if state == _BODY:
            if frame_type != FRAME_BODY:
                raise self._unexpected("content body")
            remaining = self._remaining - (end - start)
            if remaining < 0:
                raise FrameError(
                    f"body frames carry {self._size - remaining} bytes but the content header announced {self._size}"
                )
            if self._keep:
                self.columns.data += buf[start:end]
            self._remaining = remaining
            if not remaining:
                self._delivered()
            return True
        if state == _METHOD:
            if (
                frame_type != FRAME_METHOD
                or not buf.startswith(self._prefix, start)
                or not self._connection.takesDeliveries(self._number)
            ):
                return self._fallback(frame_type, buf, start, end)
            envelope = self._envelope
            if end - start != envelope.size or not buf.endswith(envelope.tail, start, end):
                envelope = self._newEnvelope(bytes(buf[start:end]))
            self._tag = _TAG.unpack_from(buf, start + len(self._prefix))[0]
            self._state = _HEADER
            return True
        if frame_type != FRAME_HEADER:
            raise self._unexpected(f"content header for class {BASIC_CLASS}")
        layout = self._layout
        if (
            layout is not None
            and end - start == layout.size
            and buf.startswith(layout.head, start + _PROPERTIES_AT)
            and buf.endswith(layout.tail, start, end)
        ):
            class_id, size, offset = layout.fields.unpack_from(buf, start)
        else:
            class_id, size, offset, layout = self._header(bytes(buf[start:end]))
        if class_id != BASIC_CLASS:
            raise UnexpectedFrame(f"content header for class {class_id} follows basic.deliver")
        if size > self._connection.max_body_size:
            raise PreconditionFailed(
                f"basic.deliver: message body of {size} bytes exceeds the maximum of "
                f"{self._connection.max_body_size} bytes", BASIC_CLASS, 60,
            )
        self._offset = offset
        self._size = self._remaining = size
        self._keep = layout is not None and self.start <= offset < self.end
        if size:
            self._state = _BODY
        else:
            self._delivered()
        return True

    def _delivered(self) -> None:
        """A delivery is complete: a row if in the range, then *arrived*."""
        self._state = _METHOD
        if self._keep:
            columns = self.columns
            rows = len(columns.offsets)
            if self._layout is not self._layout_noted:
                columns.layouts.append((rows, self._layout))  # type: ignore[arg-type]  # kept: it has one
                self._layout_noted = self._layout
            if self._envelope is not self._envelope_noted:
                columns.envelopes.append((rows, self._envelope))
                self._envelope_noted = self._envelope
            columns.offsets.append(self._offset)
            columns.sizes.append(self._size)
            self._complete = len(columns.data)
        self._arrived(self._offset, self._tag)

    def _unexpected(self, expected: str) -> UnexpectedFrame:
        return UnexpectedFrame(f"expected {expected}, got another frame instead",
                               hint="a frame of another kind arrived inside a basic.deliver's content")

    def _newEnvelope(self, payload: bytes) -> Envelope:
        """Decode a basic.deliver unlike the last one."""
        assert self._connection.version is not None
        method = decode_method(self._connection.version.methods, payload)
        tag_end = len(self._prefix) + _TAG.size
        envelope = self._envelope = Envelope(
            method.exchange, method.routing_key, bool(method.redelivered),  # type: ignore[attr-defined]
            len(payload), payload[tag_end:],
        )
        return envelope

    def _header(self, payload: bytes) -> tuple[int, int, int, Optional[Layout]]:
        """Class id, body size, offset and layout of a content header unlike
        the last one (layout None: the delivery has no offset)."""
        if len(payload) < _PROPERTIES_AT + 2:
            raise FrameError(f"content header of {len(payload)} bytes is too short")
        class_id, _, size = CONTENT_HEADER.unpack_from(payload)
        if class_id != BASIC_CLASS:
            return class_id, size, 0, None
        raw = payload[_PROPERTIES_AT:]
        known = self._known(raw)
        if known is not None:
            self._layout = known
            return (*known.fields.unpack_from(payload), known)
        assert self._connection.version is not None
        cls = self._connection.version.properties[BASIC_CLASS]
        try:
            decoded = cls.decode(raw, 0)
        except Exception as exc:
            raise properties_error(cls, exc) from None
        offset = (getattr(decoded, "headers", None) or {}).get(STREAM_OFFSET_HEADER)
        if not isinstance(offset, int) or isinstance(offset, bool):
            self._failed(NotAStream(
                f"a delivery has no {STREAM_OFFSET_HEADER} header: is queue a stream queue? (option queueType)"
            ))
            return class_id, size, 0, None
        layout = Layout(decoded, raw, _value_at(cls, raw, decoded, offset))
        if layout.size >= 0:
            if len(self._layouts) >= LAYOUTS_KEPT:
                self._layouts.clear()
            self._layouts[layout.head, layout.tail] = layout
        self._layout = layout
        return class_id, size, offset, layout

    def _known(self, raw: bytes) -> Optional[Layout]:
        """The kept layout of properties *raw*, if one matches them."""
        position = raw.find(_OFFSET_ENTRY)
        if position < 0:
            return None
        at = position + len(_OFFSET_ENTRY)
        return self._layouts.get((raw[:at], raw[at + 8 :]))

    def take_columns(self) -> DeliveryColumns:
        """The rows so far; later rows go to new columns (which keep the
        part of a body received so far)."""
        columns = self.columns
        self.columns = DeliveryColumns(columns.data[self._complete :])
        del columns.data[self._complete :]
        self._complete = 0
        self._layout_noted = self._envelope_noted = None
        return columns
