"""Messages read off the connection straight into Arrow columns, without
a client :class:`~txamqp09.client.Message` per message.

:class:`StreamDeliveryTaker` is the frame taker (see
:class:`~txamqp09.wire.frames.FrameScanner`) of the channel that consumes a
stream for the data source. It takes the consumer's basic.deliver frames
with their content frames in place. Of each delivery in the range it keeps
the encoded properties, the body (appended to one buffer), and the stream
offset, which it reads from the properties' headers table.
:class:`GetTaker` does the same with the basic.get-ok answers of a batch
read of a classic queue (whose headers tables are compared whole).

Deliveries of one stream mostly differ from the one before only in their
delivery tag, their ``x-stream-offset`` header's value, their body, and
properties such as a message id. So the taker compares each method frame
with the last envelope (consumer tag, then the same redelivered flag,
exchange and routing key after the delivery tag), and each headers table
with the last table *layout*: the same encoded table except the eight bytes
of the offset's value. Only a delivery that differs is decoded (with the
version's generated decoders); the layouts of decoded tables are kept (at
most :data:`LAYOUTS_KEPT`). Comparing bytes outside the value is exact: a
long-long value cannot change how the rest of the table parses.

:class:`DeliveryColumns` holds the deliveries taken since the last batch and
builds the record batch (in :data:`~txamqp09.spark.arrow.ARROW_SCHEMA`, with
the values :func:`~txamqp09.spark.arrow.message_batch` gives) column by
column with Arrow and numpy: bodies from the one buffer; the properties
other than the headers decoded for all deliveries at once, field by field
(:func:`property_columns`); the other columns from the few distinct
envelopes and table layouts, indexed per row.

Needs pyarrow and numpy (the ``spark`` extra).
"""

from __future__ import annotations

import struct
from datetime import datetime, timezone
from itertools import accumulate
from typing import Any, Callable, Iterator, NamedTuple, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txamqp09.spark.arrow import ARROW_SCHEMA, TEXT_MAP, header_entries, property_entries
from txamqp09.spark.rows import STREAM_OFFSET_HEADER, TEXT_PROPERTIES
from txamqp09.wire.base import CONTENT_HEADER, Properties, decode_method, properties_error
from txamqp09.wire.errors import FrameError, PreconditionFailed, UnexpectedFrame
from txamqp09.wire.fields import encode_shortstr
from txamqp09.wire.frames import (
    BASIC_CLASS, FRAME_BODY, FRAME_END, FRAME_HEADER, FRAME_METHOD, FRAME_OVERHEAD, FrameTaker,
)

__all__ = [
    "DeliveryColumns", "DeliveryTaker", "StreamDeliveryTaker", "GetTaker", "NotAStream", "LAYOUTS_KEPT",
    "property_columns",
]

#: Class and method ids of basic.deliver at the start of its frame payload.
_DELIVER_IDS = bytes((0, BASIC_CLASS, 0, 60))
#: Those of basic.get-ok and basic.get-empty.
_GET_OK_IDS = bytes((0, BASIC_CLASS, 0, 71))
_GET_EMPTY_IDS = bytes((0, BASIC_CLASS, 0, 72))
_TAG = struct.Struct(">Q")
#: A frame's header: type, channel, payload size.
_FRAME = struct.Struct(">BHI")
_TABLE_SIZE = struct.Struct(">I")
#: The offset header's name and type (long-long) in an encoded header table.
_OFFSET_ENTRY = encode_shortstr(STREAM_OFFSET_HEADER) + b"l"
_OFFSET_VALUE = struct.Struct(">q")
#: Bytes of a content header payload before its properties.
_PROPERTIES_AT = CONTENT_HEADER.size
#: Property flags of the basic class's first three properties, in every
#: version: content-type and content-encoding (short strings), then headers.
_CONTENT_TYPE, _CONTENT_ENCODING, _HEADERS = 0x8000, 0x4000, 0x2000
#: Distinct table layouts kept for comparison (then forgotten at once).
LAYOUTS_KEPT = 1024
#: The most body bytes of one record batch (Arrow binary offsets are 32-bit).
_BATCH_BYTES = 2**31 - 1
#: The latest timestamp (in seconds) Python's datetime holds: 9999-12-31 23:59:59 UTC.
_LAST_SECOND = int(datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc).timestamp())
_TIMESTAMP = ARROW_SCHEMA.field("timestamp").type

