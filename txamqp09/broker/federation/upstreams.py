"""Federation upstreams: the runtime parameters that name them, checked,
and the upstreams a federated exchange or queue links to.

The parameters are RabbitMQ 3.10's federation plugin's:

* component ``federation-upstream``: one upstream, an object with ``uri``
  (one URI or a list of them, tried one after another) and optional
  ``prefetch-count``, ``reconnect-delay``, ``ack-mode`` (``on-confirm``,
  ``on-publish``, ``no-ack``), ``trust-user-id``, ``exchange``, ``queue``,
  ``max-hops``, ``expires``, ``message-ttl`` and ``consumer-tag``;
* component ``federation-upstream-set``: a list of ``{"upstream": name}``
  objects, each of which may override the named upstream's keys.

A policy with ``federation-upstream`` (one name), ``federation-upstream-set``
(a set's name, or ``all`` for every upstream of the vhost) or
``federation-upstream-pattern`` (a regular expression on upstream names)
federates the exchanges and queues it applies to (:func:`upstreams_for`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from txamqp09.broker.model.policy import FEDERATION_KEYS
from txamqp09.broker.parameters import Component
from txamqp09.links.uri import shown_uris, uris_errors
from txamqp09.links.validation import Rule, binary, boolean, enum, erlang_term, number, proplist_errors

__all__ = [
    "ACK_MODES",
    "COMPONENTS",
    "UPSTREAM",
    "UPSTREAM_SET",
    "Upstream",
    "upstream_errors",
    "upstream_set_errors",
    "upstreams_for",
]

#: The runtime parameter components.
UPSTREAM = "federation-upstream"
UPSTREAM_SET = "federation-upstream-set"
#: How a link acknowledges at the upstream what it republished.
ACK_MODES = ("no-ack", "on-publish", "on-confirm")
#: RabbitMQ's default prefetch count of a link.
DEFAULT_PREFETCH = 1000


#: The keys an upstream and a set member share, with their checks (RabbitMQ's).
_SHARED = (
    Rule("exchange", binary),
    Rule("queue", binary),
    Rule("consumer-tag", binary),
    Rule("prefetch-count", number),
    Rule("reconnect-delay", number),
    Rule("max-hops", number),
    Rule("expires", number),
    Rule("message-ttl", number),
    Rule("trust-user-id", boolean),
    Rule("ack-mode", enum(*ACK_MODES)),
    Rule("resource-cleanup-mode", enum("default", "never")),
    Rule("ha-policy", binary),
    Rule("bind-nowait", boolean),
    Rule("channel-use-mode", enum("multiple", "single")),
)


def upstream_errors(name: str, value: Any) -> list[str]:
    """Why *value* cannot be upstream *name* (component ``federation-upstream``),
    in RabbitMQ's texts; none when it can."""
    return proplist_errors(name, (Rule("uri", uris_errors, mandatory=True), *_SHARED), value)


def upstream_set_errors(name: str, value: Any) -> list[str]:
    """Why *value* cannot be upstream set *name* (component
    ``federation-upstream-set``: a list of members); none when it can."""
    if not isinstance(value, list):
        return [f"{name} should be list, actually was {erlang_term(value)}"]
    member_rules = (Rule("upstream", binary, mandatory=True), Rule("uri", uris_errors), *_SHARED)
    return [text for member in value for text in proplist_errors(name, member_rules, member)]


def _shown_set(value: Any) -> Any:
    if not isinstance(value, list):
        return value
    return [shown_uris(member, "uri") for member in value]


#: The two components, as the runtime configuration checks and shows them.
COMPONENTS = {
    UPSTREAM: Component(upstream_errors, lambda value: shown_uris(value, "uri")),
    UPSTREAM_SET: Component(upstream_set_errors, _shown_set),
}


@dataclass(frozen=True)
class Upstream:
    """One upstream of one federated exchange or queue, with its settings
    (a set member's overrides applied) and RabbitMQ's defaults.

    :ivar exchange: the upstream exchange's name (None: the federated
        exchange's own).
    :ivar queue: the upstream queue's name (None: the federated queue's own).
    """

    name: str
    uris: tuple[str, ...]
    exchange: Optional[str] = None
    queue: Optional[str] = None
    consumer_tag: str = ""
    prefetch_count: int = DEFAULT_PREFETCH
    reconnect_delay: float = 5.0
    max_hops: int = 1
    expires: Optional[int] = None
    message_ttl: Optional[int] = None
    trust_user_id: bool = False
    ack_mode: str = "on-confirm"

    @classmethod
    def from_values(cls, name: str, *layers: Mapping[str, Any]) -> Upstream:
        """The upstream *name* from parameter values, the first layer that
        has a key winning (a set member, then the upstream itself)."""

        def get(key: str, default: Any = None) -> Any:
            for layer in layers:
                if key in layer:
                    return layer[key]
            return default

        uri = get("uri")
        return cls(
            name=name,
            uris=tuple(uri) if isinstance(uri, list) else (uri,),
            exchange=get("exchange"),
            queue=get("queue"),
            consumer_tag=get("consumer-tag", f"federation-link-{name}"),
            prefetch_count=int(get("prefetch-count", DEFAULT_PREFETCH)),
            reconnect_delay=float(get("reconnect-delay", 5)),
            max_hops=int(get("max-hops", 1)),
            expires=_optional_int(get("expires")),
            message_ttl=_optional_int(get("message-ttl")),
            trust_user_id=bool(get("trust-user-id", False)),
            ack_mode=get("ack-mode", "on-confirm"),
        )


def _optional_int(value: Any) -> Optional[int]:
    return None if value is None else int(value)


def upstreams_for(
    definition: Mapping[str, Any], vhost: str, parameters: Mapping[tuple[str, str, str], Any]
) -> list[Upstream]:
    """The upstreams an effective policy *definition* names in *vhost*,
    from the runtime *parameters* (by component, vhost and name); names of
    upstreams that do not exist are left out, as RabbitMQ does."""
    upstreams = {name: value for (component, where, name), value in parameters.items()
                 if component == UPSTREAM and where == vhost}
    single, set_name, pattern = (definition.get(key) for key in FEDERATION_KEYS)
    members: list[Mapping[str, Any]]
    if single is not None:
        members = [{"upstream": single}]
    elif set_name == "all":
        members = [{"upstream": name} for name in sorted(upstreams)]
    elif set_name is not None:
        members = list(parameters.get((UPSTREAM_SET, vhost, set_name)) or [])
    elif pattern is not None:
        members = [{"upstream": name} for name in sorted(upstreams) if re.search(pattern, name)]
    else:
        return []
    return [
        Upstream.from_values(member["upstream"], member, upstreams[member["upstream"]])
        for member in members
        if member.get("upstream") in upstreams
    ]
