"""What the configuration endpoints share: the runtime configuration of the
node, and its refusals as RabbitMQ's HTTP errors.

The endpoints (users, vhosts, permissions, topic permissions, policies,
operator policies, parameters, limits, definitions) change the broker only
through :class:`~txamqp09.broker.runtime.RuntimeConfig`, which keeps every
change in the store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from txamqp09.broker.runtime import ConfigError, RuntimeConfig
from txamqp09.management.api import ApiError, ApiRequest, Reply, bad_request

__all__ = ["applied", "config", "created", "required", "vhost_not_found"]

_T = TypeVar("_T")


def config(request: ApiRequest) -> RuntimeConfig:
    """The runtime configuration of the node the request is for."""
    return request.node.factory.config


def vhost_not_found() -> ApiError:
    """RabbitMQ's 404 for a change in a vhost that does not exist."""
    return ApiError(404, "not_found", "vhost_not_found")


def applied(change: Callable[[], _T], *, validation: bool = False) -> _T:
    """Run *change*; its :class:`ConfigError` becomes RabbitMQ's 404 or 400.

    :param validation: word a 400 as RabbitMQ's runtime-parameter
        validation does (``Validation failed ...``).
    """
    try:
        return change()
    except ConfigError as error:
        reason = str(error)
        if error.not_found:
            raise vhost_not_found() if "virtual host" in reason else ApiError(404, "not_found", reason) from None
        raise bad_request(f"Validation failed\n\n{reason}\n" if validation else reason) from None


def created(existed: bool) -> Reply | None:
    """201 for something new, 204 for a change (RabbitMQ's PUT answers)."""
    return None if existed else Reply(201)


def required(body: dict[str, Any], *keys: str) -> list[Any]:
    """The values of *keys* in a PUT body.

    :raises ApiError: 400 naming the missing keys, as RabbitMQ does.
    """
    missing = [key for key in keys if key not in body]
    if missing:
        raise bad_request("[" + ",".join(f"{{key_missing,{key}}}" for key in missing) + "]")
    return [body[key] for key in keys]