_METHOD, _HEADER, _BODY = range(3)


class NotAStream(ValueError):
    """A delivery without an ``x-stream-offset`` header: the queue is no stream."""


def _not_a_stream() -> NotAStream:
    return NotAStream(
        f"a delivery has no {STREAM_OFFSET_HEADER} header: is queue a stream queue? (option queueType)"
    )


class Envelope(NamedTuple):
    """What a basic.deliver says besides its consumer and delivery tags."""

    exchange: str
    routing_key: str
    redelivered: bool
    #: Its frame payload's size, and the bytes after the delivery tag.
    size: int
    tail: bytes


class TableLayout:
    """Headers tables encoded alike but for their offset's value.

    An *exact* layout (a classic queue's deliveries) stands for one table
    as it is, offset included (:attr:`fixed_offset`).

    :ivar size: the encoded table's size without its length (-1: the
        offset's place is unknown, the table is decoded for each delivery).
    :ivar head: the encoded table (without its length) up to the offset's value.
    :ivar tail: the encoded table after it.
    :ivar value_at: where the value is in the table (-1: exact layouts).
    :ivar headers: the ``headers`` column's entries, the offset's value None.
    :ivar offset_entry: the offset's place among :attr:`headers` (-1: exact layouts).
    :ivar fixed_offset: the offset of an exact layout's table, if it has one.
    """

    __slots__ = ("size", "head", "tail", "value_at", "headers", "offset_entry", "fixed_offset")

    def __init__(self, table: dict[str, Any], raw: bytes, value_at: int, exact: bool = False) -> None:
        self.value_at = value_at
        self.fixed_offset: Optional[int] = None
        if exact:
            self.headers = header_entries(table)
            self.offset_entry = -1
            offset = table.get(STREAM_OFFSET_HEADER)
            self.fixed_offset = None if offset is None else int(offset)
            self.size, self.head, self.tail = len(raw), raw, b""
            return
        self.headers = [(name, None if name == STREAM_OFFSET_HEADER else text)
                        for name, text in header_entries(table)]
        self.offset_entry = list(table).index(STREAM_OFFSET_HEADER)
        if value_at < 0:
            self.size, self.head, self.tail = -1, b"", b""
        else:
            self.size, self.head, self.tail = len(raw), raw[:value_at], raw[value_at + 8 :]


#: The layout of deliveries without a headers table.
NO_TABLE = TableLayout({}, b"", -1, exact=True)


def _value_at(decode: Callable[[bytes], dict[str, Any]], raw: bytes, table: dict[str, Any], offset: int) -> int:
    """Where the eight bytes of the offset's value are in the encoded table
    *raw* (-1: not found as a long-long): the place whose change changes
    the offset and nothing else."""
    position = raw.find(_OFFSET_ENTRY)
    while position >= 0:
        at = position + len(_OFFSET_ENTRY)
        if raw[at : at + 8] == _OFFSET_VALUE.pack(offset):
            try:
                other = decode(raw[:at] + _OFFSET_VALUE.pack(offset ^ 1) + raw[at + 8 :])
            except Exception:
                other = None
            if other == {**table, STREAM_OFFSET_HEADER: offset ^ 1}:
                return at
        position = raw.find(_OFFSET_ENTRY, position + 1)
    return -1


