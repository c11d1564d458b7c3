"""Policies: settings applied to queues and exchanges by name pattern.

A policy (RabbitMQ's ``rabbitmqctl set_policy``) belongs to a virtual host
and has a regular expression ``pattern`` searched in entity names, an
``apply-to`` saying which entities it is for, a ``priority`` and a
``definition``: keys such as ``message-ttl`` or ``max-length`` that stand for
the ``x-`` arguments of the same name. The rules are RabbitMQ's:

* of the policies whose pattern matches an entity, the one with the highest
  priority applies (only one; ties go to the first name in sort order);
* operator policies (:data:`OPERATOR_KEYS` only) are matched the same way,
  and where both a policy and an operator policy set a key, the lower value
  wins (:func:`merge_operator`);
* an entity's own arguments take precedence over the effective policy: for
  the numeric limits (:data:`LOWER_WINS`) the lower of the two applies, for
  every other key the argument (:func:`queue_arguments`).

Queues apply the result through the same :class:`~.arguments.QueueArguments`
as their declared arguments (see :meth:`~.queue.Queue.apply_policy`);
nothing reads policy definitions anywhere else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol

from txamqp09.broker.model.arguments import CLASSIC, MAX_EXPIRY, QUORUM, STREAM, Overflow
from txamqp09.wire.fields import field_text

__all__ = [
    "APPLY_TO",
    "FEDERATION_KEYS",
    "LOWER_WINS",
    "OPERATOR_KEYS",
    "Policy",
    "PolicyError",
    "PolicySet",
    "choose",
    "exchange_alternate",
    "merge_operator",
    "queue_arguments",
]

#: What a policy may apply to: RabbitMQ 3.10's three, and the queue types of 3.12.
APPLY_TO = ("all", "queues", "exchanges", "classic_queues", "quorum_queues", "streams")
#: Queue types each ``apply-to`` covers (``exchanges`` covers none).
_QUEUE_TYPES = {
    "all": (CLASSIC, QUORUM, STREAM),
    "queues": (CLASSIC, QUORUM, STREAM),
    "classic_queues": (CLASSIC,),
    "quorum_queues": (QUORUM,),
    "streams": (STREAM,),
    "exchanges": (),
}
#: Keys for which the lower value wins, between a policy and an operator
#: policy, and between the effective policy and a queue's own argument.
LOWER_WINS = frozenset(
    ("message-ttl", "expires", "max-length", "max-length-bytes", "delivery-limit")
)
#: The keys operator policies may set (RabbitMQ's list, less the in-memory
#: limits of quorum queues this broker does not have).
OPERATOR_KEYS = LOWER_WINS
#: Keys that apply to exchanges (all others apply to queues).
_EXCHANGE_KEYS = frozenset(("alternate-exchange",))
#: Keys that make an exchange or queue federated (RabbitMQ's federation
#: plugin); they name upstreams and are no queue arguments. At most one of
#: them in a definition.
FEDERATION_KEYS = ("federation-upstream", "federation-upstream-set", "federation-upstream-pattern")
#: The largest stream segment RabbitMQ allows.
_MAX_SEGMENT_SIZE = 3_000_000_000
_MAX_AGE = re.compile(r"^\d+[YMDhms]$")


class PolicyError(ValueError):
    """A policy that cannot be set; the text says why, as RabbitMQ words it."""


def _integer(least: int, what: str, most: Optional[int] = None) -> Callable[[Any], Optional[str]]:
    def check(value: Any) -> Optional[str]:
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            return f"{_shown(value)} is not a valid {what}"
        if most is not None and value > most:
            return f"{_shown(value)} is not a valid {what}"
        return None

    return check


def _choice(choices: Iterable[Any], what: str) -> Callable[[Any], Optional[str]]:
    allowed = tuple(choices)

    def check(value: Any) -> Optional[str]:
        if isinstance(value, bool) or value not in allowed:
            return f"{_shown(value)} is not a valid {what}"
        return None

    return check


def _text(what: str) -> Callable[[Any], Optional[str]]:
    def check(value: Any) -> Optional[str]:
        return None if isinstance(value, str) else f"{_shown(value)} is not a valid {what}"

    return check


def _federation_name(what: str) -> Callable[[Any], Optional[str]]:
    def check(value: Any) -> Optional[str]:
        return None if isinstance(value, str) else f"{_shown(value)} is not a valid federation upstream {what}"

    return check


def _federation_pattern(value: Any) -> Optional[str]:
    if not isinstance(value, str):
        return f"{_shown(value)} is not a valid federation upstream pattern name"
    try:
        re.compile(value)
    except re.error as error:
        return f"could not compile pattern {value} to a regular expression. Error: {error}"
    return None


def _max_age(value: Any) -> Optional[str]:
    if isinstance(value, str) and _MAX_AGE.match(value):
        return None
    return f"{_shown(value)} is not a valid max age"


#: Each definition key this broker applies, with its check (RabbitMQ's texts).
_CHECKS: dict[str, Callable[[Any], Optional[str]]] = {
    "message-ttl": _integer(0, "message TTL", MAX_EXPIRY),
    "expires": _integer(1, "queue expiry", MAX_EXPIRY),
    "max-length": _integer(0, "maximum length"),
    "max-length-bytes": _integer(0, "maximum length in bytes"),
    "overflow": _choice(Overflow.CHOICES, "overflow value"),
    "dead-letter-exchange": _text("dead letter exchange name"),
    "dead-letter-routing-key": _text("dead letter routing key"),
    "alternate-exchange": _text("alternate exchange name"),
    "max-age": _max_age,
    "stream-max-segment-size-bytes": _integer(0, "segment size", _MAX_SEGMENT_SIZE),
    "delivery-limit": _integer(0, "delivery limit"),
    "queue-mode": _choice(("default", "lazy"), "queue-mode value"),
    "queue-version": _choice((1, 2), "queue-version value"),
    "federation-upstream": _federation_name("name"),
    "federation-upstream-set": _federation_name("set name"),
    "federation-upstream-pattern": _federation_pattern,
}


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return f"<<\"{value}\">>"
    return repr(value)


def check_definition(definition: Any, operator: bool = False) -> dict[str, Any]:
    """*definition* checked: a non-empty object of known keys and valid values.

    :param operator: check it as an operator policy's (:data:`OPERATOR_KEYS` only).
    :raises PolicyError: with RabbitMQ's text.
    """
    if not isinstance(definition, Mapping):
        raise PolicyError(f"definition must be a dictionary: {definition!r}")
    if not definition:
        raise PolicyError("no policy provided")
    allowed = OPERATOR_KEYS if operator else _CHECKS.keys()
    unknown = [key for key in definition if key not in allowed]
    if unknown:
        listed = ",".join(f'<<"{key}">>' for key in unknown)
        raise PolicyError(f"[{listed}] are not recognised policy settings")
    for key, value in definition.items():
        problem = _CHECKS[key](value)
        if problem is not None:
            raise PolicyError(problem)
    if sum(key in definition for key in FEDERATION_KEYS) > 1:
        raise PolicyError(
            "cannot specify federation-upstream, federation-upstream-set or federation-upstream-pattern together"
        )
    return dict(definition)


@dataclass(frozen=True)
class Policy:
    """A policy or operator policy of one virtual host, checked.

    Build one with :meth:`from_json`, which checks every field.
    """

    vhost: str
    name: str
    pattern: str
    definition: Mapping[str, Any]
    priority: int = 0
    apply_to: str = "all"
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_regex", re.compile(self.pattern))

    @classmethod
    def from_json(
        cls, vhost: str, name: str, body: Mapping[str, Any], *, operator: bool = False
    ) -> Policy:
        """A policy from a PUT body or a definitions entry (``pattern``,
        ``definition``, optional ``priority`` and ``apply-to``).

        :raises PolicyError: a field is missing or invalid.
        """
        if not name:
            raise PolicyError("a policy needs a non-empty name")
        pattern = body.get("pattern")
        if not isinstance(pattern, str):
            raise PolicyError(f"pattern should be a binary but was {pattern!r}")
        try:
            re.compile(pattern)
        except re.error as error:
            raise PolicyError(
                f"pattern should be regular expression but is invalid: {error}"
            ) from None
        if "definition" not in body:
            raise PolicyError("Key \"definition\" not found in " + name)
        definition = check_definition(body["definition"], operator)
        priority = body.get("priority", 0)
        if isinstance(priority, bool) or not isinstance(priority, (int, float)):
            raise PolicyError(f"priority should be a number, actually was {priority!r}")
        apply_to = body.get("apply-to", "all")
        if apply_to not in APPLY_TO:
            raise PolicyError(
                f"apply-to '{apply_to}' unrecognised; should be one of {', '.join(APPLY_TO)}"
            )
        return cls(vhost, name, pattern, definition, int(priority), apply_to)

    def to_json(self) -> dict[str, Any]:
        """The policy as RabbitMQ's API and definitions show it."""
        return {
            "vhost": self.vhost,
            "name": self.name,
            "pattern": self.pattern,
            "apply-to": self.apply_to,
            "definition": dict(self.definition),
            "priority": self.priority,
        }

    def matches_queue(self, name: str, queue_type: str) -> bool:
        """Whether the policy is for the queue *name* of type *queue_type*."""
        return queue_type in _QUEUE_TYPES[self.apply_to] and self._regex.search(name) is not None

    def matches_exchange(self, name: str) -> bool:
        """Whether the policy is for the exchange *name*."""
        return self.apply_to in ("all", "exchanges") and self._regex.search(name) is not None


