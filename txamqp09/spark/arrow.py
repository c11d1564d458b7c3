"""Messages as Arrow record batches, and record batches as messages.

Spark hands a Python data source's rows to the JVM as Arrow record batches.
A reader that yields ``pyarrow.RecordBatch`` objects itself (in
:data:`ARROW_SCHEMA`, the Arrow form of :data:`~txamqp09.spark.rows.SCHEMA`)
spares Spark's conversion of every value of every row tuple; a writer that
takes record batches (``DataSourceArrowWriter``) spares the conversion of
every value into a ``Row``. :func:`message_batch` builds a batch column by
column from many deliveries; :class:`BatchPublications` reads the columns
of a batch to be published. :mod:`txamqp09.spark.rows` describes the
columns' values.

Needs pyarrow (the ``spark`` extra).
"""

from __future__ import annotations

from datetime import datetime
from operator import attrgetter
from typing import Any, Iterator, Mapping, Optional, Sequence, Union

import pyarrow as pa

from txamqp09.spark.rows import (
    STREAM_OFFSET_HEADER,
    TEXT_PROPERTIES,
    Publication,
    checked_properties,
    header_text,
    message_body,
)
from txamqp09.wire.base import Properties

__all__ = [
    "ARROW_SCHEMA", "TEXT_MAP", "message_batch", "property_entries", "header_entries", "BatchPublications",
]

#: The type of the ``properties`` and ``headers`` columns.
TEXT_MAP = pa.map_(pa.string(), pa.string())

#: :data:`~txamqp09.spark.rows.SCHEMA` as Spark gives it to Arrow (every
#: column nullable; timestamps in microseconds, UTC).
ARROW_SCHEMA = pa.schema(
    [
        ("body", pa.binary()),
        ("routing_key", pa.string()),
        ("exchange", pa.string()),
        ("properties", TEXT_MAP),
        ("headers", TEXT_MAP),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("redelivered", pa.bool_()),
    ]
)

_text_properties = attrgetter(*TEXT_PROPERTIES)
_NONE_SET = (None,) * len(TEXT_PROPERTIES)


def property_entries(basic: Any) -> list[tuple[str, str]]:
    """The ``properties`` column's entries of basic properties *basic*."""
    values = _text_properties(basic)
    if values == _NONE_SET:
        return []
    return [(name, str(value)) for name, value in zip(TEXT_PROPERTIES, values) if value is not None]


def header_entries(table: Mapping[str, Any]) -> list[tuple[str, Optional[str]]]:
    """The ``headers`` column's entries of a headers table."""
    return [(str(name), header_text(value)) for name, value in table.items()]


class _TextMap:
    """A ``map<string,string>`` column built one row at a time."""

    __slots__ = ("offsets", "keys", "values")

    def __init__(self) -> None:
        self.offsets = [0]
        self.keys: list[str] = []
        self.values: list[Optional[str]] = []

    def array(self) -> pa.MapArray:
        return pa.MapArray.from_arrays(
            pa.array(self.offsets, pa.int32()),
            pa.array(self.keys, pa.string()),
            pa.array(self.values, pa.string()),
            type=TEXT_MAP,
        )


