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
from typing import Any, Callable, Optional
from urllib.parse import urlsplit, urlunsplit

from txamqp09.broker.model.policy import FEDERATION_KEYS

__all__ = [
    "ACK_MODES",
    "UPSTREAM",
    "UPSTREAM_SET",
    "Upstream",
    "UpstreamError",
    "check_upstream",
    "check_upstream_set",
    "redacted",
    "upstreams_for",
]

#: The runtime parameter components.
UPSTREAM = "federation-upstream"
UPSTREAM_SET = "federation-upstream-set"
#: How a link acknowledges at the upstream what it republished.
ACK_MODES = ("on-confirm", "on-publish", "no-ack")
#: RabbitMQ's default prefetch count of a link.
DEFAULT_PREFETCH = 1000


class UpstreamError(ValueError):
    """A parameter value that is no valid upstream (RabbitMQ's texts)."""


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return f'<<"{value}">>'
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value)


def _number(key: str, value: Any) -> Optional[str]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return None
    return f"{key} should be a number, actually was {_shown(value)}"


def _binary(key: str, value: Any) -> Optional[str]:
    return None if isinstance(value, str) else f"{key} should be binary, actually was {_shown(value)}"


def _boolean(key: str, value: Any) -> Optional[str]:
    return None if isinstance(value, bool) else f"{key} should be boolean, actually was {_shown(value)}"


def _enum(*choices: str) -> Callable[[str, Any], Optional[str]]:
    def check(key: str, value: Any) -> Optional[str]:
        if value in choices:
            return None
        return f"{key} should be one of [{','.join(choices)}], actually was {_shown(value)}"

    return check


def _uri(key: str, value: Any) -> Optional[str]:
    if isinstance(value, list):
        for item in value:
            problem = _uri(key, item)
            if problem is not None:
                return problem
        return None if value else f"{key} should be a non-empty list of URIs"
    if not isinstance(value, str):
        return f"{key} should be binary, actually was {_shown(value)}"
    if urlsplit(value).scheme not in ("amqp", "amqps"):
        return f'"{value}" not a valid URI: {{unexpected_uri_scheme,"{urlsplit(value).scheme}"}}'
    try:
        urlsplit(value).port
    except ValueError:
        return f'"{value}" not a valid URI: bad port'
    return None


#: The keys an upstream and a set member share, with their checks.
_SHARED: dict[str, Callable[[str, Any], Optional[str]]] = {
    "exchange": _binary,
    "queue": _binary,
    "consumer-tag": _binary,
    "prefetch-count": _number,
    "reconnect-delay": _number,
    "max-hops": _number,
    "expires": _number,
    "message-ttl": _number,
    "trust-user-id": _boolean,
    "ack-mode": _enum("no-ack", "on-publish", "on-confirm"),
    "resource-cleanup-mode": _enum("default", "never"),
    "ha-policy": _binary,
    "bind-nowait": _boolean,
    "channel-use-mode": _enum("multiple", "single"),
}


def _check_object(name: str, value: Any, mandatory: str, checks: Mapping[str, Callable[[str, Any], Optional[str]]]) -> None:
    if not isinstance(value, Mapping):
        raise UpstreamError(f"{name} not a list {_shown(value)}")
    if mandatory not in value:
        raise UpstreamError(f'Key "{mandatory}" not found in {name}')
    unknown = [key for key in value if key not in checks]
    if unknown:
        terms = ",".join(f"{{<<\"{key}\">>,{_shown(value[key])}}}" for key in unknown)
        raise UpstreamError(f"Unrecognised terms [{terms}] in {name}")
    for key, item in value.items():
        problem = checks[key](key, item)
        if problem is not None:
            raise UpstreamError(problem)


def check_upstream(name: str, value: Any) -> None:
    """Check the value of upstream *name* (component ``federation-upstream``).

    :raises UpstreamError: with RabbitMQ's text.
    """
    _check_object(name, value, "uri", {"uri": _uri, **_SHARED})


def check_upstream_set(name: str, value: Any) -> None:
    """Check the value of upstream set *name* (component ``federation-upstream-set``).

    :raises UpstreamError: with RabbitMQ's text.
    """
    if not isinstance(value, list):
        raise UpstreamError(f"{name} should be list, actually was {_shown(value)}")
    for member in value:
        _check_object(name, member, "upstream", {"upstream": _binary, "uri": _uri, **_SHARED})


def redacted(uri: str) -> str:
    """*uri* without its user name and password (as status and logs show it)."""
    parts = urlsplit(uri)
    if "@" not in parts.netloc:
        return uri
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


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
