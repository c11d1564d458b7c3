"""Virtual hosts and the broker that holds them.

A :class:`VirtualHost` owns exchanges, queues and bindings, and performs the
exchange and queue methods with the checks and reply codes RabbitMQ users
know: 404 for what does not exist, 406 for an inequivalent redeclaration,
405 for another connection's exclusive queue, 403 for the reserved ``amq.``
names and the default exchange, 503 for an unknown exchange type. Deleting
what does not exist succeeds, as in RabbitMQ. Where the 0-8/0-9
specifications rule otherwise, the methods take the declaring connection's
:class:`~txamqp09.broker.dialects.Dialect`. Texts are RabbitMQ's; advice
goes into each error's ``hint``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Mapping, Optional, Sequence, Union

from txamqp09.broker.model.exchange import (
    EXCHANGE_TYPES,
    Binding,
    DirectExchange,
    Exchange,
)
from txamqp09.broker.dialects import RABBITMQ, DefaultExchangeBinding, Dialect
from txamqp09.broker.model.arguments import CLASSIC, STREAM, field_type
from txamqp09.broker.model.clock import Clock
from txamqp09.broker.model.message import Message
from txamqp09.broker.model.policy import PolicySet
from txamqp09.broker.model.names import unique_name
from txamqp09.broker.model.queue import Queue, QueueOwner
from txamqp09.broker.model.replies import REPLY_NAME_PREFIX, Replies
from txamqp09.broker.model.routing import freeze
from txamqp09.broker.model.stats import ChannelCounters, ChurnCounters, QueueCounters
from txamqp09.broker.model.store import Persistence, restored_message
from txamqp09.broker.model.stream import (
    EQUIVALENT_ARGUMENTS as _EQUIVALENT_STREAM_ARGUMENTS,
    StreamQueue,
    check_stream_declaration,
    is_stream,
)
from txamqp09.store.interface import (
    DurableBinding,
    DurableExchange,
    DurableQueue,
    LogSegment,
    Recovered,
    StoredMessage,
)
from txamqp09.wire.fields import field_text
from txamqp09.wire.errors import (
    AccessRefused,
    ChannelError,
    CommandInvalid,
    NotAllowed,
    NotFound,
    PreconditionFailed,
    ResourceLocked,
)

__all__ = ["Broker", "VirtualHost", "DefaultExchange", "STANDARD_EXCHANGES"]

#: The exchanges every virtual host has, by name.
STANDARD_EXCHANGES = {
    "amq.direct": "direct",
    "amq.fanout": "fanout",
    "amq.topic": "topic",
    "amq.headers": "headers",
    "amq.match": "headers",
}
#: Queue arguments compared when a queue is declared again (as RabbitMQ
#: does; others may differ). ``x-queue-type`` is compared too, absent
#: meaning classic.
_EQUIVALENT_QUEUE_ARGUMENTS = (
    "x-expires",
    "x-message-ttl",
    "x-dead-letter-exchange",
    "x-dead-letter-routing-key",
    "x-max-length",
    "x-max-length-bytes",
    "x-max-priority",
    "x-overflow",
    "x-queue-mode",
    "x-queue-version",
    "x-queue-master-locator",
    "x-single-active-consumer",
    "x-delivery-limit",
)
#: Exchange arguments compared when an exchange is declared again.
_EQUIVALENT_EXCHANGE_ARGUMENTS = ("alternate-exchange",)


class DefaultExchange(DirectExchange):
    """The nameless exchange: routes to the queue named by the routing key,
    and by the keys of explicit bindings (only 0-9 connections make them:
    :class:`~txamqp09.broker.dialects.DefaultExchangeBinding`). A routing
    key that is a direct reply-to name delivers the message to its channel
    (see :mod:`.replies`) and routes it nowhere.
    """

    def __init__(self, queues: Mapping[str, Queue], replies: Replies) -> None:
        super().__init__("", durable=True)
        self._queues = queues
        self._replies = replies

    def route(self, message: Message) -> Sequence[Queue]:
        key = message.origin[1]  # the routing key
        queue = self._queues.get(key)
        if queue is None and key.startswith(REPLY_NAME_PREFIX):
            self._replies.route(key, message)
        if self._routes:
            return self._with_bindings(queue, key)
        return queue.route if queue is not None else ()

    def _with_bindings(self, queue: Optional[Queue], key: str) -> Sequence[Queue]:
        """The queue named *key* (if any) and the queues bound with *key*, each once."""
        bound = self._routes.get(key, ())
        if queue is None or queue in bound:
            return bound
        return (queue, *bound)


def _text(value: Any) -> str:
    """A flag or argument value as RabbitMQ's texts print it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(field_text(value))


