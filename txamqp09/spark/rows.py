"""The data source's schema, and the values of its columns.

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
from typing import Any, Mapping, Optional, Union

__all__ = [
    "SCHEMA",
    "STREAM_OFFSET_HEADER",
    "TEXT_PROPERTIES",
    "Publication",
    "checked_properties",
    "message_body",
    "header_text",
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
TEXT_PROPERTIES = (
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

#: (body, exchange, routing_key, properties) for basic.publish: the
#: properties as a mapping, or encoded (the flags and property list).
Publication = tuple[bytes, str, str, Union[dict[str, Any], bytes]]


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


def message_body(value: Any) -> bytes:
    """The body to publish for a ``body`` column's value.

    :raises ValueError: the value is null.
    :raises TypeError: it is neither binary nor a string.
    """
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


def checked_properties(texts: Mapping[str, Optional[str]]) -> dict[str, Any]:
    """The basic properties a ``properties`` column's map sets (null values
    set nothing), as basic.publish takes them.

    :raises ValueError: a name that is not one of the basic properties, or
        a text that is not a valid value.
    """
    properties = {}
    for name, text in texts.items():
        if name not in TEXT_PROPERTIES and name != "timestamp":
            raise ValueError(f"{name!r} is not a basic property (one of {', '.join(TEXT_PROPERTIES)}, timestamp)")
        if text is not None:
            properties[name] = _property(name, text)
    return properties