class DeliveryColumns:
    """Deliveries taken since the last batch, in the form the record batch is built from.

    :ivar offsets: each delivery's stream offset (None: it has none).
    :ivar sizes: each delivery's body size.
    :ivar data: the bodies, one after the other (possibly followed by the
        part of the next body received so far).
    :ivar properties: each delivery's encoded properties.
    :ivar envelopes: (first row, envelope) each time the envelope changed.
    :ivar tables: (first row, layout) each time the headers table's layout changed.
    """

    __slots__ = ("offsets", "sizes", "data", "properties", "envelopes", "tables", "properties_class")

    def __init__(self, properties_class: Optional[type[Properties]] = None, data: Optional[bytearray] = None) -> None:
        #: The class of the properties (needed once there are rows).
        self.properties_class = properties_class
        self.offsets: list[Optional[int]] = []
        self.sizes: list[int] = []
        self.data = bytearray() if data is None else data
        self.properties: list[bytes] = []
        self.envelopes: list[tuple[int, Envelope]] = []
        self.tables: list[tuple[int, TableLayout]] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def record_batches(self) -> Iterator[pa.RecordBatch]:
        """The rows as record batches in :data:`ARROW_SCHEMA` (one, unless
        the bodies exceed what one binary column can hold).

        :raises AMQPSyntaxError: a delivery's properties are malformed.
        """
        rows = len(self.offsets)
        if not rows:
            return
        ends = np.fromiter(accumulate(self.sizes), np.int64, rows)
        starts = ends - np.asarray(self.sizes, np.int64)
        envelopes, envelope_rows = _distinct(self.envelopes, rows)
        tables, table_rows = _distinct(self.tables, rows)
        assert self.properties_class is not None, "rows come from a taker, which names the class"
        properties, stamps = property_columns(self.properties_class, self.properties)
        offsets = pa.array(self.offsets, pa.int64())
        columns = [
            None,
            pa.array([envelope.routing_key for envelope in envelopes], pa.string()).take(envelope_rows),
            pa.array([envelope.exchange for envelope in envelopes], pa.string()).take(envelope_rows),
            properties,
            _headers(tables, table_rows, offsets),
            offsets,
            stamps,
            pa.array([envelope.redelivered for envelope in envelopes], pa.bool_()).take(envelope_rows),
        ]
        first = 0
        while first < rows:
            last = max(first + 1, int(np.searchsorted(ends, starts[first] + _BATCH_BYTES, "right")))
            columns[0] = self._bodies(int(starts[first]), ends[first:last] - starts[first])
            yield pa.RecordBatch.from_arrays(
                [columns[0], *(column.slice(first, last - first) for column in columns[1:])],  # type: ignore[union-attr]
                schema=ARROW_SCHEMA,
            )
            first = last

    def _bodies(self, data_start: int, ends: np.ndarray) -> pa.Array:
        """The body column of the rows whose bodies end at *ends* (counted from *data_start*)."""
        body_offsets = np.zeros(len(ends) + 1, np.int32)
        body_offsets[1:] = ends
        data = memoryview(self.data)[data_start : data_start + int(ends[-1])]
        return pa.Array.from_buffers(pa.binary(), len(ends), [None, pa.py_buffer(body_offsets), pa.py_buffer(data)])


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


def _headers(layouts: Sequence[TableLayout], layout_rows: np.ndarray, offsets: pa.Array) -> pa.MapArray:
    """The ``headers`` column: each row's layout's entries, the offset's
    value being the row's offset as text (unless the layout is exact)."""
    counts = np.asarray([len(layout.headers) for layout in layouts], np.int64)
    entry_starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    row_counts = counts[layout_rows]
    row_starts = np.concatenate(([0], np.cumsum(row_counts)))
    entries = int(row_starts[-1])
    # Each entry of each row: its place among all layouts' entries.
    template = np.repeat(entry_starts[layout_rows] - row_starts[:-1], row_counts) + np.arange(entries)
    # The offset's entry takes its text from after the layouts' entries.
    values = template.copy()
    offset_entries = np.asarray([layout.offset_entry for layout in layouts], np.int64)[layout_rows]
    stamped = np.flatnonzero(offset_entries >= 0)
    values[row_starts[stamped] + offset_entries[stamped]] = int(counts.sum()) + stamped
    names = pa.array([name for layout in layouts for name, _ in layout.headers], pa.string())
    texts = pa.concat_arrays([
        pa.array([text for layout in layouts for _, text in layout.headers], pa.string()),
        pc.cast(offsets, pa.string()),
    ])
    return pa.MapArray.from_arrays(
        pa.array(row_starts, pa.int32()), names.take(template), texts.take(values), type=TEXT_MAP
    )


