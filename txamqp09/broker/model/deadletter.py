"""Dead-lettering: republishing messages a queue gives up on.

A queue with ``x-dead-letter-exchange`` republishes a message to that
exchange when the message is rejected or nacked without requeue
(``rejected``), expires (``expired``), is dropped or refused by a length
limit (``maxlen``) or is returned more often than a quorum queue's
``x-delivery-limit`` (``delivery_limit``). The copy keeps the body and
properties except that, as RabbitMQ writes them:

- the ``x-death`` header (an array, most recent first) gets an entry for the
  (queue, reason) pair: ``count`` (a ``long``), ``reason``, ``queue``, ``time``,
  ``exchange``, ``routing-keys`` and, when the message had one,
  ``original-expiration``; an existing entry for the pair has its count
  raised and moves to the front (keeping its first ``time``);
- ``x-first-death-reason``, ``x-first-death-queue`` and
  ``x-first-death-exchange`` are set on the first dead-lettering;
- the ``expiration`` property is removed, so the copy does not expire again
  for the same reason;

and it is routed with ``x-dead-letter-routing-key`` when the queue has one,
else with its own routing key. A copy is not delivered to a queue it would
reach in a cycle of automatic dead-letterings (every death since that
queue's last one was an expiry, length limit or delivery limit): a
rejection by a client breaks a cycle. A missing dead-letter exchange drops
the message, as RabbitMQ does. Only this path re-encodes properties.

This module makes the copies; the queue routes them
(:meth:`~.queue.Queue.drop`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Optional

from txamqp09.broker.model.message import Message
from txamqp09.wire.base import decode_properties
from txamqp09.wire.fields import Int64, field_text

__all__ = ["REJECTED", "EXPIRED", "MAXLEN", "DELIVERY_LIMIT", "dead_letter_copy", "is_cycle"]

#: Reasons of the x-death header.
REJECTED = "rejected"
EXPIRED = "expired"
MAXLEN = "maxlen"
DELIVERY_LIMIT = "delivery_limit"


def dead_letter_copy(
    message: Message, queue: str, reason: str, now: datetime, exchange: str, routing_key: Optional[str]
) -> tuple[Message, list[Any]]:
    """The copy of *message* that *queue* dead-letters to *exchange* for
    *reason* at *now*, and its x-death entries (to test targets with
    :func:`is_cycle`).

    :param routing_key: the queue's ``x-dead-letter-routing-key``, or None
        to keep the message's own.
    """
    properties = decode_properties(message.properties_class, message.raw_properties, 0)
    headers = dict(getattr(properties, "headers", None) or {})
    deaths = _deaths(headers, message, queue, reason, now, properties.expiration)  # type: ignore[attr-defined]
    headers["x-death"] = deaths
    properties.headers = headers  # type: ignore[attr-defined]
    properties.expiration = None  # type: ignore[attr-defined]
    copy = message.copy(exchange, routing_key if routing_key is not None else message.routing_key, properties.encode())
    return copy, deaths


def _deaths(
    headers: dict[str, Any], message: Message, queue: str, reason: str, now: datetime, expiration: Optional[str]
) -> list[Any]:
    """The x-death array with this death recorded (most recent first)."""
    previous = headers.pop("x-death", None)
    if not isinstance(previous, list):
        headers["x-death"] = None
        headers["x-first-death-exchange"] = message.exchange
        headers["x-first-death-queue"] = queue
        headers["x-first-death-reason"] = reason
        previous = []
    for index, entry in enumerate(previous):
        if isinstance(entry, dict) and field_text(entry.get("queue")) == queue and field_text(entry.get("reason")) == reason:
            updated = dict(entry)
            updated["count"] = Int64(int(updated.get("count") or 0) + 1)
            return [dict(sorted(updated.items()))] + previous[:index] + previous[index + 1 :]
    entry = {
        "count": Int64(1),
        "reason": reason,
        "queue": queue,
        "time": now,
        "exchange": message.exchange,
        "routing-keys": [message.routing_key],
    }
    if expiration is not None:
        entry["original-expiration"] = expiration
    return [entry] + previous


def is_cycle(queue: str, deaths: list[Any], reason: str) -> bool:
    """Whether dead-lettering to *queue* closes a cycle with no client rejection in it."""
    if reason == REJECTED:
        return False
    for entry in deaths:
        if not isinstance(entry, dict) or field_text(entry.get("reason")) == REJECTED:
            return False
        if field_text(entry.get("queue")) == queue:
            return True
    return False