def choose(policies: Iterable[Policy], matches: Callable[[Policy], bool]) -> Optional[Policy]:
    """The policy that applies among those *matches* accepts: the highest
    priority, ties broken by name."""
    best: Optional[Policy] = None
    for policy in policies:
        if matches(policy) and (
            best is None
            or policy.priority > best.priority
            or (policy.priority == best.priority and policy.name < best.name)
        ):
            best = policy
    return best


def merge_operator(
    policy: Optional[Mapping[str, Any]], operator: Optional[Mapping[str, Any]]
) -> dict[str, Any]:
    """The effective definition of a policy and an operator policy (either
    may be None): every key of both, the lower value where both set one."""
    merged = dict(policy or {})
    for key, value in (operator or {}).items():
        merged[key] = min(merged[key], value) if key in merged else value
    return merged


def queue_arguments(
    arguments: Mapping[str, Any], effective: Mapping[str, Any], ignored: Iterable[str] = ()
) -> dict[str, Any]:
    """A queue's declared *arguments* with the *effective* policy definition
    folded in (but not the *ignored* ``x-`` arguments): what
    :class:`~.arguments.QueueArguments` reads."""
    merged = dict(arguments)
    skipped = frozenset(ignored)
    for key, value in effective.items():
        argument = f"x-{key}"
        if key in _EXCHANGE_KEYS or key in FEDERATION_KEYS or argument in skipped:
            continue
        if key == "dead-letter-routing-key" and "x-dead-letter-exchange" not in merged and (
            "dead-letter-exchange" not in effective
        ):
            continue
        own = merged.get(argument)
        if own is None:
            merged[argument] = value
        elif key in LOWER_WINS and isinstance(own, int) and not isinstance(own, bool):
            merged[argument] = min(own, value)
    return merged