def _typed(value: Any) -> str:
    """An argument that one side lacks, as RabbitMQ's texts show it."""
    if value is None:
        return "none"
    return f"the value '{_text(value)}' of type '{field_type(value)}'"


def _reserved(name: str) -> bool:
    return name.startswith("amq.")


def _default_exchange_refused() -> AccessRefused:
    """403 for a method the default exchange does not take."""
    return AccessRefused(
        "operation not permitted on the default exchange",
        hint="every queue is bound to it by its name already",
    )


def _kept(binding: Binding) -> bool:
    """Whether *binding* joins entities that survive a restart."""
    destination = binding.destination
    if isinstance(destination, Queue):
        return binding.source.durable and destination.stored
    return binding.source.durable and destination.durable


class VirtualHost:
    """A namespace of exchanges and queues.

    :param persistence: keeps durable definitions and persistent messages
        (None: nothing is kept).
    :param clock: the time source of message TTLs and queue expiry.
    :param churn: counts queues declared, created and deleted (the
        broker's, shared by its virtual hosts; a new one if omitted).
    :param replies: the direct reply-to names in use (the broker's, shared
        by its virtual hosts; a new one if omitted).
    """

    def __init__(
        self,
        name: str,
        persistence: Optional[Persistence] = None,
        clock: Optional[Clock] = None,
        churn: Optional[ChurnCounters] = None,
        replies: Optional[Replies] = None,
    ) -> None:
        self.name = name
        self.persistence = persistence
        self.clock = clock
        self.churn = churn if churn is not None else ChurnCounters()
        self.replies = replies if replies is not None else Replies()
        #: What the closed channels of this vhost counted.
        self.retired = ChannelCounters()
        #: What its deleted queues counted, by queue type.
        self.retired_queues: dict[str, QueueCounters] = {}
        self.queues: dict[str, Queue] = {}
        #: Its policies and operator policies (see :meth:`apply_policies`).
        self.policies = PolicySet()
        #: Its ``max-queues`` limit (None: no limit).
        self.max_queues: Optional[int] = None
        #: Called with each exchange or queue declared (True) or deleted
        #: (False) here (the federation service's).
        self.entity_watchers: list[Callable[[Union[Exchange, Queue], bool], None]] = []
        self.default_exchange = DefaultExchange(self.queues, self.replies)
        self.exchanges: dict[str, Exchange] = {"": self.default_exchange}
        for exchange_name, kind in STANDARD_EXCHANGES.items():
            self.exchanges[exchange_name] = EXCHANGE_TYPES[kind](exchange_name, durable=True)

    # -- routing -------------------------------------------------------------

    def route(self, exchange: Exchange, message: Message) -> Sequence[Queue]:
        """The queues *message* published to *exchange* reaches."""
        queues = exchange.route(message)
        if exchange.exchange_bindings or not queues:
            return self.follow(exchange, queues, message)
        return queues

    def follow(self, source: Exchange, first: Sequence[Any], message: Message) -> tuple[Queue, ...]:
        """The queues reached from *source* through exchange-to-exchange
        bindings and alternate exchanges.

        *first* is what *source* routes to directly. An exchange that routes
        the message nowhere passes it to its alternate exchange, if that
        exists. Every exchange is visited once, so cycles end, and every
        queue appears once.
        """
        queues: dict[Queue, None] = {}
        seen = {source}
        pending = list(reversed(self._or_alternate(source, first)))
        while pending:
            destination = pending.pop()
            if isinstance(destination, Queue):
                queues[destination] = None
            elif destination not in seen:
                seen.add(destination)
                pending.extend(reversed(self._or_alternate(destination, destination.route(message))))
        return tuple(queues)

    def _or_alternate(self, exchange: Exchange, destinations: Sequence[Any]) -> Sequence[Any]:
        """*destinations*, or *exchange*'s alternate exchange when there are none."""
        if destinations or exchange.alternate is None:
            return destinations
        alternate = self.exchanges.get(exchange.alternate)
        return () if alternate is None else (alternate,)

    # -- exchanges -----------------------------------------------------------

    def exchange(self, name: str) -> Exchange:
        """The exchange called *name*.

        :raises NotFound: there is none (404).
        """
        exchange = self.exchanges.get(name)
        if exchange is None:
            raise NotFound(f"no exchange {name!r} in vhost {self.name!r}")
        return exchange

    def declare_exchange(
        self,
        name: str,
        kind: str,
        *,
        passive: bool = False,
        durable: bool = False,
        auto_delete: bool = False,
        internal: bool = False,
        arguments: Optional[Mapping[str, Any]] = None,
        dialect: Dialect = RABBITMQ,
    ) -> Exchange:
        """exchange.declare: the existing exchange if equivalent, else a new one.

        :param dialect: the rules of the declaring connection (how a
            redeclaration is compared, whether the default exchange may be
            declared passively).
        """
        if passive:
            if not name and dialect.passive_default_exchange_refused:
                raise _default_exchange_refused()
            return self.exchange(name)
        if not name:
            raise _default_exchange_refused()
        cls = EXCHANGE_TYPES.get(kind)
        if cls is None:
            raise CommandInvalid(
                f"unknown exchange type {kind!r}",
                hint="this broker knows " + ", ".join(sorted(EXCHANGE_TYPES)),
            )
        existing = self.exchanges.get(name)
        if existing is not None:
            what = f"exchange {name!r}"
            if kind != existing.kind and not dialect.exchange_type_conflict_soft:
                raise NotAllowed(
                    f"cannot redeclare {what} in vhost {self.name!r} of type "
                    f"{existing.kind!r} with type {kind!r}"
                )
            self._equivalent(what, "type", kind, existing.kind)
            if dialect.redeclare_compares_flags:
                self._equivalent(what, "durable", durable, existing.durable)
                self._equivalent(what, "auto_delete", auto_delete, existing.auto_delete)
            self._equivalent(what, "internal", internal, existing.internal)
            given = dict(arguments or {})
            for argument in _EQUIVALENT_EXCHANGE_ARGUMENTS:
                self._equivalent_argument(
                    what, argument, given.get(argument), existing.arguments.get(argument)
                )
            return existing
        if _reserved(name):
            raise AccessRefused(
                f"exchange name {name!r} contains reserved prefix 'amq.*'",
                hint="choose another name",
            )
        exchange = self.exchanges[name] = cls(
            name, durable=durable, auto_delete=auto_delete, internal=internal, arguments=arguments
        )
        if self.policies:
            self.policies.apply_to_exchange(exchange)
        if durable and self.persistence is not None:
            self.persistence.exchange_added(self, exchange)
        self._tell_watchers(exchange, True)
        return exchange

    def _equivalent(self, what: str, argument: str, received: Any, current: Any) -> None:
        """406 unless a flag or an argument present on both sides is the same."""
        if received != current:
            self._inequivalent(what, argument, f"'{_text(received)}'", f"'{_text(current)}'")

    def _equivalent_argument(self, what: str, argument: str, received: Any, current: Any) -> None:
        """406 unless an argument is the same (or absent) on both sides."""
        if received is None or current is None:
            if received is not current:
                self._inequivalent(what, argument, _typed(received), _typed(current))
        else:
            self._equivalent(what, argument, received, current)

    def _inequivalent(self, what: str, argument: str, received: str, current: str) -> None:
        raise PreconditionFailed(
            f"inequivalent arg {argument!r} for {what} in vhost {self.name!r}: "
            f"received {received} but current is {current}"
        )

    def delete_exchange(self, name: str, *, if_unused: bool = False, dialect: Dialect = RABBITMQ) -> None:
        """exchange.delete; an exchange that does not exist counts as deleted
        (404 in the specifications' dialect)."""
        if not name:
            raise _default_exchange_refused()
        if _reserved(name):
            raise AccessRefused(
                f"deletion of system exchange {name!r} in vhost {self.name!r} not allowed"
            )
        exchange = self.exchanges.get(name)
        if exchange is None:
            if dialect.missing_delete_ok:
                return
            exchange = self.exchange(name)
        if if_unused and exchange.bindings:
            raise PreconditionFailed(
                f"exchange {name!r} in vhost {self.name!r} in use",
                hint=f"it has {len(exchange.bindings)} bindings",
            )
        self._remove_exchange(exchange)

    def _remove_exchange(self, exchange: Exchange) -> None:
        del self.exchanges[exchange.name]
        for binding in list(exchange.bindings.values()):
            self._unbind(binding)
        for binding in list(exchange.inbound):
            self._unbind(binding)
        if exchange.durable and self.persistence is not None:
            self.persistence.exchange_removed(self, exchange)
        self._tell_watchers(exchange, False)

    def _tell_watchers(self, entity: Union[Exchange, Queue], added: bool) -> None:
        for watcher in self.entity_watchers:
            watcher(entity, added)

    def _bindable(self, name: str) -> Exchange:
        exchange = self.exchange(name)
        if exchange is self.default_exchange:
            raise _default_exchange_refused()
        return exchange

    def bind_exchange(
        self, destination: str, source: str, routing_key: str, arguments: Mapping[str, Any]
    ) -> None:
        """exchange.bind: route messages from *source* to *destination* too."""
        self._bind(self._bindable(source), self._bindable(destination), routing_key, arguments)

    def unbind_exchange(
        self, destination: str, source: str, routing_key: str, arguments: Mapping[str, Any]
    ) -> None:
        """exchange.unbind; a binding, source or destination that does not
        exist counts as removed (as RabbitMQ)."""
        if source in self.exchanges and destination in self.exchanges:
            self._unbind_key(self._bindable(source), self._bindable(destination), routing_key, arguments)
        elif "" in (source, destination):
            raise _default_exchange_refused()

    # -- bindings ------------------------------------------------------------

    def _bind(self, source: Exchange, destination: Any, routing_key: str, arguments: Mapping[str, Any]) -> None:
        binding = self._link(source, destination, routing_key, arguments)
        if binding is not None and self.persistence is not None and _kept(binding):
            self.persistence.binding_added(self, binding)

    def _link(
        self, source: Exchange, destination: Any, routing_key: str, arguments: Mapping[str, Any]
    ) -> Optional[Binding]:
        """Add a binding to the model; None when an identical one exists."""
        binding = Binding(source, destination, routing_key, arguments)
        if not source.bind(binding):
            return None
        if isinstance(destination, Queue):
            destination.bindings[binding] = None
        return binding

    def _unbind_key(self, source: Exchange, destination: Any, routing_key: str, arguments: Mapping[str, Any]) -> None:
        binding = source.bindings.get((destination, routing_key, freeze(dict(arguments))))
        if binding is not None:
            self._unbind(binding)

    def _unbind(self, binding: Binding) -> None:
        source = binding.source
        if source.unbind(binding.key) is None:
            return
        if isinstance(binding.destination, Queue):
            binding.destination.bindings.pop(binding, None)
        if self.persistence is not None and _kept(binding):
            self.persistence.binding_removed(self, binding)
        if source.auto_delete and not source.bindings and self.exchanges.get(source.name) is source:
            self._remove_exchange(source)

    # -- queues --------------------------------------------------------------

    def queue(self, name: str, client: Optional[QueueOwner]) -> Queue:
        """The queue called *name*, if *client* may use it.

        :raises NotFound: there is none (404).
        :raises ResourceLocked: another connection's exclusive queue (405).
        """
        queue = self.queues.get(name)
        if queue is None:
            raise NotFound(f"no queue {name!r} in vhost {self.name!r}")
        if queue.exclusive_owner is not None and queue.exclusive_owner is not client:
            raise self._locked(name)
        return queue

    def reply_queue(self, name: str) -> str:
        """queue.declare of the direct reply-to pseudo-queue or of a reply
        name, which RabbitMQ answers as a passive declaration whatever the
        flags: the name, without CR and LF (both of which it drops).

        :raises NotFound: a reply name whose channel no longer consumes (404).
        """
        name = name.replace("\r", "").replace("\n", "")
        if not self.replies.declared(name):
            raise NotFound(f"no queue {name!r} in vhost {self.name!r}")
        return name

    def _locked(self, name: str) -> ResourceLocked:
        """405 for the exclusive queue *name*."""
        return ResourceLocked(
            f"cannot obtain exclusive access to locked queue {name!r} in vhost {self.name!r}. "
            "It could be originally declared on another connection or the exclusive property "
            "value does not match that of the original declaration."
        )

    def declare_queue(
        self,
        name: str,
        client: QueueOwner,
        *,
        passive: bool = False,
        durable: bool = False,
        exclusive: bool = False,
        auto_delete: bool = False,
        arguments: Optional[Mapping[str, Any]] = None,
        server_named: bool = False,
        dialect: Dialect = RABBITMQ,
    ) -> Queue:
        """queue.declare: the existing queue if equivalent, else a new one.

        An empty *name* gets a generated ``amq.gen-`` name.

        :param server_named: *name* was generated by the broker (the channel
            generates it first so that permissions are checked on it), so
            the reserved ``amq.`` prefix is allowed.
        :param dialect: the rules of the declaring connection (what a
            redeclaration compares, the scope of a reserved name).
        """
        if passive:
            return self.queue(name, client)
        if name in self.queues:
            owner = self.queues[name].exclusive_owner
            if owner is not None and owner is not client and not dialect.exclusive_elsewhere_locked:
                raise ChannelError(f"queue {name!r} in vhost {self.name!r} is exclusive to another connection")
            existing = self.queue(name, client)
            what = f"queue {name!r}"
            if exclusive != existing.exclusive:
                if dialect.exclusive_mismatch_locked:
                    raise self._locked(name)
                self._equivalent(what, "exclusive", exclusive, existing.exclusive)
            if dialect.redeclare_compares_flags:
                if not existing.exclusive:
                    # RabbitMQ does not compare durable for exclusive queues.
                    self._equivalent(what, "durable", durable, existing.durable)
                self._equivalent(what, "auto_delete", auto_delete, existing.auto_delete)
            given = dict(arguments or {})
            queue_type = field_text(given.get("x-queue-type", CLASSIC))
            if queue_type != existing.settings.queue_type:
                self._equivalent_argument(
                    what, "x-queue-type", given.get("x-queue-type"), existing.arguments.get("x-queue-type")
                )
            compared: tuple[str, ...] = _EQUIVALENT_QUEUE_ARGUMENTS
            if existing.settings.queue_type == STREAM:
                compared += _EQUIVALENT_STREAM_ARGUMENTS
            for argument in compared:
                self._equivalent_argument(
                    what, argument, given.get(argument), existing.arguments.get(argument)
                )
            existing.used()
            self.churn.queue_declared += 1
            return existing
        if self.max_queues is not None and len(self.queues) >= self.max_queues:
            raise PreconditionFailed(
                f"cannot declare queue '{name}': queue limit in vhost '{self.name}' "
                f"({self.max_queues}) is reached"
            )
        if not name:
            name = unique_name("amq.gen-")
        elif _reserved(name) and not server_named:
            refusal = AccessRefused if dialect.reserved_queue_name_soft else NotAllowed
            raise refusal(
                f"queue name {name!r} contains reserved prefix 'amq.*'",
                hint="choose another name or declare with an empty name to get a generated one",
            )
        queue: Queue
        if is_stream(arguments):
            check_stream_declaration(
                self, name, durable=durable, exclusive=exclusive, auto_delete=auto_delete,
                arguments=arguments or {},
            )
            queue = StreamQueue(self, name, arguments=arguments)
        else:
            queue = Queue(
                self,
                name,
                durable=durable,
                exclusive_owner=client if exclusive else None,
                auto_delete=auto_delete,
                arguments=arguments,
            )
        self.queues[name] = queue
        if self.policies:
            self.policies.apply_to_queue(queue, queue.settings.queue_type)
        self.churn.queue_declared += 1
        self.churn.queue_created += 1
        if exclusive:
            client.exclusive_queues[queue] = None
        if queue.stored:
            assert self.persistence is not None
            self.persistence.queue_added(queue)
        self._tell_watchers(queue, True)
        return queue

    def bind_queue(
        self, queue: str, exchange: str, routing_key: str, arguments: Mapping[str, Any], client: QueueOwner,
        dialect: Dialect = RABBITMQ,
    ) -> None:
        """queue.bind: route messages from *exchange* to *queue*.

        Binding to the default exchange is 403, 530 or an explicit binding,
        as :attr:`Dialect.default_exchange_binding` says.
        """
        target = self.queue(queue, client)
        source = self._queue_source(exchange, queue, dialect)
        if not dialect.bind_any_exchange:
            if source.internal:
                raise NotAllowed(f"cannot bind queue {queue!r} to internal exchange {exchange!r}")
            if target.durable and not source.durable:
                raise NotAllowed(
                    f"cannot bind durable queue {queue!r} to transient exchange {exchange!r}"
                )
        self._bind(source, target, routing_key, arguments)

    def unbind_queue(
        self, queue: str, exchange: str, routing_key: str, arguments: Mapping[str, Any], client: QueueOwner,
        dialect: Dialect = RABBITMQ,
    ) -> None:
        """queue.unbind; a binding that does not exist counts as removed, and
        so do (in RabbitMQ's dialect) a queue or an exchange that does not exist."""
        missing = queue not in self.queues or (exchange and exchange not in self.exchanges)
        if missing and dialect.missing_delete_ok:
            if not exchange:
                self._queue_source(exchange, queue, dialect)
            return
        target = self.queue(queue, client)
        self._unbind_key(self._queue_source(exchange, queue, dialect), target, routing_key, arguments)

    def _queue_source(self, name: str, queue: str, dialect: Dialect) -> Exchange:
        """The exchange *queue* is bound to or unbound from.

        :raises NotFound: it does not exist (404).
        :raises AccessRefused: it is the default exchange, in RabbitMQ's dialect (403).
        :raises NotAllowed: it is the default exchange, in 0-8's dialect (530).
        """
        if not name:
            rule = dialect.default_exchange_binding
            if rule is DefaultExchangeBinding.BOUND:
                return self.default_exchange
            if rule is DefaultExchangeBinding.INTERNAL:
                raise NotAllowed(
                    f"cannot bind queue {queue!r} to the default exchange",
                    hint="the default exchange is internal: every queue is bound to it by its name, "
                    "and it takes no other bindings",
                )
        return self._bindable(name)

    def purge_queue(self, name: str, client: QueueOwner) -> int:
        """queue.purge: drop the ready messages; how many there were."""
        return self.queue(name, client).purge()

    def delete_queue_named(
        self, name: str, client: QueueOwner, *, if_unused: bool = False, if_empty: bool = False,
        dialect: Dialect = RABBITMQ,
    ) -> int:
        """queue.delete: the number of ready messages deleted with the queue.

        A queue that does not exist counts as deleted (0 messages) in
        RabbitMQ's dialect, and is 404 in the specifications'.
        """
        if name not in self.queues and dialect.missing_delete_ok:
            return 0
        queue = self.queue(name, client)
        if if_unused and queue.consumers:
            raise PreconditionFailed(
                f"queue {name!r} in vhost {self.name!r} in use",
                hint=f"it has {len(queue.consumers)} consumers",
            )
        if if_empty and queue.messages:
            raise PreconditionFailed(
                f"queue {name!r} in vhost {self.name!r} not empty",
                hint=f"it has {len(queue.messages)} ready messages",
            )
        return self.delete_queue(queue)

    def delete_queue(self, queue: Queue) -> int:
        """Remove *queue*, its bindings and consumers; its ready message count."""
        if queue.deleted:
            return 0
        queue.deleted = True
        queue.stop()
        self.churn.queue_deleted += 1
        queue_type = queue.settings.queue_type
        self.retired_queues.setdefault(queue_type, QueueCounters()).add(queue.stats)
        del self.queues[queue.name]
        for binding in list(queue.bindings):
            self._unbind(binding)
        for consumer in list(queue.consumers):
            consumer.session.queue_deleted(consumer)
        queue.consumers.clear()
        if queue.exclusive_owner is not None:
            queue.exclusive_owner.exclusive_queues.pop(queue, None)
        if queue.stored:
            assert self.persistence is not None
            self.persistence.queue_removed(queue)
        self._tell_watchers(queue, False)
        return queue.purge()

    # -- policies ------------------------------------------------------------

    def apply_policies(self) -> None:
        """Apply :attr:`policies` as they are now to every queue and exchange
        (after they changed; new ones get them when declared)."""
        for queue in list(self.queues.values()):
            self.policies.apply_to_queue(queue, queue.settings.queue_type)
        for exchange in self.exchanges.values():
            if exchange is not self.default_exchange:
                self.policies.apply_to_exchange(exchange)

    # -- recovery ------------------------------------------------------------

    def restore(
        self,
        exchanges: Iterable[DurableExchange],
        queues: Iterable[DurableQueue],
        bindings: Iterable[DurableBinding],
        messages: Mapping[str, list[StoredMessage]],
        logs: Mapping[str, list[LogSegment]],
    ) -> None:
        """Rebuild what the message store recovered, without writing it again.

        *messages* are each queue's recovered messages, by queue name, in
        order; each list is emptied once its queue holds the messages, so
        that the store's records do not outlive the restore. *logs* are the
        streams' logs, by queue name.
        """
        for exchange in exchanges:
            cls = EXCHANGE_TYPES.get(exchange.type)
            if cls is not None and not _reserved(exchange.name):
                self.exchanges[exchange.name] = cls(
                    exchange.name, durable=True, auto_delete=exchange.auto_delete,
                    internal=exchange.internal, arguments=exchange.arguments,
                )
        assert self.persistence is not None, "a virtual host without a store has nothing to restore"
        for record in queues:
            if is_stream(record.arguments):
                stream = StreamQueue(self, record.name, arguments=record.arguments)
                stream.restore_log(logs.get(record.name, []))
                self.queues[record.name] = stream
                continue
            queue = self.queues[record.name] = Queue(
                self, record.name, durable=True, auto_delete=record.auto_delete,
                arguments=record.arguments,
            )
            records = messages.get(record.name, [])
            queue.restore(_restored(records, self.persistence), (stored.published for stored in records))
            records.clear()
        for binding in bindings:
            source = self.exchanges.get(binding.source)
            places = self.queues if binding.destination_kind == "queue" else self.exchanges
            destination = places.get(binding.destination)
            if source is not None and destination is not None:
                self._link(source, destination, binding.routing_key, binding.arguments)

    def __repr__(self) -> str:
        return f"<VirtualHost {self.name!r}>"


