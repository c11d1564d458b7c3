"""The two rule books a connection follows, chosen by its protocol header.

A 0-9-1 connection follows RabbitMQ 3.10 (:data:`RABBITMQ`): a client
cannot tell this broker from RabbitMQ by its answers, except where this
broker does strictly more (``immediate``, ``basic.recover`` without requeue,
``prefetch-size``, ``channel.flow`` pausing deliveries). A 0-9 connection
follows the 0-9 specification's text (:data:`SPECIFIED`), a 0-8 connection
the 0-8 specification's (:data:`SPECIFIED_0_8`), which differs from 0-9's in
two rules.

Every rule where they differ is one field of :class:`Dialect`; the
channel, the connection and the model read the field instead of testing the
protocol version. ``docs/broker.rst`` (*Two dialects*) tabulates them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields, replace
from typing import Iterable, Mapping, Optional

from txamqp09.wire import _amqp0_9_1
from txamqp09.wire.errors import AMQPError
from txamqp09.wire.versions import AMQP0_8, AMQP0_9_1, ProtocolVersion

__all__ = [
    "Dialect", "DefaultExchangeBinding", "RABBITMQ", "SPECIFIED", "SPECIFIED_0_8", "CODE_NAMES", "dialect_for",
]

#: RabbitMQ's name of each reply code, as its reply texts start with it.
CODE_NAMES: Mapping[int, str] = {
    code: reply.name.upper().replace("-", "_") for code, reply in _amqp0_9_1.REPLY_CODES.items()
}


class DefaultExchangeBinding(enum.Enum):
    """What queue.bind and queue.unbind naming the default exchange ``""`` do."""

    #: 403 access-refused (RabbitMQ): every queue is bound to it by its name already.
    REFUSED = "refused"
    #: 530 not-allowed, a connection exception (0-8): its default exchange
    #: is internal and takes no explicit bindings (rule amq_exchange_22),
    #: and binding to an internal exchange is 530 (amq_queue_17).
    INTERNAL = "internal"
    #: A binding like any other (0-9): the default exchange routes by the
    #: binding's key as well as by queue names (the scenario of its rule
    #: ``default-exchange`` binds with no exchange name and publishes).
    BOUND = "bound"


@dataclass(frozen=True)
class Dialect:
    """The rules on which RabbitMQ 3.10 and the 0-8/0-9 specifications differ.

    Each boolean field names one rule; its comment says what ``True``
    means, which is what RabbitMQ 3.10 does (the 0-9 specification does the
    opposite of each; 0-8's agrees with RabbitMQ on
    :attr:`exclusive_elsewhere_locked`).
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
    #: queue.bind and queue.unbind naming the default exchange ``""``.
    default_exchange_binding: DefaultExchangeBinding
    #: tx.rollback leaves deliveries acknowledged inside the transaction
    #: unacknowledged; otherwise they are delivered again.
    rollback_keeps_acked: bool
    #: A method of another class on channel 0 is 504 and a connection
    #: method on another channel 503; otherwise 503 and 504. A negotiation
    #: method after connection.open is 504; otherwise 503.
    misplaced_methods_as_rabbitmq: bool
    #: queue.declare of another connection's exclusive queue is 405, a
    #: channel exception (RabbitMQ; 0-8's rule amq_queue_04 asks for a
    #: channel exception); otherwise 504, a connection exception (0-9's
    #: rule names channel-error).
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


def _every_rule(name: str, follows: bool, default_exchange_binding: DefaultExchangeBinding) -> Dialect:
    """A dialect whose every boolean rule is *follows*: the two rule books
    differ on each, RabbitMQ's side being ``True``."""
    rules = {
        field.name: follows for field in fields(Dialect) if field.name not in ("name", "default_exchange_binding")
    }
    return Dialect(name=name, default_exchange_binding=default_exchange_binding, **rules)


#: RabbitMQ 3.10's rules: every 0-9-1 connection.
RABBITMQ = _every_rule("RabbitMQ 3.10", True, DefaultExchangeBinding.REFUSED)

#: The 0-9 specification's rules.
SPECIFIED = _every_rule("0-9 specification", False, DefaultExchangeBinding.BOUND)

#: The 0-8 specification's rules: 0-9's but two.
SPECIFIED_0_8 = replace(
    SPECIFIED,
    name="0-8 specification",
    exclusive_elsewhere_locked=True,
    default_exchange_binding=DefaultExchangeBinding.INTERNAL,
)


def dialect_for(version: ProtocolVersion) -> Dialect:
    """The rules a connection speaking *version* follows."""
    if version is AMQP0_9_1:
        return RABBITMQ
    return SPECIFIED_0_8 if version is AMQP0_8 else SPECIFIED
