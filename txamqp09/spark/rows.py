"""Messages as Spark rows, and rows as messages.

The data source's schema (:data:`SCHEMA`)::

    body binary, routing_key string, exchange string,
    properties map<string,string>, headers map<string,string>,
    offset bigint, timestamp timestamp, redelivered boolean

``properties`` holds the message's basic properties that are set, except
``headers`` and ``timestamp``, which have columns of their own, as text
(``delivery_mode`` as ``"2"``). ``headers`` holds the application headers
with their values as text: strings as they are, byte strings decoded as
UTF-8 (invalid bytes as backslash escapes), numbers and booleans in Python's
spelling, nested tables and arrays as JSON. ``offset`` is the stream offset
of a delivery from a stream queue (its ``x-stream-offset`` header) and null
for other queues; ``timestamp`` is the ``timestamp`` property (null when
unset).

Writing takes a ``body`` column (binary, or string sent as UTF-8) and
optionally ``routing_key``, ``exchange``, ``properties`` and ``headers``
columns of the same types; every other column is ignored.
"""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from typing import Any, Mapping, Optional

__all__ = [
    "SCHEMA",
    "STREAM_OFFSET_HEADER",
    "Publication",
    "message_row",
    "header_text",
    "publication",
]

SCHEMA = (
    "body binary, routing_key string, exchange string, "
    "properties map<string,string>, headers map<string,string>, "
    "offset bigint, timestamp timestamp, redelivered boolean"
)

#: The header of a stream queue's deliveries that carries their offset.
STREAM_OFFSET_HEADER = "x-stream-offset"

#: Basic properties that hold integers; the others are short strings.
_INTEGER_PROPERTIES = frozenset({"delivery_mode", "priority"})
#: Basic properties the ``properties`` column carries.
_TEXT_PROPERTIES = (
    "content_type",
    "content_encoding",
    "delivery_mode",
    "priority",
    "correlation_id",
    "reply_to",
    "expiration",
    "message_id",
    "type",
    "user_id",
    "app_id",
    "cluster_id",
)

#: (body, exchange, routing_key, properties) for basic.publish.
Publication = tuple[bytes, str, str, dict[str, Any]]


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "backslashreplace")
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} has no JSON form")


def header_text(value: Any) -> Optional[str]:
    """A header value as the text the ``headers`` column holds."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "backslashreplace")
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=_json_default, sort_keys=True)
    return str(value)


def message_row(message: Any) -> tuple[Any, ...]:
    """The row (in :data:`SCHEMA`'s order) of a client :class:`~txamqp09.client.Message`."""
    properties = message.properties
    headers = message.headers
    offset = headers.get(STREAM_OFFSET_HEADER)
    return (
        message.body,
        message.routing_key,
        message.exchange,
        {
            name: str(value)
            for name in _TEXT_PROPERTIES
            if (value := getattr(properties, name, None)) is not None
        },
        {str(name): header_text(value) for name, value in headers.items()},
        None if offset is None else int(offset),
        getattr(properties, "timestamp", None),
        message.redelivered,
    )


def _field(row: Any, name: str) -> Any:
    """The value of column *name* of a Spark Row, or None when there is none."""
    try:
        return row[name]
    except (KeyError, ValueError):
        return None


def _body(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if value is None:
        raise ValueError("a message needs a body: the body column is null")
    raise TypeError(f"the body column must be binary or string, not {type(value).__name__}")


def _property(name: str, text: str) -> Any:
    if name in _INTEGER_PROPERTIES:
        return int(text)
    if name == "timestamp":
        return datetime.fromisoformat(text)
    return text


def publication(
    row: Any, exchange: str, routing_key: str, defaults: Mapping[str, Any]
) -> Publication:
    """What to publish for a Spark Row.

    :param exchange: used when the row has no (or a null) ``exchange``.
    :param routing_key: used when the row has no (or a null) ``routing_key``.
    :param defaults: properties every message gets unless its row sets them.
    :raises ValueError: a null body, or a property that is not one of the
        basic properties, or whose text is not a valid value.
    """
    properties = dict(defaults)
    for name, text in (_field(row, "properties") or {}).items():
        if name not in _TEXT_PROPERTIES and name != "timestamp":
            raise ValueError(f"{name!r} is not a basic property (one of {', '.join(_TEXT_PROPERTIES)}, timestamp)")
        if text is not None:
            properties[name] = _property(name, text)
    headers = _field(row, "headers")
    if headers:
        properties["headers"] = dict(headers)
    row_exchange = _field(row, "exchange")
    row_key = _field(row, "routing_key")
    return (
        _body(_field(row, "body")),
        exchange if row_exchange is None else row_exchange,
        routing_key if row_key is None else row_key,
        properties,
    )