def _restored(records: Sequence[StoredMessage], persistence: Persistence) -> list[Message]:
    """Model messages for recovered ones, in order (those a standby
    prepared ahead of time as they are), counted by *persistence*."""
    messages = [record.prepared or restored_message(record) for record in records]
    persistence.restored(messages)
    return messages


class Broker:
    """Every virtual host of one broker.

    :param vhosts: the names of the virtual hosts to create.
    :param persistence: keeps durable definitions and persistent messages
        (None: nothing is kept; the broker lives in memory only).
    :param clock: the time source of message TTLs and queue expiry (the
        server passes its reactor when the broker has none).
    """

    def __init__(
        self,
        vhosts: Sequence[str] = ("/",),
        persistence: Optional[Persistence] = None,
        clock: Optional[Clock] = None,
    ) -> None:
        self.persistence = persistence
        self.clock = clock
        #: Connections, channels and queues that came and went.
        self.churn = ChurnCounters()
        #: The direct reply-to names of every virtual host's channels.
        self.replies = Replies()
        self.vhosts: dict[str, VirtualHost] = {}
        for name in vhosts:
            self.add_vhost(name)

    def add_vhost(self, name: str) -> VirtualHost:
        """Create the virtual host *name* (or return the existing one)."""
        vhost = self.vhosts.get(name)
        if vhost is None:
            vhost = self.vhosts[name] = VirtualHost(name, self.persistence, self.clock, self.churn, self.replies)
        return vhost

    def remove_vhost(self, name: str) -> None:
        """Delete the virtual host *name* with its queues (and their messages),
        exchanges and bindings, in the store too; nothing if there is none."""
        vhost = self.vhosts.pop(name, None)
        if vhost is None:
            return
        for queue in list(vhost.queues.values()):
            vhost.delete_queue(queue)
        for exchange in list(vhost.exchanges.values()):
            if exchange.name and vhost.exchanges.get(exchange.name) is exchange:
                vhost._remove_exchange(exchange)

    def use_clock(self, clock: Clock) -> None:
        """Take *clock* as the time source, unless the broker has one already."""
        if self.clock is None:
            self.clock = clock
            for vhost in self.vhosts.values():
                vhost.clock = clock

    def restore(self, recovered: Recovered) -> None:
        """Rebuild what the message store recovered at start-up (before any
        client connects); virtual hosts named there are created if missing.
        The lists of *recovered* messages are emptied on the way."""
        assert self.persistence is not None, "a broker without a store has nothing to restore"
        self.persistence.next_message_id = recovered.next_message_id
        names = {record.vhost for record in recovered.exchanges}
        names.update(record.vhost for record in recovered.queues)
        for name in sorted(names):
            self.add_vhost(name).restore(
                [record for record in recovered.exchanges if record.vhost == name],
                [record for record in recovered.queues if record.vhost == name],
                [record for record in recovered.bindings if record.vhost == name],
                {queue: records for (vhost, queue), records in recovered.messages.items() if vhost == name},
                {queue: segments for (vhost, queue), segments in recovered.logs.items() if vhost == name},
            )
