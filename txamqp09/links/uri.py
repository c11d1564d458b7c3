"""The ``amqp://`` URIs of a link's ends.

A shovel's ``src-uri`` / ``dest-uri`` and a federation upstream's ``uri``
are AMQP URIs (``amqp://user:pass@host:port/vhost?heartbeat=30``,
``amqps://`` with TLS options; docs/client.rst lists the query options).
As in RabbitMQ, a URI without a host (``amqp://``, ``amqp:///vhost``) means
this broker itself: the link connects to the broker's own AMQP listener on
loopback and logs in as RabbitMQ's direct connections do: as user ``none``
with every right when the URI names no user, as the user it names without a
password, or with the password it gives (:class:`LocalAddress`).

A URI holds a password: :func:`redacted` is what logs and the management
API show (:mod:`.redaction`), and :func:`shown_uris` redacts a parameter's
URI fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Optional
from urllib.parse import quote, unquote, urlsplit

from txamqp09.client.params import ConnectionParameters, parse_url
from txamqp09.links.redaction import redacted
from txamqp09.links.validation import erlang_term

__all__ = ["LinkUri", "LocalAddress", "redacted", "shown_uris", "uri_problem", "uris_errors"]

_SCHEMES = ("amqp", "amqps")


@dataclass(frozen=True)
class LocalAddress:
    """Where this broker's own AMQP listener is (for URIs without a host).

    :ivar direct: hands out the user name and one-time password of a
        direct login as a user (None: as RabbitMQ's user ``none``, every
        right), for URIs without a password (see
        :meth:`~txamqp09.broker.auth.security.Security.direct_login`); None
        to log in as the URI says (``guest`` without a user).
    """

    host: str
    port: int
    direct: Optional[Callable[[Optional[str]], tuple[str, str]]] = None


def uri_problem(uri: str) -> Optional[str]:
    """Why *uri* is not an AMQP URI, as RabbitMQ's ``amqp_uri:parse`` words
    it (``{{unexpected_uri_scheme,"foo"},"foo://x"}``); None when it is one."""
    quoted = '"' + uri.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if "://" not in uri:
        return f"{{{{unable_to_parse_uri,no_scheme}},{quoted}}}"
    scheme = uri.split("://", 1)[0]
    if scheme.lower() not in _SCHEMES:
        return f'{{{{unexpected_uri_scheme,"{scheme}"}},{quoted}}}'
    try:
        if urlsplit(uri).hostname:
            parse_url(uri)
        else:
            parse_url(uri.replace("://", "://localhost", 1))
    except ValueError as error:
        return f"{{{{unable_to_parse_uri,{error}}},{quoted}}}"
    return None


def uris_errors(key: str, value: Any) -> list[str]:
    """The problems of field *key*: one URI or a list of them (RabbitMQ's
    texts; the first bad URI of a list only)."""
    if isinstance(value, str):
        problem = uri_problem(value)
        return [] if problem is None else [f'"{value}" not a valid URI: {problem}']
    if not isinstance(value, list):
        return [f"{key} should be list, actually was {erlang_term(value)}"]
    for uri in value:
        problems = uris_errors(key, uri)
        if problems:
            return problems
    return []


def shown_uris(value: Any, *keys: str) -> Any:
    """A parameter's *value* with the URIs (one or a list) under *keys* redacted."""
    if not isinstance(value, Mapping):
        return value
    shown = dict(value)
    for key in keys:
        uris = shown.get(key)
        if isinstance(uris, str):
            shown[key] = redacted(uris)
        elif isinstance(uris, list):
            shown[key] = [redacted(uri) if isinstance(uri, str) else uri for uri in uris]
    return shown


@dataclass(frozen=True)
class LinkUri:
    """One checked URI of a link's end.

    :ivar text: the URI as given (holds the password: never log it).
    """

    text: str

    def __post_init__(self) -> None:
        problem = uri_problem(self.text)
        if problem is not None:
            raise ValueError(f"{redacted(self.text)} is not a valid AMQP URI")

    @property
    def local(self) -> bool:
        """The URI names no host: this broker itself."""
        return not urlsplit(self.text).hostname

    @property
    def redacted(self) -> str:
        """The URI without credentials (see :func:`redacted`)."""
        return redacted(self.text)

    def parameters(self, local: Optional[LocalAddress], **changes: Any) -> ConnectionParameters:
        """The connection parameters of this URI; a URI without a host
        reaches *local*.

        :raises ValueError: the URI names this broker and *local* is None
            (it does not listen for AMQP on TCP).
        """
        if not self.local:
            return parse_url(self.text).replace(**changes)
        if local is None:
            raise ValueError("this broker has no AMQP listener on TCP to reach itself through")
        host = f"[{local.host}]" if ":" in local.host else local.host
        parts = urlsplit(self.text)
        query = f"?{parts.query}" if parts.query else ""
        user = parts.netloc.rpartition("@")[0]
        if local.direct is not None and parts.password is None:
            name, password = local.direct(unquote(user) if user else None)
            user = f"{quote(name, safe='')}:{quote(password, safe='')}"
        credentials = f"{user}@" if user else ""
        return parse_url(f"amqp://{credentials}{host}:{local.port}{parts.path}{query}").replace(**changes)