def message_batch(messages: Sequence[Any]) -> pa.RecordBatch:
    """The record batch (in :data:`ARROW_SCHEMA`) of client
    :class:`~txamqp09.client.Message` objects, a row each in their order."""
    bodies, routing_keys, exchanges, redelivered = [], [], [], []
    offsets: list[Optional[int]] = []
    stamps: list[Optional[datetime]] = []
    properties, headers = _TextMap(), _TextMap()
    for message in messages:
        method = message.method
        basic = message.properties
        bodies.append(message.body)
        routing_keys.append(method.routing_key)
        exchanges.append(method.exchange)
        redelivered.append(bool(getattr(method, "redelivered", False)))
        stamps.append(basic.timestamp)
        for name, text in property_entries(basic):
            properties.keys.append(name)
            properties.values.append(text)
        properties.offsets.append(len(properties.keys))
        table = basic.headers
        offset = None
        if table:
            for key, value in header_entries(table):
                headers.keys.append(key)
                headers.values.append(value)
            offset = table.get(STREAM_OFFSET_HEADER)
        headers.offsets.append(len(headers.keys))
        offsets.append(None if offset is None else int(offset))
    return pa.RecordBatch.from_arrays(
        [
            pa.array(bodies, pa.binary()),
            pa.array(routing_keys, pa.string()),
            pa.array(exchanges, pa.string()),
            properties.array(),
            headers.array(),
            pa.array(offsets, pa.int64()),
            pa.array(stamps, ARROW_SCHEMA.field("timestamp").type),
            pa.array(redelivered, pa.bool_()),
        ],
        schema=ARROW_SCHEMA,
    )


def _column(batch: pa.RecordBatch, name: str) -> Optional[list[Any]]:
    """Column *name* of *batch* as Python values, or None when it has none."""
    index = batch.schema.get_field_index(name)
    return None if index < 0 else batch.column(index).to_pylist()


#: The body column types :meth:`BatchPublications.encoded` takes (their
#: values' bytes are the bodies as they are), in Spark's Arrow form with
#: or without large (64-bit offset) vectors.
_BODY_TYPES = frozenset((pa.binary(), pa.string(), pa.large_binary(), pa.large_string()))


def _all_empty(column: pa.Array) -> bool:
    """Whether a column is a map column without entries (every row null
    or an empty map, its offsets all the same)."""
    if not isinstance(column, pa.MapArray):
        return False
    offsets = column.offsets
    return bool(offsets[0].as_py() == offsets[len(offsets) - 1].as_py())


class BatchPublications:
    """What to publish for each row of record batches (the Arrow form of
    :func:`~txamqp09.spark.rows.publication`).

    :param exchange: used for rows without (or with a null) ``exchange``.
    :param routing_key: used for rows without (or with a null) ``routing_key``.
    :param defaults: properties every message gets unless its row sets them.
    :param id_prefix: when given, every message gets the message-id
        ``{id_prefix}-{n}`` unless its row or *defaults* set one, n
        counting the rows of every batch from 0.
    :param encoder: when given, the properties class of the channel that
        publishes: rows that set no properties and no headers get their
        properties as its encoding (the defaults and the message-id), built
        from the encoding's bytes without a properties object per row; other
        rows get a mapping as without it.
    """

    def __init__(
        self, exchange: str, routing_key: str, defaults: Mapping[str, Any],
        id_prefix: Optional[str] = None, encoder: Optional[type[Properties]] = None,
    ) -> None:
        self.exchange = exchange
        self.routing_key = routing_key
        self.defaults = dict(defaults)
        self.id_prefix = id_prefix
        #: Rows published so far (the n of the next message-id).
        self.count = 0
        self._encoded = _EncodedDefaults(encoder, self.defaults, id_prefix) if encoder is not None else None

    def encoded(self, batch: pa.RecordBatch) -> Optional[tuple[list[bytes], list[bytes]]]:
        """The encoded properties and the bodies of *batch*'s rows, built
        column-wise, when every row takes the defaults: a body column
        without nulls (binary or string), and no row setting an exchange, a
        routing key, properties or headers; else None (then :meth:`of`
        takes the batch). Counts the rows as :meth:`of` does.

        Only with an encoder (see the class).

        :raises ValueError: a message-id longer than 255 bytes.
        """
        encoded = self._encoded
        index = batch.schema.get_field_index("body")
        if encoded is None or index < 0:
            return None
        bodies = batch.column(index)
        if bodies.null_count or bodies.type not in _BODY_TYPES:
            return None
        for name in ("exchange", "routing_key"):
            at = batch.schema.get_field_index(name)
            if at >= 0 and batch.column(at).null_count < batch.num_rows:
                return None
        for name in ("properties", "headers"):
            at = batch.schema.get_field_index(name)
            if at >= 0 and not _all_empty(batch.column(at)):
                return None
        number = self.count
        properties = encoded.numbered_range(number, number + batch.num_rows)
        self.count += batch.num_rows
        return properties, bodies.cast(pa.large_binary()).to_pylist()

    def of(self, batch: pa.RecordBatch) -> Iterator[Publication]:
        """The publications of *batch*'s rows, in order.

        :raises ValueError: a null body; a property that is not a basic
            property, or whose text is not a valid value; a message-id
            longer than 255 bytes.
        :raises TypeError: a body column that is neither binary nor string.
        """
        rows = batch.num_rows
        bodies = _column(batch, "body")
        if bodies is None:
            raise ValueError("a message needs a body: the written DataFrame has no body column")
        exchanges = _column(batch, "exchange") or [None] * rows
        keys = _column(batch, "routing_key") or [None] * rows
        properties = _column(batch, "properties") or [None] * rows
        headers = _column(batch, "headers") or [None] * rows
        encoded = self._encoded
        number = self.count
        self.count += rows
        for body, exchange, key, texts, table in zip(bodies, exchanges, keys, properties, headers):
            chosen: Union[dict[str, Any], bytes]
            if encoded is not None and not texts and not table:
                chosen = encoded.numbered(number)
            else:
                chosen = dict(self.defaults)
                if texts:
                    chosen.update(checked_properties(dict(texts)))
                if table:
                    chosen["headers"] = dict(table)
                if self.id_prefix is not None:
                    chosen.setdefault("message_id", f"{self.id_prefix}-{number}")
            number += 1
            yield (
                message_body(body),
                self.exchange if exchange is None else exchange,
                self.routing_key if key is None else key,
                chosen,
            )


