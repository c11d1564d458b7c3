"""A dynamic shovel's definition: the JSON of a ``shovel`` runtime parameter.

The keys are those of RabbitMQ 3.10's shovel plugin (AMQP 0-9-1 ends):

==============================  ===============================================
``src-uri``                     a URI or a list, tried in turn (mandatory)
``src-queue``                   consume from this queue (declared durable if
                                missing), or
``src-exchange``                bind a private queue to this exchange, with
``src-exchange-key``            this routing key (``""`` by default)
``src-prefetch-count``          unacknowledged messages in flight (1000)
``src-delete-after``            ``never``, ``queue-length`` (the queue's length
                                at start) or a number of messages, after which
                                the shovel deletes itself
``dest-uri``                    a URI or a list (mandatory)
``dest-queue``                  publish to this queue (declared if missing), or
``dest-exchange``               publish to this exchange, with
``dest-exchange-key``           this routing key (the message's own otherwise)
``dest-add-forward-headers``    add the ``x-shovelled`` header
``dest-add-timestamp-header``   add ``x-shovelled-timestamp``
``dest-publish-properties``     properties set on every message
``ack-mode``                    ``on-confirm`` (default), ``on-publish``, ``no-ack``
``reconnect-delay``             seconds between reconnections (5)
==============================  ===============================================

:func:`shovel_errors` checks a value as RabbitMQ does, with its texts (the
pre-3.7 names ``prefetch-count``, ``delete-after``, ``add-forward-headers``,
``add-timestamp-header`` and ``publish-properties`` are accepted too);
:meth:`ShovelDefinition.from_json` reads a valid one.

Static shovels (RabbitMQ's ``shovels`` of the ``rabbitmq_shovel``
configuration) are the ``shovels`` object of the definitions file the broker
starts with: each name maps to a definition with the keys above, which
:func:`static_shovels` checks and reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from txamqp09.broker.parameters import Component
from txamqp09.links.uri import LinkUri, shown_uris, uris_errors
from txamqp09.links.validation import (
    Rule,
    binary,
    boolean,
    enum,
    erlang_term,
    number,
    proplist_errors,
    queue_name,
)

__all__ = ["ACK_MODES", "SHOVEL", "STATIC_SHOVELS", "ShovelDefinition", "shovel_errors", "static_shovels"]

#: The ``ack-mode`` values: when a message is acknowledged at the source.
ACK_MODES = ("no-ack", "on-publish", "on-confirm")
DEFAULT_PREFETCH = 1000
DEFAULT_RECONNECT_DELAY = 5.0
_URI_KEYS = ("src-uri", "dest-uri")


def _delete_after(key: str, value: Any) -> list[str]:
    if value in ("never", "queue-length") or (type(value) is int and value >= 0):
        return []
    return [
        f'{key} should be a number greater than or equal to 0, "never" or "queue-length", '
        f"actually was {erlang_term(value)}"
    ]


_PROPERTIES = [
    Rule(name, number if name in ("delivery_mode", "priority", "timestamp") else binary)
    for name in (
        "content_type", "content_encoding", "delivery_mode", "priority", "correlation_id", "reply_to",
        "expiration", "message_id", "timestamp", "type", "user_id", "app_id", "cluster_id",
    )
]


def _properties(key: str, value: Any) -> list[str]:
    return proplist_errors(key, _PROPERTIES, value)


def _table(key: str, value: Any) -> list[str]:
    return [] if isinstance(value, Mapping) else [f"{key} not a list {erlang_term(value)}"]


_RULES = [
    Rule("reconnect-delay", number),
    Rule("ack-mode", enum(*ACK_MODES)),
    Rule("src-protocol", enum("amqp091")),
    Rule("dest-protocol", enum("amqp091")),
    Rule("src-uri", uris_errors, mandatory=True),
    Rule("src-exchange", binary),
    Rule("src-exchange-key", binary),
    Rule("src-queue", binary),
    Rule("src-queue-args", _table),
    Rule("src-consumer-args", _table),
    Rule("prefetch-count", number),
    Rule("src-prefetch-count", number),
    Rule("delete-after", _delete_after),
    Rule("src-delete-after", _delete_after),
    Rule("dest-uri", uris_errors, mandatory=True),
    Rule("dest-exchange", binary),
    Rule("dest-exchange-key", binary),
    Rule("dest-queue", queue_name),
    Rule("dest-queue-args", _table),
    Rule("add-forward-headers", boolean),
    Rule("add-timestamp-header", boolean),
    Rule("dest-add-forward-headers", boolean),
    Rule("dest-add-timestamp-header", boolean),
    Rule("publish-properties", _properties),
    Rule("dest-publish-properties", _properties),
]


def _one_of(value: Mapping[str, Any], first: str, second: str) -> int:
    return (first in value) + (second in value)


def shovel_errors(name: str, value: Any) -> list[str]:
    """Why *value* cannot be shovel *name*, in RabbitMQ's texts and order (none: valid)."""
    errors: list[str] = []
    if isinstance(value, Mapping):
        sources = _one_of(value, "src-exchange", "src-queue")
        if sources == 0:
            errors.append("Must specify 'src-exchange' or 'src-queue'")
        elif sources == 2:
            errors.append("Cannot specify 'src-exchange' and 'src-queue'")
        delete_after = value.get("src-delete-after", value.get("delete-after"))
        if type(delete_after) is int and value.get("ack-mode") == "no-ack":
            errors.append("Cannot specify 'no-ack' and numerical 'delete-after'")
        if _one_of(value, "dest-exchange", "dest-queue") == 2:
            errors.append("Cannot specify 'dest-exchange' and 'dest-queue'")
    return errors + proplist_errors(name, _RULES, value)