def exchange_alternate(arguments: Mapping[str, Any], effective: Mapping[str, Any]) -> Optional[str]:
    """An exchange's alternate exchange: its argument, else the policy's."""
    own = arguments.get("alternate-exchange")
    if own is not None:
        return str(field_text(own))
    value = effective.get("alternate-exchange")
    return value if isinstance(value, str) else None


class _Governed(Protocol):
    """A queue or exchange, as policies see it."""

    name: str

    def apply_policy(
        self, policy: Optional[str], operator_policy: Optional[str], effective: Mapping[str, Any]
    ) -> None: ...


class PolicySet:
    """The policies and operator policies of one virtual host, by name.

    Change them through :meth:`put` and :meth:`remove`, then have the
    virtual host apply them to what exists (:meth:`~.vhost.VirtualHost.apply_policies`);
    queues and exchanges declared later get them when they are made.
    """

    def __init__(self) -> None:
        self.policies: dict[str, Policy] = {}
        self.operator_policies: dict[str, Policy] = {}

    def __bool__(self) -> bool:
        return bool(self.policies or self.operator_policies)

    def put(self, policy: Policy, *, operator: bool = False) -> None:
        """Add or replace *policy*."""
        (self.operator_policies if operator else self.policies)[policy.name] = policy

    def remove(self, name: str, *, operator: bool = False) -> bool:
        """Remove the policy *name*; False when there was none."""
        return (self.operator_policies if operator else self.policies).pop(name, None) is not None

    def _apply(self, entity: _Governed, matches: Callable[[Policy], bool]) -> None:
        policy = choose(self.policies.values(), matches)
        operator = choose(self.operator_policies.values(), matches)
        effective = merge_operator(
            policy.definition if policy is not None else None,
            operator.definition if operator is not None else None,
        )
        entity.apply_policy(
            policy.name if policy is not None else None,
            operator.name if operator is not None else None,
            effective,
        )

    def apply_to_queue(self, queue: _Governed, queue_type: str) -> None:
        """Give *queue* (of *queue_type*) the policies that match it (or none)."""
        self._apply(queue, lambda policy: policy.matches_queue(queue.name, queue_type))

    def apply_to_exchange(self, exchange: _Governed) -> None:
        """Give *exchange* the policies that match it (or none)."""
        self._apply(exchange, lambda policy: policy.matches_exchange(exchange.name))
