"""The two rule books a connection follows, chosen by its protocol header.

A 0-9-1 connection follows RabbitMQ 3.10 (:data:`RABBITMQ`): a client
cannot tell this broker from RabbitMQ by its answers, except where this
broker does strictly more (``immediate``, ``basic.recover`` without requeue,
``prefetch-size``, ``channel.flow`` pausing deliveries). A 0-8 or 0-9
connection follows its specification's text (:data:`SPECIFIED`).

Every rule where the two differ is one field of :class:`Dialect`; the
channel, the connection and the model read the field instead of testing the
protocol version. ``docs/broker.rst`` (*Two dialects*) tabulates them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Iterable, Mapping, Optional

from txamqp09.wire import _amqp0_9_1
from txamqp09.wire.errors import AMQPError
from txamqp09.wire.versions import AMQP0_9_1, ProtocolVersion

__all__ = ["Dialect", "RABBITMQ", "SPECIFIED", "CODE_NAMES", "dialect_for"]

#: RabbitMQ's name of each reply code, as its reply texts start with it.
CODE_NAMES: Mapping[int, str] = {
    code: reply.name.upper().replace("-", "_") for code, reply in _amqp0_9_1.REPLY_CODES.items()
}


@dataclass(frozen=True)
class Dialect:
    """The rules on which RabbitMQ 3.10 and the 0-8/0-9 specifications differ.

    Each field names one rule; its comment says what ``True`` means, which
    is what RabbitMQ 3.10 does (the specifications do the opposite of each).
    """

    #: A short name for messages and documentation.
    name: str
    #: Reply texts start with RabbitMQ's name of the code ("NOT_FOUND - ...")
    #: and leave out hints; otherwise they carry the hint after the text.
    code_name_prefix: bool
    #: channel_max limits how many channels are open at once (opening one
    #: more is 530); otherwise it limits channel numbers (504 above it).
    channel_max_counts_open: bool
    #: An unknown virtual host is 530 "vhost ... not found"; otherwise 402.
    unknown_vhost_not_allowed: bool
    #: queue.delete and queue.unbind of a missing queue, queue.unbind from a
    #: missing exchange and exchange.delete of a missing exchange succeed;
    #: otherwise 404.
    missing_delete_ok: bool
    #: An empty queue name with no queue declared on the channel is 404;
    #: otherwise 530 (a connection exception).
    empty_queue_name_not_found: bool
    #: Redeclaring an exchange or a queue compares durable and auto-delete
    #: (406); otherwise they are ignored for what exists.
    redeclare_compares_flags: bool
    #: Redeclaring an exchange with another type is 406 (channel); otherwise
    #: 530 (connection).
    exchange_type_conflict_soft: bool
    #: A queue name starting with ``amq.`` is 403 (channel); otherwise 530.
    reserved_queue_name_soft: bool
    #: queue.declare of an existing queue with another ``exclusive`` is 405
    #: RESOURCE_LOCKED; otherwise it is compared (406).
    exclusive_mismatch_locked: bool
    #: A passive exchange.declare of the default exchange is 403.
    passive_default_exchange_refused: bool
    #: queue.bind and queue.unbind to the default exchange ``""`` are 403;
    #: otherwise allowed (the queue is bound to it by its name already).
    default_exchange_binding_refused: bool
    #: tx.rollback leaves deliveries acknowledged inside the transaction
    #: unacknowledged; otherwise they are delivered again.
    rollback_keeps_acked: bool
    #: A method of another class on channel 0 is 504 and a connection
    #: method on another channel 503; otherwise 503 and 504. A negotiation
    #: method after connection.open is 504; otherwise 503.
    misplaced_methods_as_rabbitmq: bool
    #: queue.declare of another connection's exclusive queue is 405;
    #: otherwise 504 (0-9's rule names channel-error).
    exclusive_elsewhere_locked: bool
    #: queue.bind takes any exchange; otherwise binding a durable queue to a
    #: transient exchange, or a queue to an internal exchange, is 530.
    bind_any_exchange: bool
    #: basic.recover is allowed on a transactional channel; otherwise 406.
    recover_in_tx: bool
    #: basic.qos ``global=false`` limits each new consumer and ``global=true``
    #: the channel; otherwise they limit the channel and the connection.
    per_consumer_qos: bool
    #: connection.start's server-properties carry RabbitMQ's
    #: ``capabilities`` table (publisher confirms, consumer cancel notify ...).
    announces_capabilities: bool
    #: A published message's user-id must be the connection's user (406),
    #: unless the user is tagged ``impersonator``; otherwise it is not checked.
    checks_user_id: bool

    def reply_text(self, error: AMQPError) -> str:
        """The reply text *error* is sent with (at most 255 characters)."""
        text = error.reply_text
        if self.code_name_prefix:
            prefix = CODE_NAMES.get(error.reply_code)
            if prefix is not None and not text.startswith(prefix + " - "):
                text = f"{prefix} - {text}"
        else:
            text = error.full_text
        return text[:255]

    def publisher_user_id(self, name: str, tags: Iterable[str]) -> Optional[str]:
        """The user-id that messages published by user *name* (with *tags*)
        must carry when they carry one, or None if any is accepted."""
        return name if self.checks_user_id and "impersonator" not in tags else None


def _every_rule(name: str, follows: bool) -> Dialect:
    """A dialect whose every rule is *follows*: the two rule books differ on
    each field, RabbitMQ's side being ``True``."""
    rules = {field.name: follows for field in fields(Dialect) if field.name != "name"}
    return Dialect(name=name, **rules)


#: RabbitMQ 3.10's rules: every 0-9-1 connection.
RABBITMQ = _every_rule("RabbitMQ 3.10", True)

#: The 0-8 and 0-9 specifications' rules.
SPECIFIED = _every_rule("0-8/0-9 specification", False)


def dialect_for(version: ProtocolVersion) -> Dialect:
    """The rules a connection speaking *version* follows."""
    return RABBITMQ if version is AMQP0_9_1 else SPECIFIED