def property_columns(cls: type[Properties], encoded: Sequence[bytes]) -> tuple[pa.MapArray, pa.Array]:
    """The ``properties`` and ``timestamp`` columns of basic properties
    *encoded* (flags and property lists) of class *cls*.

    The properties are decoded field by field for all rows at once; when a
    row does not decode that way (malformed, or text that is not UTF-8),
    every row is decoded by *cls* instead, which raises its error.

    :raises AMQPSyntaxError: a row's properties are malformed.
    """
    columns = _decoded_together(cls, encoded)
    if columns is not None:
        return columns
    decoded = []
    for raw in encoded:
        try:
            decoded.append(cls.decode(raw, 0))
        except Exception as exc:
            raise properties_error(cls, exc) from None
    return (
        _entries_map([property_entries(properties) for properties in decoded]),
        pa.array([getattr(properties, "timestamp", None) for properties in decoded], _TIMESTAMP),
    )


def _big_endian(data: np.ndarray, at: np.ndarray, size: int) -> np.ndarray:
    """The unsigned big-endian integers of *size* bytes at each of *at*."""
    value = np.zeros(len(at), np.uint64)
    for byte in range(size):
        value = (value << np.uint64(8)) | data[at + byte]
    return value


def _decoded_together(cls: type[Properties], encoded: Sequence[bytes]) -> Optional[tuple[pa.MapArray, pa.Array]]:
    """:func:`property_columns` decoding all rows at once; None when a row
    does not decode that way."""
    rows = len(encoded)
    lengths = np.fromiter(map(len, encoded), np.int64, rows)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    # Eight bytes more, so that a read past the last row's end stays inside.
    data = np.frombuffer(b"".join(encoded) + bytes(8), np.uint8)
    flags = (data[starts].astype(np.int64) << 8) | data[starts + 1]
    valid = (lengths >= 2) & (flags & 3 == 0)
    position = starts + 2
    texts: dict[str, pa.Array] = {}
    present: dict[str, np.ndarray] = {}
    stamps = pa.nulls(rows, _TIMESTAMP)
    for index, (name, kind) in enumerate(cls.FIELDS):
        set_here = flags & (0x8000 >> index) != 0
        if not set_here.any():
            continue
        if kind == "shortstr":
            size = np.where(set_here, data[position], 0).astype(np.int64)
            texts[name] = _gathered_text(data, position + 1, size)
            step = np.where(set_here, 1 + size, 0)
        elif kind == "octet":
            texts[name] = pc.cast(pa.array(data[position]), pa.string())
            step = set_here.astype(np.int64)
        elif kind == "table":
            step = np.where(set_here, 4 + _big_endian(data, position, 4).astype(np.int64), 0)
        elif kind == "timestamp":
            seconds = _big_endian(data, position, 8)
            valid &= ~set_here | (seconds <= _LAST_SECOND)
            micros = np.where(set_here, np.minimum(seconds, _LAST_SECOND).astype(np.int64) * 1_000_000, 0)
            stamps = pa.array(micros, pa.int64(), mask=~set_here).cast(_TIMESTAMP)
            step = np.where(set_here, 8, 0)
        else:
            return None
        present[name] = set_here
        position = position + step
        valid &= position <= ends
        position = np.minimum(position, ends)
    valid &= position == ends
    if not valid.all():
        return None
    try:
        for text in texts.values():
            text.validate(full=True)
    except pa.ArrowInvalid:
        return None
    return _text_map(rows, [(name, present[name], texts[name]) for name in TEXT_PROPERTIES if name in texts]), stamps


