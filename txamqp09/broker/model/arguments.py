"""Reading the ``x-`` arguments of declarations, bindings and consumers.

Field tables decode long strings as bytes; these helpers accept bytes and
str alike and refuse a bad value with 406 and a text that names the
argument, the entity it was given for and what is allowed, as RabbitMQ
does (``invalid arg 'x-message-ttl' for queue 'q' in vhost '/': ...``).

:class:`QueueArguments` reads every queue argument the broker understands
once, when the queue is declared.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from txamqp09.wire.errors import PreconditionFailed
from txamqp09.wire.fields import field_text

__all__ = [
    "choice_argument",
    "field_type",
    "count_argument",
    "flag_argument",
    "string_argument",
    "Overflow",
    "QueueArguments",
    "CLASSIC",
    "QUORUM",
    "STREAM",
    "QUEUE_TYPES",
    "MAX_PRIORITY",
    "MAX_EXPIRY",
    "check_quorum_properties",
    "refused_arguments",
    "refused_argument",
]

#: The queue types: classic, quorum (kept as a durable classic queue
#: with quorum queues' declaration rules and delivery limit), and stream
#: (an append-only log, see :mod:`.stream`).
CLASSIC = "classic"
QUORUM = "quorum"
STREAM = "stream"
QUEUE_TYPES = (CLASSIC, QUORUM, STREAM)
#: The highest x-max-priority a queue may have.
MAX_PRIORITY = 255
#: The longest TTL or queue expiry, in milliseconds: ten years of 365
#: days, as RabbitMQ 3.10 allows.
MAX_EXPIRY = 10 * 365 * 24 * 3600 * 1000
#: Arguments of other queue types that RabbitMQ refuses for a type.
_REFUSED = {
    CLASSIC: (
        "x-delivery-limit", "x-dead-letter-strategy", "x-max-in-memory-length",
        "x-max-in-memory-bytes", "x-quorum-initial-group-size", "x-queue-leader-locator",
        "x-max-age", "x-stream-max-segment-size-bytes", "x-initial-cluster-size",
    ),
    QUORUM: ("x-max-priority", "x-queue-mode", "x-max-age", "x-stream-max-segment-size-bytes"),
}
#: The name RabbitMQ's texts give each queue type (its Erlang module).
_TYPE_MODULES = {
    CLASSIC: "rabbit_classic_queue", QUORUM: "rabbit_quorum_queue", STREAM: "rabbit_stream_queue",
}
#: The values of x-queue-mode.
QUEUE_MODES = ("default", "lazy")


def _kind(value: Any) -> str:
    """*value* and its type as an error text shows them (``'10' (a string)``)."""
    if isinstance(value, (bytes, str)):
        return f"{field_text(value)!r} (a string)"
    return f"{value!r} ({type(value).__name__})"


def field_type(value: Any) -> str:
    """The AMQP field type RabbitMQ names for a decoded argument *value*."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "signedint" if -(1 << 31) <= value < (1 << 31) else "long"
    if isinstance(value, float):
        return "double"
    if isinstance(value, (str, bytes)):
        return "longstr"
    if isinstance(value, dict):
        return "table"
    if isinstance(value, list):
        return "array"
    return "void"


def _invalid(name: str, subject: str, reason: str, hint: str = "") -> PreconditionFailed:
    """406 for argument *name*: *reason* in RabbitMQ's terms, *hint* in plain words."""
    where = f" for {subject}" if subject else ""
    return PreconditionFailed(f"invalid arg {name!r}{where}: {reason}", hint=hint)


#: RabbitMQ's reason for a value outside the choices, by argument.
_CHOICE_REASONS = {
    "x-overflow": "invalid_overflow",
    "x-queue-type": "\"unsupported queue type '{value}'\"",
    "x-queue-mode": "\"unsupported queue mode '{value}'\"",
}
#: RabbitMQ's reason for a value above the maximum, by argument (the
#: others: value_too_large).
_ABOVE_MAXIMUM_REASONS = {"x-max-priority": "max_value_exceeded"}


def choice_argument(
    arguments: Mapping[str, Any], name: str, choices: Sequence[str], default: str, subject: str = ""
) -> str:
    """The value of argument *name*, which must be one of *choices*.

    :param subject: what the argument was given for, for the error text
        (``queue 'q' in vhost '/'``).
    :raises PreconditionFailed: any other value (406).
    """
    value = field_text(arguments.get(name, default))
    if value not in choices:
        reason = _CHOICE_REASONS.get(name, "{value!r}").format(value=value)
        raise _invalid(name, subject, reason, f"expected one of {', '.join(choices)}")
    return str(value)


def count_argument(
    arguments: Mapping[str, Any],
    name: str,
    subject: str = "",
    *,
    minimum: int = 0,
    maximum: Optional[int] = None,
) -> Optional[int]:
    """The value of argument *name*, an integer in [*minimum*, *maximum*], or None if absent.

    :raises PreconditionFailed: any other value (406).
    """
    value = arguments.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(
            name, subject, f'"expected integer, got {field_type(value)}"', f"got {_kind(value)}"
        )
    if value < minimum:
        wanted = "a non-negative integer" if minimum == 0 else f"an integer of at least {minimum}"
        reason = "value_zero" if value == 0 else "value_negative"
        raise _invalid(name, subject, f"{{{reason},{value}}}", f"expected {wanted}")
    if maximum is not None and value > maximum:
        reason = _ABOVE_MAXIMUM_REASONS.get(name, "value_too_large")
        raise _invalid(name, subject, f"{{{reason},{value}}}", f"at most {maximum}")
    return value