def _uri_list(value: Union[str, list[str]]) -> tuple[LinkUri, ...]:
    return tuple(LinkUri(uri) for uri in ([value] if isinstance(value, str) else value))


@dataclass(frozen=True)
class ShovelDefinition:
    """A valid shovel definition, read (see the module's table for the keys).

    :ivar delete_after: ``"never"``, ``"queue-length"`` or a message count.
    :ivar dest_exchange: None: the message's own exchange (or the default
        one with *dest_queue*).
    :ivar dest_key: None: the message's own routing key.
    """

    src_uris: tuple[LinkUri, ...]
    dest_uris: tuple[LinkUri, ...]
    src_queue: Optional[str] = None
    src_exchange: Optional[str] = None
    src_exchange_key: str = ""
    src_queue_args: dict[str, Any] = field(default_factory=dict)
    src_consumer_args: dict[str, Any] = field(default_factory=dict)
    prefetch_count: int = DEFAULT_PREFETCH
    delete_after: Union[str, int] = "never"
    dest_queue: Optional[str] = None
    dest_queue_args: dict[str, Any] = field(default_factory=dict)
    dest_exchange: Optional[str] = None
    dest_exchange_key: Optional[str] = None
    add_forward_headers: bool = False
    add_timestamp_header: bool = False
    publish_properties: dict[str, Any] = field(default_factory=dict)
    ack_mode: str = "on-confirm"
    reconnect_delay: float = DEFAULT_RECONNECT_DELAY

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> ShovelDefinition:
        """Read a value :func:`shovel_errors` accepts."""
        get = value.get
        return cls(
            src_uris=_uri_list(value["src-uri"]),
            dest_uris=_uri_list(value["dest-uri"]),
            src_queue=get("src-queue"),
            src_exchange=get("src-exchange"),
            src_exchange_key=get("src-exchange-key", ""),
            src_queue_args=dict(get("src-queue-args") or {}),
            src_consumer_args=dict(get("src-consumer-args") or {}),
            prefetch_count=int(get("src-prefetch-count", get("prefetch-count", DEFAULT_PREFETCH))),
            delete_after=get("src-delete-after", get("delete-after", "never")),
            dest_queue=get("dest-queue"),
            dest_queue_args=dict(get("dest-queue-args") or {}),
            dest_exchange=get("dest-exchange"),
            dest_exchange_key=get("dest-exchange-key"),
            add_forward_headers=bool(get("dest-add-forward-headers", get("add-forward-headers", False))),
            add_timestamp_header=bool(get("dest-add-timestamp-header", get("add-timestamp-header", False))),
            publish_properties=dict(get("dest-publish-properties", get("publish-properties")) or {}),
            ack_mode=get("ack-mode", "on-confirm"),
            reconnect_delay=float(get("reconnect-delay", DEFAULT_RECONNECT_DELAY)),
        )


def _shown(value: Any) -> Any:
    return shown_uris(value, *_URI_KEYS)


#: The ``shovel`` component of runtime parameters.
SHOVEL = Component(shovel_errors, _shown)


#: The definitions file's top-level key of the static shovels.
STATIC_SHOVELS = "shovels"


def static_shovels(value: Any) -> dict[str, ShovelDefinition]:
    """The static shovels of a definitions file's ``shovels`` object (None:
    there are none), by name.

    :raises ValueError: it is not an object of valid definitions (every
        problem named, with its shovel).
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{STATIC_SHOVELS!r} must be an object of shovel definitions by name")
    problems = [f"static shovel {name!r}: {error}" for name, shovel in value.items()
                for error in shovel_errors(name, shovel)]
    if problems:
        raise ValueError("; ".join(problems))
    return {name: ShovelDefinition.from_json(shovel) for name, shovel in value.items()}
