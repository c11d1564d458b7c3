"""The headers federation adds to messages and bindings, as RabbitMQ writes them.

* ``x-received-from`` (on messages): an array of tables, the latest hop
  first. An exchange link's entry has ``uri`` (credentials removed),
  ``exchange``, ``redelivered``, and the upstream's ``cluster-name`` and
  ``vhost``; a queue link's has ``uri``, ``queue``, ``redelivered`` and
  ``visit-count``.
* ``x-bound-from`` (on the bindings a downstream makes on its upstream):
  an array of tables with ``cluster-name``, ``vhost``, ``exchange`` and
  ``hops``, the number of links the binding may still travel.

A message travels no further once it has crossed ``max-hops`` links or
reached a broker it came through before (:func:`should_forward`); a
binding travels back no further than messages could come
(:func:`binding_hops`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

__all__ = [
    "BOUND_FROM",
    "RECEIVED_FROM",
    "already_seen",
    "binding_hops",
    "prepended",
    "queue_link_headers",
    "should_forward",
]

RECEIVED_FROM = "x-received-from"
BOUND_FROM = "x-bound-from"


def _entries(value: Any) -> list[Mapping[str, Any]]:
    if isinstance(value, (list, tuple)):
        return [entry for entry in value if isinstance(entry, Mapping)]
    return []


def already_seen(name: str, vhost: str, entries: Sequence[Any]) -> bool:
    """Whether an entry of *entries* names cluster *name* and *vhost*."""
    return any(
        isinstance(entry, Mapping) and _text(entry.get("cluster-name")) == name and _text(entry.get("vhost")) == vhost
        for entry in entries
    )


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else value


def should_forward(headers: Optional[Mapping[str, Any]], max_hops: int, name: str, vhost: str) -> bool:
    """Whether a message with *headers* may cross one more link into the
    broker called *name* (its vhost *vhost*)."""
    value = (headers or {}).get(RECEIVED_FROM)
    if not isinstance(value, (list, tuple)):
        return True
    return len(value) < max_hops and not already_seen(name, vhost, value)


def prepended(headers: Optional[Mapping[str, Any]], key: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """*headers* with *entry* put first in the array *key* (a new array when
    there is none, or when the header is no array)."""
    updated = dict(headers or {})
    existing = updated.get(key)
    updated[key] = [dict(entry), *(existing if isinstance(existing, (list, tuple)) else ())]
    return updated


def queue_link_headers(
    headers: Optional[Mapping[str, Any]], entry: Mapping[str, Any], exchange: str, routing_key: str
) -> dict[str, Any]:
    """*headers* of a message a queue link moves, as RabbitMQ's queue links
    write them: the first move notes the original exchange and routing key;
    every move counts its visits of this link in ``visit-count``; ``CC``
    becomes ``x-original-cc`` (the republished message goes to one queue)."""
    updated = dict(headers or {})
    been = updated.get(RECEIVED_FROM)
    visits = 0
    if isinstance(been, (list, tuple)):
        kept = []
        for item in been:
            if isinstance(item, Mapping) and all(
                _text(item.get(k)) == _text(entry.get(k)) for k in ("uri", "virtual_host", "queue")
            ):
                count = item.get("visit-count")
                visits = count if isinstance(count, int) else 0
            else:
                kept.append(item)
        updated[RECEIVED_FROM] = kept
    else:
        updated["x-original-exchange"] = exchange
        updated["x-original-routing-key"] = routing_key
    if "CC" in updated:
        updated["x-original-cc"] = updated.pop("CC")
    return prepended(updated, RECEIVED_FROM, {**entry, "visit-count": visits + 1})


def binding_hops(arguments: Mapping[str, Any], max_hops: int, upstream_name: str, upstream_vhost: str) -> int:
    """How many more links a downstream binding with *arguments* may be
    propagated over towards an upstream called *upstream_name* (0: none).

    A binding made here may go *max_hops* links; one that came from a
    downstream goes one link fewer than it was given (never more than
    *max_hops*), and none back to a broker it came through.
    """
    entries = _entries(arguments.get(BOUND_FROM))
    if not entries:
        return max_hops
    if already_seen(upstream_name, upstream_vhost, entries):
        return 0
    previous = entries[0].get("hops")
    return max(0, min((previous if isinstance(previous, int) else 0) - 1, max_hops))