def _gathered_text(data: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> pa.Array:
    """A string array of the *sizes* bytes of *data* at each of *starts*."""
    offsets = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    total = int(offsets[-1])
    picked = data[np.repeat(starts - offsets[:-1], sizes) + np.arange(total)]
    return pa.Array.from_buffers(
        pa.string(), len(sizes), [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(picked)]
    )


def _text_map(rows: int, fields: Sequence[tuple[str, np.ndarray, pa.Array]]) -> pa.MapArray:
    """A ``map<string,string>`` array: for each row, an entry (name, text)
    of each of *fields* (name, which rows have it, every row's text) it has."""
    counts = np.zeros(rows, np.int64)
    for _, present, _ in fields:
        counts += present
    row_starts = np.concatenate(([0], np.cumsum(counts)))
    names = np.zeros(int(row_starts[-1]), np.int64)
    picks = np.zeros(int(row_starts[-1]), np.int64)
    filled = row_starts[:-1].copy()
    for number, (_, present, _) in enumerate(fields):
        at = filled[present]
        names[at] = number
        picks[at] = number * rows + np.flatnonzero(present)
        filled += present
    texts = pa.concat_arrays([text for _, _, text in fields]) if fields else pa.array([], pa.string())
    return pa.MapArray.from_arrays(
        pa.array(row_starts, pa.int32()),
        pa.array([name for name, _, _ in fields], pa.string()).take(names),
        texts.take(picks),
        type=TEXT_MAP,
    )


class DeliveryTaker:
    """The frame taker of a channel that reads messages for the data source.

    It takes the content methods whose payload starts with *prefix* (the
    class and method ids, and the consumer tag of a basic.deliver), with
    their content; any other frame between them goes to :meth:`other`
    (*fallback*, the channel's ordinary taker, unless a subclass takes it),
    and a frame that does not fit a message under way is 505 unexpected-frame.

    Each message becomes a row of :attr:`columns` (in a stream's range: see
    :class:`StreamDeliveryTaker`); *arrived* is called with the number of
    messages that arrived and the offset and delivery tag of the last of
    them: after each message, or once after a run of them
    (:meth:`take_run`).

    :meth:`take_run` is the connection's run taker (see
    :attr:`~txamqp09.wire.frames.FrameScanner.run_taker`): it takes the
    messages at the start of each received buffer that are alike the last
    one (the same envelope and headers table layout, the body in one
    frame) whole, in one loop, and leaves everything else to :meth:`take`.

    :param connection: the channel's connection (its version and body limit).
    :param number: the channel's number.
    :param trailer: bytes at the end of the method's payload that may differ
        between messages alike (get-ok's message count).
    """

    #: Whether rows need a stream offset (and only a range of them is kept).
    streaming = False
    #: The range of offsets kept when streaming: from start up to (not including) end.
    start = -(2**63)
    end = 2**63

    def __init__(
        self,
        connection: Any,
        number: int,
        prefix: bytes,
        fallback: FrameTaker,
        arrived: Callable[[Optional[int], int, int], None],
        failed: Callable[[Exception], None],
        trailer: int = 0,
    ) -> None:
        self._connection = connection
        self._number = number
        self._prefix = prefix
        self._trailer = trailer
        self._fallback = fallback
        self._arrived = arrived
        self._failed = failed
        self._properties_class: type[Properties] = connection.version.properties[BASIC_CLASS]
        self.columns = DeliveryColumns(self._properties_class)
        #: Where in :attr:`columns`' data the bodies of complete deliveries end.
        self._complete = 0
        self._state = _METHOD
        self._envelope = Envelope("", "", False, -1, b"")
        self._tag_end = len(prefix) + _TAG.size
        self._envelope_noted: Optional[Envelope] = None
        self._table: Optional[TableLayout] = None
        self._table_noted: Optional[TableLayout] = None
        self._tables: dict[tuple[bytes, bytes], TableLayout] = {}
        self._tag = 0
        self._offset: Optional[int] = None
        self._size = 0
        self._properties = b""
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
                return self.other(frame_type, buf, start, end)
            envelope = self._envelope
            if end - start != envelope.size or not buf.startswith(envelope.tail, start + self._tag_end):
                self._newEnvelope(bytes(buf[start:end]))
            self._tag = _TAG.unpack_from(buf, start + len(self._prefix))[0]
            self._state = _HEADER
            return True
        if frame_type != FRAME_HEADER:
            raise self._unexpected(f"content header for class {BASIC_CLASS}")
        if end - start < _PROPERTIES_AT + 2:
            raise FrameError(f"content header of {end - start} bytes is too short")
        class_id, _, size = CONTENT_HEADER.unpack_from(buf, start)
        if class_id != BASIC_CLASS:
            raise UnexpectedFrame(f"content header for class {class_id} follows a basic class method")
        if size > self._connection.max_body_size:
            raise PreconditionFailed(
                f"basic.deliver: message body of {size} bytes exceeds the maximum of "
                f"{self._connection.max_body_size} bytes", BASIC_CLASS, 60,
            )
        offset = self._read_offset(buf, start + _PROPERTIES_AT, end)
        self._offset = offset
        self._size = self._remaining = size
        keep = self._keep = not self.streaming or offset is not None and self.start <= offset < self.end
        if keep:
            self._properties = bytes(buf[start + _PROPERTIES_AT : end])
        if size:
            self._state = _BODY
        else:
            self._delivered()
        return True

    def take_run(self, buf: bytearray, frame_max: int) -> tuple[int, bool]:
        """The connection's :data:`~txamqp09.wire.frames.RunTaker`: the
        messages at the start of *buf*, each whole (method, header and one
        body frame, checked as the scanner and :meth:`take` check them),
        until a frame that is not one of them (left to the scanner and
        :meth:`take`, as is a body in several frames), or a message not all
        received yet (which waits for more bytes, to be taken whole)."""
        if self._state != _METHOD or not self._connection.takesDeliveries(self._number):
            return 0, False
        number, prefix, streaming, tag_end = self._number, self._prefix, self.streaming, self._tag_end
        tag_at = len(prefix)
        first, end_offset = self.start, self.end
        max_body = min(self._connection.max_body_size, frame_max - FRAME_OVERHEAD)
        columns = self.columns
        offsets, sizes, properties, data = columns.offsets, columns.sizes, columns.properties, columns.data
        envelope_noted, table_noted = self._envelope_noted, self._table_noted
        envelope = self._envelope
        unpack_frame, read_offset = _FRAME.unpack_from, self._read_offset
        size = len(buf)
        pos = count = tag = 0
        last_offset: Optional[int] = None
        wait = False
        try:
            while size - pos >= 7:
                frame_type, channel, length = unpack_frame(buf, pos)
                start = pos + 7
                end = start + length
                if (
                    frame_type != FRAME_METHOD or channel != number or length + FRAME_OVERHEAD > frame_max
                    or end >= size or buf[end] != FRAME_END or not buf.startswith(prefix, start)
                ):
                    break
                header = end + 1
                wait = size - header < 7
                if wait:
                    break
                frame_type, channel, length = unpack_frame(buf, header)
                header_end = header + 7 + length
                if (
                    frame_type != FRAME_HEADER or channel != number or length + FRAME_OVERHEAD > frame_max
                    or length < _PROPERTIES_AT + 2
                ):
                    break
                wait = header_end >= size
                if wait or buf[header_end] != FRAME_END:
                    break
                class_id, _, body_size = CONTENT_HEADER.unpack_from(buf, header + 7)
                if class_id != BASIC_CLASS or body_size > max_body:
                    break
                body = header_end + 1
                if body_size:
                    wait = size - body < 7
                    if wait:
                        break
                    frame_type, channel, length = unpack_frame(buf, body)
                    body_end = body + 7 + length
                    if frame_type != FRAME_BODY or channel != number or length != body_size:
                        break
                    wait = body_end >= size
                    if wait or buf[body_end] != FRAME_END:
                        break
                    pos = body_end + 1
                else:
                    body_end = pos = body
                # The whole message is in: take it.
                if end - start != envelope.size or not buf.startswith(envelope.tail, start + tag_end):
                    self._newEnvelope(bytes(buf[start:end]))
                    envelope = self._envelope
                properties_at = header + 7 + _PROPERTIES_AT
                offset = read_offset(buf, properties_at, header_end)
                if streaming and offset is None:
                    continue
                if not streaming or first <= offset < end_offset:  # type: ignore[operator]  # streaming: an int
                    row = len(offsets)
                    if self._table is not table_noted:
                        columns.tables.append((row, self._table))  # type: ignore[arg-type]  # read: it has one
                        table_noted = self._table
                    if envelope is not envelope_noted:
                        columns.envelopes.append((row, envelope))
                        envelope_noted = envelope
                    offsets.append(offset)
                    sizes.append(body_size)
                    properties.append(bytes(buf[properties_at:header_end]))
                    data += buf[body_end - body_size : body_end]
                count += 1
                tag = _TAG.unpack_from(buf, start + tag_at)[0]
                last_offset = offset
        finally:
            # Also when a message's properties fail: those before it count.
            self._envelope_noted, self._table_noted = envelope_noted, table_noted
            self._complete = len(data)
            if count:
                self._arrived(last_offset, tag, count)
        return pos, wait

    def _read_offset(self, buf: bytearray, properties: int, end: int) -> Optional[int]:
        """The offset in the properties from *properties* to *end* of *buf*
        (None: it has none, reported to *failed*)."""
        flags = buf[properties] << 8 | buf[properties + 1]
        at = properties + 2
        try:
            if flags & _CONTENT_TYPE:
                at += 1 + buf[at]
            if flags & _CONTENT_ENCODING:
                at += 1 + buf[at]
            size = _TABLE_SIZE.unpack_from(buf, at)[0] if flags & _HEADERS else -1
        except (IndexError, struct.error):
            size = -1
        table_at = at + 4
        if size < 0 or table_at + size > end:
            if not self.streaming and not flags & _HEADERS:
                self._table = NO_TABLE
                return None
            return self._decodeProperties(bytes(buf[properties:end]))
        layout = self._table
        if (
            layout is not None
            and size == layout.size
            and buf.startswith(layout.head, table_at)
            and buf.endswith(layout.tail, table_at, table_at + size)
        ):
            if layout.value_at < 0:
                return layout.fixed_offset
            return int(_OFFSET_VALUE.unpack_from(buf, table_at + layout.value_at)[0])
        return self._newTable(bytes(buf[table_at : table_at + size]))

    def _delivered(self) -> None:
        """A delivery is complete: a row if in the range, then *arrived*."""
        self._state = _METHOD
        if self._keep:
            columns = self.columns
            rows = len(columns.offsets)
            if self._table is not self._table_noted:
                columns.tables.append((rows, self._table))  # type: ignore[arg-type]  # kept: it has one
                self._table_noted = self._table
            if self._envelope is not self._envelope_noted:
                columns.envelopes.append((rows, self._envelope))
                self._envelope_noted = self._envelope
            columns.offsets.append(self._offset)
            columns.sizes.append(self._size)
            columns.properties.append(self._properties)
            self._complete = len(columns.data)
        if self._offset is not None or not self.streaming:
            self._arrived(self._offset, self._tag, 1)

    def _unexpected(self, expected: str) -> UnexpectedFrame:
        return UnexpectedFrame(f"expected {expected}, got another frame instead",
                               hint="a frame of another kind arrived inside a message's content")

    def _newEnvelope(self, payload: bytes) -> None:
        """Decode a content method unlike the last one."""
        method = decode_method(self._connection.version.methods, payload)
        self._envelope = Envelope(
            method.exchange, method.routing_key, bool(method.redelivered),  # type: ignore[attr-defined]
            len(payload), payload[self._tag_end : len(payload) - self._trailer],
        )

    def _decodeProperties(self, raw: bytes) -> Optional[int]:
        """The offset of properties whose headers table the taker did not
        find: decoded in full, which raises the error of malformed ones."""
        cls = self._properties_class
        try:
            decoded = cls.decode(raw, 0)
        except Exception as exc:
            raise properties_error(cls, exc) from None
        table = getattr(decoded, "headers", None)
        if table is None:
            self._table = NO_TABLE
            if self.streaming:
                self._failed(_not_a_stream())
            return None
        return self._newTable(self._connection.version.tables.encode_table(table)[4:])

    def _newTable(self, raw: bytes) -> Optional[int]:
        """The offset in headers table *raw* (without its length), unlike the last one."""
        known = self._known(raw)
        if known is not None:
            self._table = known
            if known.value_at < 0:
                return known.fixed_offset
            return int(_OFFSET_VALUE.unpack_from(raw, known.value_at)[0])
        codec = self._connection.version.tables

        def decode(table: bytes) -> dict[str, Any]:
            return codec.decode_table(_TABLE_SIZE.pack(len(table)) + table, 0)[0]

        try:
            table = decode(raw)
        except Exception as exc:
            raise properties_error(self._properties_class, exc) from None
        if not self.streaming:
            layout = self._table = self._keptLayout(TableLayout(table, raw, -1, exact=True))
            return layout.fixed_offset
        offset = table.get(STREAM_OFFSET_HEADER)
        if not isinstance(offset, int) or isinstance(offset, bool):
            self._failed(_not_a_stream())
            return None
        self._table = self._keptLayout(TableLayout(table, raw, _value_at(decode, raw, table, offset)))
        return offset

    def _keptLayout(self, layout: TableLayout) -> TableLayout:
        """*layout*, kept for comparison when it can be."""
        if layout.size >= 0:
            if len(self._tables) >= LAYOUTS_KEPT:
                self._tables.clear()
            self._tables[layout.head, layout.tail] = layout
        return layout

    def _known(self, raw: bytes) -> Optional[TableLayout]:
        """The kept layout of headers table *raw*, if one matches it."""
        if not self.streaming:
            return self._tables.get((raw, b""))
        position = raw.find(_OFFSET_ENTRY)
        if position < 0:
            return None
        at = position + len(_OFFSET_ENTRY)
        return self._tables.get((raw[:at], raw[at + 8 :]))

    def take_columns(self) -> DeliveryColumns:
        """The rows so far; later rows go to new columns (which keep the
        part of a body received so far)."""
        columns = self.columns
        self.columns = DeliveryColumns(self._properties_class, columns.data[self._complete :])
        del columns.data[self._complete :]
        self._complete = 0
        self._table_noted = self._envelope_noted = None
        return columns

    def other(self, frame_type: int, buf: bytearray, start: int, end: int) -> bool:
        """A frame between messages that is not one of them: the fallback's."""
        return self._fallback(frame_type, buf, start, end)


class StreamDeliveryTaker(DeliveryTaker):
    """The frame taker of a channel consuming a stream for the data source:
    the basic.deliver frames of consumer *consumer_tag*.

    Deliveries with offsets from *start* up to (not including) *end* become
    rows; *arrived* is called as deliveries arrive (see
    :class:`DeliveryTaker`). A delivery without an offset calls *failed*
    with :class:`NotAStream` and is dropped.
    """

    streaming = True

    def __init__(
        self,
        connection: Any,
        number: int,
        consumer_tag: str,
        fallback: FrameTaker,
        start: int,
        end: int,
        arrived: Callable[[int, int, int], None],
        failed: Callable[[Exception], None],
    ) -> None:
        super().__init__(
            connection, number, _DELIVER_IDS + encode_shortstr(consumer_tag), fallback,
            arrived, failed,  # type: ignore[arg-type]  # streaming: offsets are ints
        )
        self.start = start
        self.end = end


class GetTaker(DeliveryTaker):
    """The frame taker of a channel that takes messages from a classic
    queue with basic.get: its basic.get-ok frames with their content become
    rows (*arrived* is called as they arrive, with no offset: see
    :class:`DeliveryTaker`), and *emptied* is called for each basic.get-empty.
    """

    def __init__(
        self,
        connection: Any,
        number: int,
        fallback: FrameTaker,
        arrived: Callable[[Optional[int], int, int], None],
        emptied: Callable[[], None],
        failed: Callable[[Exception], None],
    ) -> None:
        # get-ok ends with the queue's message count.
        super().__init__(connection, number, _GET_OK_IDS, fallback, arrived, failed, trailer=4)
        self._emptied = emptied

    def other(self, frame_type: int, buf: bytearray, start: int, end: int) -> bool:
        if (
            frame_type == FRAME_METHOD
            and buf.startswith(_GET_EMPTY_IDS, start)
            and self._connection.takesDeliveries(self._number)
        ):
            self._emptied()
            return True
        return self._fallback(frame_type, buf, start, end)
