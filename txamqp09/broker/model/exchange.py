"""Exchanges: where messages are published, and how they pick destinations.

An exchange holds the bindings whose source it is. A destination is a queue
or, for exchange-to-exchange bindings, another exchange; :meth:`Exchange.route`
returns the destinations one message reaches directly, each once, and the
virtual host follows exchange destinations further (see
:meth:`~txamqp09.broker.model.vhost.VirtualHost.route`).

Each type keeps its bindings in the shape its routing needs: a dict by routing
key (direct), a tuple (fanout), a trie with a result cache (topic), a list of
argument tables (headers).
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Hashable, Mapping, Optional, Sequence

from txamqp09.broker.model.arguments import string_argument
from txamqp09.broker.model.policy import exchange_alternate
from txamqp09.broker.model.message import Message
from txamqp09.broker.model.stats import ExchangeCounters
from txamqp09.broker.model.routing import (
    TopicTrie,
    freeze,
    headers_match,
    parse_x_match,
)

__all__ = [
    "Binding",
    "Exchange",
    "DirectExchange",
    "FanoutExchange",
    "TopicExchange",
    "HeadersExchange",
    "EXCHANGE_TYPES",
]

#: Destinations a message reaches from one exchange (queues and exchanges).
Destinations = Sequence[Any]


class Binding:
    """A route from a source exchange to a queue or exchange.

    Two bindings with the same source, destination, routing key and
    arguments are the same binding.
    """

    __slots__ = ("source", "destination", "routing_key", "arguments", "key")

    def __init__(
        self, source: Exchange, destination: Any, routing_key: str, arguments: Mapping[str, Any]
    ) -> None:
        self.source = source
        self.destination = destination
        self.routing_key = routing_key
        self.arguments = dict(arguments)
        #: Identity of the binding within its source.
        self.key: Hashable = (destination, routing_key, freeze(self.arguments))

    def __repr__(self) -> str:
        return (
            f"<Binding {self.source.name!r} -> {self.destination.name!r} "
            f"key={self.routing_key!r} arguments={self.arguments!r}>"
        )


class Exchange:
    """An exchange of a virtual host; subclasses implement one routing type.

    :ivar name: the exchange name.
    :ivar durable: survives a broker restart (kept by the store).
    :ivar auto_delete: deleted when its last binding (as source) goes.
    :ivar internal: clients may not publish to it, only other exchanges.
    :ivar arguments: the declare arguments (``alternate-exchange`` names
        the exchange that takes unroutable messages).
    """

    #: The type name clients declare.
    kind: ClassVar[str] = ""
    #: Called with each binding added (True) or removed (False), after the
    #: change; a federation link keeps its upstream in step through it.
    #: Bindings change rarely: routing never reads this.
    binding_watchers: tuple[Callable[[Binding, bool], None], ...] = ()

    def __init__(
        self,
        name: str,
        *,
        durable: bool = False,
        auto_delete: bool = False,
        internal: bool = False,
        arguments: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self.name = name
        self.durable = durable
        self.auto_delete = auto_delete
        self.internal = internal
        self.arguments = dict(arguments or {})
        #: The exchange that takes messages this one routes nowhere.
        self.alternate = string_argument(self.arguments, "alternate-exchange", f"exchange {name!r}")
        #: Bindings whose source this exchange is, by :attr:`Binding.key`.
        self.bindings: dict[Hashable, Binding] = {}
        #: Messages in and routed out (see :mod:`.stats`).
        self.stats = ExchangeCounters()
        #: Bindings whose destination this exchange is.
        self.inbound: dict[Binding, None] = {}
        #: How many of :attr:`bindings` lead to exchanges: routing follows
        #: them only when there are some.
        self.exchange_bindings = 0
        #: The names of the policy and operator policy that apply (or None),
        #: and their merged definition.
        self.policy: Optional[str] = None
        self.operator_policy: Optional[str] = None
        self.effective_policy: dict[str, Any] = {}

    def apply_policy(
        self, policy: Optional[str], operator_policy: Optional[str], effective: Mapping[str, Any]
    ) -> None:
        """Apply the named policies whose merged definition is *effective*:
        its ``alternate-exchange``, unless the exchange was declared with one."""
        self.policy, self.operator_policy = policy, operator_policy
        self.effective_policy = dict(effective)
        self.alternate = exchange_alternate(self.arguments, effective)

    def bind(self, binding: Binding) -> bool:
        """Add *binding*; False when an identical one exists already."""
        if binding.key in self.bindings:
            return False
        self.check(binding)
        self.bindings[binding.key] = binding
        if isinstance(binding.destination, Exchange):
            self.exchange_bindings += 1
            binding.destination.inbound[binding] = None
        self.added(binding)
        for watcher in self.binding_watchers:
            watcher(binding, True)
        return True

    def unbind(self, key: Hashable) -> Optional[Binding]:
        """Remove the binding with *key*; the binding, or None if absent."""
        binding = self.bindings.pop(key, None)
        if binding is None:
            return None
        if isinstance(binding.destination, Exchange):
            self.exchange_bindings -= 1
            binding.destination.inbound.pop(binding, None)
        self.removed(binding)
        for watcher in self.binding_watchers:
            watcher(binding, False)
        return binding

    def check(self, binding: Binding) -> None:
        """Refuse a binding this type cannot use (raises an AMQPError)."""

    def added(self, binding: Binding) -> None:
        """Index a new binding for routing."""
        raise NotImplementedError

    def removed(self, binding: Binding) -> None:
        """Drop a removed binding from the routing index."""
        raise NotImplementedError

    def route(self, message: Message) -> Destinations:
        """The destinations *message* reaches directly, each once."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class _CountedDestinations:
    """Destinations with the number of bindings that lead to each, plus a tuple."""

    __slots__ = ("counts", "members")

    def __init__(self) -> None:
        self.counts: dict[Any, int] = {}
        self.members: tuple[Any, ...] = ()

    def add(self, destination: Any) -> None:
        self.counts[destination] = self.counts.get(destination, 0) + 1
        self.members = tuple(self.counts)

    def remove(self, destination: Any) -> None:
        remaining = self.counts[destination] - 1
        if remaining:
            self.counts[destination] = remaining
        else:
            del self.counts[destination]
        self.members = tuple(self.counts)


