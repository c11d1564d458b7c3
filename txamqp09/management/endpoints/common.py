"""Helpers the object endpoints share: body fields, query flags, visible vhosts."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Optional

from txamqp09.broker.model import VirtualHost
from txamqp09.management.api import ApiRequest, bad_request

__all__ = [
    "body_flag", "body_int", "body_string", "body_table", "query_flag", "refuse_unknown_fields", "visible_vhosts",
]


def body_flag(body: dict[str, Any], key: str, default: bool = False) -> bool:
    """A boolean field of a JSON body: true/false, or "true"/"false" as
    rabbitmqadmin sends them (400 otherwise)."""
    value = body.get(key, default)
    value = {"true": True, "false": False}.get(value, value) if isinstance(value, str) else value
    if not isinstance(value, bool):
        raise bad_request(f"{key} must be true or false, not {value!r}")
    return value


def body_int(body: dict[str, Any], key: str, minimum: int = 0) -> Optional[int]:
    """An integer field of a JSON body, also given as a string of digits as
    rabbitmqadmin sends it; None when absent (400 when not an integer of at
    least *minimum*)."""
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise bad_request(f"{key} must be an integer of at least {minimum}, not {value!r}")
    return value


def body_string(body: dict[str, Any], key: str, default: Optional[str] = None) -> str:
    """A string field of a JSON body (400 when it is missing or not a string)."""
    value = body.get(key, default)
    if not isinstance(value, str):
        raise bad_request(f"{key} is missing" if value is None else f"{key} must be a string, not {value!r}")
    return value


def body_table(body: dict[str, Any], key: str) -> dict[str, Any]:
    """An arguments table of a JSON body (400 when it is not an object)."""
    value = body.get(key) or {}
    if not isinstance(value, dict):
        raise bad_request(f"{key} must be an object, not {value!r}")
    return value


#: Fields naming the object, which rabbitmqadmin repeats in a body; the path decides.
NAMING_FIELDS = frozenset({"name", "vhost"})


def refuse_unknown_fields(body: dict[str, Any], known: Iterable[str]) -> None:
    """Refuse (400) a body with fields other than *known* and the naming ones."""
    unknown = sorted(set(body) - set(known) - NAMING_FIELDS)
    if unknown:
        raise bad_request(f"unknown fields: {', '.join(unknown)}")


def query_flag(request: ApiRequest, name: str) -> bool:
    """Whether query parameter *name* is ``true``."""
    return request.query.get(name) == "true"


def visible_vhosts(request: ApiRequest) -> list[VirtualHost]:
    """The vhost of the path if it names one (404 / 401 as RabbitMQ), else
    every vhost the user may see."""
    if "vhost" in request.args:
        return [request.vhost()]
    return [vhost for vhost in request.node.vhosts() if request.may_see_vhost(vhost.name)]