#: Stands for the message-id in :class:`_EncodedDefaults`'s template.
_ID_PLACEHOLDER = "\x00id\x00"


class _EncodedDefaults:
    """The encoded properties of rows that set none: the defaults, and the
    message-id ``{id_prefix}-{n}`` (when there is a prefix) spliced into
    their encoding by its bytes."""

    __slots__ = ("head", "id_head", "tail", "fixed")

    def __init__(self, encoder: type[Properties], defaults: Mapping[str, Any], id_prefix: Optional[str]) -> None:
        #: The whole encoding when there is no message-id to number (no
        #: prefix, or the defaults set the message-id, as rows that set
        #: properties keep it then).
        self.fixed = encoder(**defaults).encode() if id_prefix is None or "message_id" in defaults else None
        template = encoder(**{**defaults, "message_id": _ID_PLACEHOLDER}).encode()
        placeholder = _ID_PLACEHOLDER.encode()
        at = template.index(bytes([len(placeholder)]) + placeholder)
        self.head = template[:at]
        self.tail = template[at + 1 + len(placeholder):]
        self.id_head = f"{id_prefix}-".encode()

    def numbered_range(self, first: int, end: int) -> list[bytes]:
        """The properties of rows *first* to *end* (exclusive): :meth:`numbered` of each.

        :raises ValueError: a message-id is longer than a short string allows.
        """
        if self.fixed is not None:
            return [self.fixed] * (end - first)
        if end > first:
            self.numbered(end - 1)  # the longest message-id, checked
        head, tail, id_head = self.head, self.tail, self.id_head
        return [head + bytes((len(message_id),)) + message_id + tail
                for message_id in [id_head + b"%d" % number for number in range(first, end)]]

    def numbered(self, number: int) -> bytes:
        """The properties of row *number*.

        :raises ValueError: the message-id is longer than a short string allows.
        """
        if self.fixed is not None:
            return self.fixed
        message_id = self.id_head + b"%d" % number
        if len(message_id) > 255:
            raise ValueError(f"message-id {message_id!r} is longer than 255 bytes")
        return self.head + bytes((len(message_id),)) + message_id + self.tail