class DirectExchange(Exchange):
    """Routes to the bindings whose key equals the routing key."""

    kind = "direct"

    def __init__(self, name: str, **options: Any) -> None:
        super().__init__(name, **options)
        self._by_key: dict[str, _CountedDestinations] = {}
        #: routing key -> destinations, the structure :meth:`route` reads.
        self._routes: dict[str, tuple[Any, ...]] = {}

    def added(self, binding: Binding) -> None:
        entry = self._by_key.setdefault(binding.routing_key, _CountedDestinations())
        entry.add(binding.destination)
        self._routes[binding.routing_key] = entry.members

    def removed(self, binding: Binding) -> None:
        entry = self._by_key[binding.routing_key]
        entry.remove(binding.destination)
        if entry.members:
            self._routes[binding.routing_key] = entry.members
        else:
            del self._by_key[binding.routing_key]
            del self._routes[binding.routing_key]

    def route(self, message: Message) -> Destinations:
        return self._routes.get(message.origin[1], ())  # the routing key


class FanoutExchange(Exchange):
    """Routes to every binding, whatever the routing key."""

    kind = "fanout"

    def __init__(self, name: str, **options: Any) -> None:
        super().__init__(name, **options)
        self._all = _CountedDestinations()

    def added(self, binding: Binding) -> None:
        self._all.add(binding.destination)

    def removed(self, binding: Binding) -> None:
        self._all.remove(binding.destination)

    def route(self, message: Message) -> Destinations:
        return self._all.members


class TopicExchange(Exchange):
    """Routes by dot-separated words with ``*`` and ``#`` wildcards.

    Results are cached per routing key until the bindings change.
    """

    kind = "topic"
    #: Routing keys remembered before the cache starts over.
    CACHE_SIZE: ClassVar[int] = 4096

    def __init__(self, name: str, **options: Any) -> None:
        super().__init__(name, **options)
        self._trie = TopicTrie()
        self._cache: dict[str, tuple[Any, ...]] = {}

    def added(self, binding: Binding) -> None:
        self._trie.add(binding.routing_key, binding.destination)
        self._cache.clear()

    def removed(self, binding: Binding) -> None:
        self._trie.remove(binding.routing_key, binding.destination)
        self._cache.clear()

    def route(self, message: Message) -> Destinations:
        key = message.origin[1]  # the routing key
        found = self._cache.get(key)
        if found is None:
            if len(self._cache) >= self.CACHE_SIZE:
                self._cache.clear()
            found = self._cache[key] = self._trie.match(key)
        return found


class HeadersExchange(Exchange):
    """Routes by comparing message headers with binding arguments (``x-match``)."""

    kind = "headers"

    def __init__(self, name: str, **options: Any) -> None:
        super().__init__(name, **options)
        self._rules: dict[Binding, str] = {}

    def check(self, binding: Binding) -> None:
        parse_x_match(binding.arguments)

    def added(self, binding: Binding) -> None:
        self._rules[binding] = parse_x_match(binding.arguments)

    def removed(self, binding: Binding) -> None:
        del self._rules[binding]

    def route(self, message: Message) -> Destinations:
        if not self._rules:
            return ()
        headers = message.headers
        found: dict[Any, None] = {}
        for binding, rule in self._rules.items():
            if binding.destination not in found and headers_match(rule, binding.arguments, headers):
                found[binding.destination] = None
        return tuple(found)


#: Exchange classes by the type name clients declare.
EXCHANGE_TYPES: dict[str, type[Exchange]] = {
    cls.kind: cls for cls in (DirectExchange, FanoutExchange, TopicExchange, HeadersExchange)
}
