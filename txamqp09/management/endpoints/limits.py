"""``/api/vhost-limits`` and ``/api/user-limits``.

Vhost limits: ``max-connections``, ``max-queues``; user limits:
``max-connections``, ``max-channels``. A negative value means no limit.
They are enforced with RabbitMQ's codes and texts (see docs/management.rst).
"""

from __future__ import annotations

from typing import Any, Callable

from txamqp09.management.api import ApiRequest, Router, listing, not_found
from txamqp09.management.configuration import applied, config, required

__all__ = ["register"]


def register(router: Router) -> None:
    """Add the limit endpoints (changes for administrators)."""
    for kind, base, key in (("vhost", "/api/vhost-limits", "vhost"), ("user", "/api/user-limits", "user")):
        router.add("GET", base, _lister(kind, key), tag="administrator" if kind == "user" else "management")
        router.add("GET", f"{base}/{{{key}}}", _lister(kind, key), tag="administrator" if kind == "user" else "management")
        router.add("PUT", f"{base}/{{{key}}}/{{name}}", _setter(kind, key), tag="administrator")
        router.add("DELETE", f"{base}/{{{key}}}/{{name}}", _clearer(kind, key), tag="administrator")


def _lister(kind: str, key: str) -> Callable[[ApiRequest], Any]:
    def list_limits(request: ApiRequest) -> Any:
        """The limits of every vhost (or user) that has some, or of one."""
        database = config(request).database
        if kind == "vhost" and key in request.args:
            request.vhost(key)
        table = database.vhost_limits if kind == "vhost" else database.user_limits
        wanted = request.args.get(key)
        if wanted is not None and kind == "user" and wanted not in database.users:
            raise not_found()
        rows = [
            {key: name, "value": dict(limits)}
            for name, limits in table.items()
            if wanted in (None, name) and (kind == "user" or request.may_see_vhost(name))
        ]
        return listing(request, rows, (key,))

    return list_limits


def _setter(kind: str, key: str) -> Callable[[ApiRequest], Any]:
    def set_limit(request: ApiRequest) -> None:
        """Set one limit from the body's ``value``."""
        (value,) = required(request.json(), "value")
        applied(lambda: config(request).set_limit(kind, request.args[key], request.args["name"], value),
                validation=True)

    return set_limit


def _clearer(kind: str, key: str) -> Callable[[ApiRequest], Any]:
    def clear_limit(request: ApiRequest) -> None:
        """Remove one limit."""
        applied(lambda: config(request).clear_limit(kind, request.args[key], request.args["name"]))

    return clear_limit
