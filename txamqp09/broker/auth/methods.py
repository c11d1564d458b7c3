"""Which permission and which ticket right each method needs, as a table.

:data:`METHOD_RULES` maps a method's ``NAME`` (``"queue.bind"``) to its
:class:`MethodRule`. The permission checks follow RabbitMQ's table:

=====================  ====================  ===================  ===================
method                 configure             write                read
=====================  ====================  ===================  ===================
exchange.declare       exchange                                   exchange (with AE)
  with alternate-exch.                       AE
exchange.declare       (passive: none)
exchange.delete        exchange
exchange.bind/unbind                         destination          source
queue.declare          queue                                      queue (with DLX)
  with dead-letter ex.                       DLX
queue.declare          (passive: none)
queue.delete           queue
queue.bind/unbind                            queue                exchange
queue.purge                                                       queue
basic.publish                                exchange
basic.get/consume                                                 queue
=====================  ====================  ===================  ===================

On a topic exchange, topic permissions apply too (RabbitMQ's): publishing
needs the topic *write* expression to match the routing key, and binding or
unbinding a queue or an exchange from a topic exchange needs the *read*
expression to match the binding key (see :data:`TOPIC_CHECKS`).

The ticket rights follow the 0-9 specification: declare and delete need
*active* (declare with ``passive`` set needs *passive*), queue.bind and
queue.unbind need *active* on the queue's realm, purge, get and consume need
*read*, publish needs *write*. The file, stream and message classes of 0-8
and 0-9 follow basic (message.transfer publishes to its ``destination``
exchange; message.get and message.consume read their queue); tunnel.request,
whose exchange is a content property, is checked as a basic.publish by its
handler.

:class:`AccessGuard` applies the table for one connection: one call per
method, ``guard.check(channel, method)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from txamqp09.broker.auth.cred import IAMQPUser
from txamqp09.broker.auth.permissions import Permission, ResourceKind, checked_name
from txamqp09.broker.auth.realms import Right
from txamqp09.broker.auth.tickets import TicketTable
from txamqp09.broker.model.arguments import field_type
from txamqp09.wire.errors import AccessRefused, AMQPError, PreconditionFailed
from txamqp09.wire.fields import field_text

__all__ = [
    "ALTERNATE_EXCHANGE",
    "DEAD_LETTER_EXCHANGE",
    "METHOD_RULES",
    "AccessGuard",
    "MethodRule",
    "PermissionCheck",
    "TicketCheck",
]

#: The exchange.declare argument naming an alternate exchange.
ALTERNATE_EXCHANGE = "alternate-exchange"
#: The queue.declare argument naming a dead-letter exchange.
DEAD_LETTER_EXCHANGE = "x-dead-letter-exchange"

_ARGUMENT = "arguments/"


@dataclass(frozen=True)
class PermissionCheck:
    """One vhost-permission check a method needs.

    :ivar permission: configure, write or read.
    :ivar kind: the kind of resource checked.
    :ivar source: the method field naming the resource, or ``arguments/KEY``
        for a name in the method's arguments table (checked only when present).
    :ivar only_with: check only when the method's arguments hold this key.
    """

    permission: Permission
    kind: ResourceKind
    source: str
    only_with: str | None = None


@dataclass(frozen=True)
class TicketCheck:
    """The access-ticket right a method needs on the realm of one resource."""

    right: Right
    kind: ResourceKind
    source: str


@dataclass(frozen=True)
class MethodRule:
    """Everything a method needs.

    :ivar permissions: vhost-permission checks, all of which must pass.
    :ivar ticket: the ticket check, for methods carrying a ticket.
    :ivar passive_field: a bit field which, when set, makes the method a
        query: no permission is needed and the ticket right becomes passive.
    """

    permissions: tuple[PermissionCheck, ...] = ()
    ticket: TicketCheck | None = None
    passive_field: str | None = None


_C, _W, _R = Permission.CONFIGURE, Permission.WRITE, Permission.READ
_EX, _Q = ResourceKind.EXCHANGE, ResourceKind.QUEUE
_AE, _DLX = _ARGUMENT + ALTERNATE_EXCHANGE, _ARGUMENT + DEAD_LETTER_EXCHANGE


def _rule(
    *checks: tuple[Any, ...], ticket: tuple[Right, ResourceKind, str] | None = None, passive_field: str | None = None
) -> MethodRule:
    """A MethodRule from ``(permission, kind, source[, only_with])`` and ``(right, kind, source)`` tuples."""
    return MethodRule(
        tuple(PermissionCheck(*check) for check in checks),
        TicketCheck(*ticket) if ticket is not None else None,
        passive_field,
    )


_ACTIVE_QUEUE = (Right.ACTIVE, _Q, "queue")
_READ_QUEUE = (Right.READ, _Q, "queue")
_WRITE_EXCHANGE = (Right.WRITE, _EX, "exchange")

#: The checks of every method that needs any, by method NAME.
METHOD_RULES: Mapping[str, MethodRule] = {
    "exchange.declare": _rule(
        (_C, _EX, "exchange"), (_W, _EX, _AE), (_R, _EX, "exchange", ALTERNATE_EXCHANGE),
        ticket=(Right.ACTIVE, _EX, "exchange"), passive_field="passive",
    ),
    "exchange.delete": _rule((_C, _EX, "exchange"), ticket=(Right.ACTIVE, _EX, "exchange")),
    "exchange.bind": _rule((_W, _EX, "destination"), (_R, _EX, "source")),
    "exchange.unbind": _rule((_W, _EX, "destination"), (_R, _EX, "source")),
    "queue.declare": _rule(
        (_C, _Q, "queue"), (_W, _EX, _DLX), (_R, _Q, "queue", DEAD_LETTER_EXCHANGE),
        ticket=_ACTIVE_QUEUE, passive_field="passive",
    ),
    "queue.delete": _rule((_C, _Q, "queue"), ticket=_ACTIVE_QUEUE),
    "queue.bind": _rule((_W, _Q, "queue"), (_R, _EX, "exchange"), ticket=_ACTIVE_QUEUE),
    "queue.unbind": _rule((_W, _Q, "queue"), (_R, _EX, "exchange"), ticket=_ACTIVE_QUEUE),
    "queue.purge": _rule((_R, _Q, "queue"), ticket=_READ_QUEUE),
    "basic.publish": _rule((_W, _EX, "exchange"), ticket=_WRITE_EXCHANGE),
    "basic.get": _rule((_R, _Q, "queue"), ticket=_READ_QUEUE),
    "basic.consume": _rule((_R, _Q, "queue"), ticket=_READ_QUEUE),
    "file.publish": _rule((_W, _EX, "exchange"), ticket=_WRITE_EXCHANGE),
    "file.consume": _rule((_R, _Q, "queue"), ticket=_READ_QUEUE),
    "stream.publish": _rule((_W, _EX, "exchange"), ticket=_WRITE_EXCHANGE),
    "stream.consume": _rule((_R, _Q, "queue"), ticket=_READ_QUEUE),
    "message.transfer": _rule((_W, _EX, "destination"), ticket=(Right.WRITE, _EX, "destination")),
    "message.get": _rule((_R, _Q, "queue"), ticket=_READ_QUEUE),
    "message.consume": _rule((_R, _Q, "queue"), ticket=_READ_QUEUE),
}

#: Methods checked against topic permissions: (exchange field, routing key
#: field, topic permission), by method NAME.
TOPIC_CHECKS: Mapping[str, tuple[str, str, str]] = {
    "basic.publish": ("exchange", "routing_key", "write"),
    "queue.bind": ("exchange", "routing_key", "read"),
    "queue.unbind": ("exchange", "routing_key", "read"),
    "exchange.bind": ("source", "routing_key", "read"),
    "exchange.unbind": ("source", "routing_key", "read"),
}

_REQUEST_RIGHTS = tuple(Right)
_PUBLISH = METHOD_RULES["basic.publish"]
#: A method's name, class id and method id, for error replies.
_Ids = tuple[str, int, int]
_PUBLISH_IDS: _Ids = ("basic.publish", 60, 40)


def _resource(method: Any, source: str, queue: str | None, vhost: str) -> str | None:
    """The resource name ``source`` gives for ``method`` in *vhost*, or None if absent."""
    if source.startswith(_ARGUMENT):
        key = source[len(_ARGUMENT):]
        value = field_text((method.arguments or {}).get(key))
        if value is None or isinstance(value, str):
            return value
        declared = f"queue {queue or method.queue!r}" if hasattr(method, "queue") else f"exchange {method.exchange!r}"
        raise PreconditionFailed(
            f"invalid type {field_type(value)!r} for arg {key!r} in {declared} in vhost {vhost!r}",
            method.CLASS_ID,
            method.METHOD_ID,
            hint=f"it must be a string naming an exchange, not {value!r}",
        )
    if source == "queue" and queue is not None:
        return queue
    return str(getattr(method, source))


class AccessGuard:
    """Checks one connection's methods against permissions and tickets.

    :param user: the connection's avatar.
    :param vhost: the virtual host the connection opened.
    :param tickets: the connection's ticket table.
    """

    def __init__(self, user: IAMQPUser, vhost: str, tickets: TicketTable) -> None:
        self.user = user
        self.vhost = vhost
        self.tickets = tickets
        #: The vhost's exchanges by name (objects with a ``kind``), for topic
        #: permissions; the server sets it once the vhost is open.
        self.exchanges: Mapping[str, Any] = {}

    def check(self, channel: int, method: Any, queue: str | None = None) -> None:
        """Raise unless the user may run ``method`` on ``channel``.

        :param queue: the queue name the broker will act on, when it differs
            from ``method.queue`` (an empty name resolved to the channel's last
            declared queue, or the name generated for queue.declare).
        :raises AccessRefused: a permission or ticket check failed (channel).
        :raises NotAllowed: the ticket belongs to another channel (connection).
        :raises PreconditionFailed: an exchange argument is not a string.
        """
        rule = METHOD_RULES.get(method.NAME)
        if rule is None:
            return
        passive = rule.passive_field is not None and getattr(method, rule.passive_field)
        ids = method.NAME, method.CLASS_ID, method.METHOD_ID
        if rule.ticket is not None:
            name = _resource(method, rule.ticket.source, queue, self.vhost)
            assert name is not None
            right = Right.PASSIVE if passive else rule.ticket.right
            self._check_ticket(channel, getattr(method, "ticket", 0), rule.ticket.kind, name, right, ids)
        if passive:
            return
        arguments = getattr(method, "arguments", None) or {}
        for check in rule.permissions:
            if check.only_with is None or check.only_with in arguments:
                name = _resource(method, check.source, queue, self.vhost)
                if name is not None:
                    self._check_permission(check, name, ids)
        topic = TOPIC_CHECKS.get(method.NAME)
        if topic is not None:
            exchange, key, permission = topic
            self.check_topic(getattr(method, exchange), permission, getattr(method, key), ids)

    def check_topic(self, exchange: str, permission: str, routing_key: str, ids: _Ids = _PUBLISH_IDS) -> None:
        """Refuse (403) a routing key the user's topic permission on *exchange*,
        a topic exchange, does not allow for *permission* (``write`` or ``read``)."""
        database = self.tickets.database
        if not database.topic_permissions:
            return
        target = self.exchanges.get(exchange)
        if target is None or target.kind != "topic":
            return
        if not database.topic_allows(self.user.name, self.vhost, exchange, permission, routing_key):
            raise AccessRefused(
                f"ACCESS_REFUSED - access to topic '{routing_key}' in exchange '{exchange}' in "
                f"vhost '{self.vhost}' refused for user '{self.user.name}'",
                ids[1],
                ids[2],
            )

    def check_publish(self, channel: int, ticket: int, exchange: str, routing_key: str = "") -> None:
        """basic.publish's checks from its decoded fields, for the publish fast path.

        The same checks as ``check(channel, BasicPublish(...))``, without
        building a method object. The server channel remembers a passed
        check until ``tickets.database.generation`` or
        ``tickets.usage.generation`` changes, so that repeated publishes cost
        one lookup.
        """
        assert _PUBLISH.ticket is not None
        self._check_ticket(channel, ticket, _EX, exchange, _PUBLISH.ticket.right, _PUBLISH_IDS)
        self._check_permission(_PUBLISH.permissions[0], exchange, _PUBLISH_IDS)
        self.check_topic(exchange, "write", routing_key)

    def _check_ticket(
        self, channel: int, ticket: int, kind: ResourceKind, name: str, right: Right, ids: _Ids
    ) -> None:
        try:
            self.tickets.check_ticket(channel, ticket, kind, name, right)
        except AMQPError as error:
            error.class_id, error.method_id = ids[1], ids[2]
            raise

    def _check_permission(self, check: PermissionCheck, name: str, ids: _Ids) -> None:
        if self.user.allows(check.permission, self.vhost, name):
            return
        raise AccessRefused(
            f"ACCESS_REFUSED - access to {check.kind.value} {checked_name(name)!r} in vhost "
            f"{self.vhost!r} refused for user {self.user.name!r}: {ids[0]} needs "
            f"{check.permission.value} permission on it",
            ids[1],
            ids[2],
        )

    def request_ticket(self, channel: int, method: Any) -> int:
        """Grant the ticket an access.request asks for; its number for access.request-ok."""
        wanted = [right for right in _REQUEST_RIGHTS if getattr(method, right.value)]
        return self.tickets.request(channel, method.realm, wanted)

    def channel_closed(self, channel: int) -> None:
        """Forget a closed channel's tickets (the server closes every channel
        of a connection that is closed or lost, so this is the only way out)."""
        self.tickets.channel_closed(channel)