def string_argument(arguments: Mapping[str, Any], name: str, subject: str = "") -> Optional[str]:
    """The value of argument *name*, a string, or None if absent.

    :raises PreconditionFailed: any other type (406).
    """
    value = field_text(arguments.get(name))
    if value is None:
        return None
    if not isinstance(value, str):
        raise _invalid(
            name, subject, f"{{unacceptable_type,{field_type(value)}}}", f"expected a string, got {_kind(value)}"
        )
    return str(value)


def flag_argument(arguments: Mapping[str, Any], name: str, subject: str = "") -> bool:
    """The value of argument *name*, a boolean (False if absent).

    :raises PreconditionFailed: any other type (406).
    """
    value = arguments.get(name, False)
    if not isinstance(value, bool):
        raise _invalid(
            name, subject, f"{{unacceptable_type,{field_type(value)}}}", f"expected a boolean, got {_kind(value)}"
        )
    return value


class Overflow:
    """What a queue at its length limit does with a new message (x-overflow)."""

    #: The oldest ready messages are dropped (or dead-lettered) to make room.
    DROP_HEAD = "drop-head"
    #: The new message is refused; a confirming publisher gets a nack.
    REJECT_PUBLISH = "reject-publish"
    #: As reject-publish, and the refused message is dead-lettered.
    REJECT_PUBLISH_DLX = "reject-publish-dlx"
    CHOICES = (DROP_HEAD, REJECT_PUBLISH, REJECT_PUBLISH_DLX)


class QueueArguments:
    """The queue arguments the broker acts on, read and checked at declaration.

    Times are in milliseconds, as clients give them. Unknown arguments are
    kept (and ignored), as RabbitMQ does.

    :param subject: the queue, for error texts (``queue 'q' in vhost '/'``).
    :raises PreconditionFailed: an invalid value, or a combination the
        queue type does not allow (406).
    """

    __slots__ = (
        "message_ttl",
        "expires",
        "max_length",
        "max_length_bytes",
        "overflow",
        "dead_letter_exchange",
        "dead_letter_routing_key",
        "max_priority",
        "single_active_consumer",
        "queue_type",
        "delivery_limit",
    )

    def __init__(self, arguments: Mapping[str, Any], subject: str) -> None:
        self.message_ttl = count_argument(arguments, "x-message-ttl", subject, maximum=MAX_EXPIRY)
        self.expires = count_argument(arguments, "x-expires", subject, minimum=1, maximum=MAX_EXPIRY)
        self.max_length = count_argument(arguments, "x-max-length", subject)
        self.max_length_bytes = count_argument(arguments, "x-max-length-bytes", subject)
        self.overflow = choice_argument(
            arguments, "x-overflow", Overflow.CHOICES, Overflow.DROP_HEAD, subject
        )
        self.dead_letter_exchange = string_argument(arguments, "x-dead-letter-exchange", subject)
        self.dead_letter_routing_key = string_argument(
            arguments, "x-dead-letter-routing-key", subject
        )
        if self.dead_letter_routing_key is not None and self.dead_letter_exchange is None:
            raise _invalid(
                "x-dead-letter-routing-key", subject, "routing_key_but_no_dlx_defined",
                "a dead-letter routing key needs x-dead-letter-exchange too",
            )
        self.max_priority = count_argument(
            arguments, "x-max-priority", subject, maximum=MAX_PRIORITY
        )
        self.single_active_consumer = flag_argument(arguments, "x-single-active-consumer", subject)
        choice_argument(arguments, "x-queue-mode", QUEUE_MODES, QUEUE_MODES[0], subject)
        self.queue_type = choice_argument(arguments, "x-queue-type", QUEUE_TYPES, CLASSIC, subject)
        for name in refused_arguments(self.queue_type):
            if name in arguments:
                raise refused_argument(name, subject, self.queue_type)
        self.delivery_limit = count_argument(arguments, "x-delivery-limit", subject)


def refused_arguments(queue_type: str) -> tuple[str, ...]:
    """The arguments of other queue types that queues of *queue_type* refuse."""
    return _REFUSED.get(queue_type, ())


def refused_argument(name: str, subject: str, queue_type: str) -> PreconditionFailed:
    """406 for argument *name*, which queues of *queue_type* do not take."""
    return PreconditionFailed(
        f"invalid arg {name!r} for {subject} of queue type {_TYPE_MODULES[queue_type]}",
        hint=f"{queue_type} queues do not support it",
    )


def check_quorum_properties(subject: str, durable: bool, exclusive: bool, auto_delete: bool) -> None:
    """Quorum queues are durable, shared and kept: refuse anything else
    (406, RabbitMQ's texts, in RabbitMQ's order of checks)."""
    for refused, name in ((auto_delete, "auto-delete"), (exclusive, "exclusive-owner"), (not durable, "non-durable")):
        if refused:
            raise PreconditionFailed(
                f"invalid property {name!r} for {subject}",
                hint="quorum queues are durable, not exclusive and not auto-delete",
            )
