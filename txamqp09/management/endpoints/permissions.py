"""``/api/permissions`` and ``/api/topic-permissions``: who may do what where."""

from __future__ import annotations

from typing import Any

from txamqp09.broker.auth.permissions import Permissions
from txamqp09.broker.auth.users import TopicPermissions
from txamqp09.management.api import ApiRequest, Reply, Router, bad_request, listing, not_found
from txamqp09.management.configuration import applied, config, created, required

__all__ = ["permission_json", "register", "topic_permission_json"]


def register(router: Router) -> None:
    """Add the permission and topic-permission endpoints (administrators only)."""
    admin = "administrator"
    router.add("GET", "/api/permissions", list_permissions, tag=admin)
    router.add("GET", "/api/permissions/{vhost}/{user}", get_permission, tag=admin)
    router.add("PUT", "/api/permissions/{vhost}/{user}", put_permission, tag=admin)
    router.add("DELETE", "/api/permissions/{vhost}/{user}", delete_permission, tag=admin)
    router.add("GET", "/api/vhosts/{vhost}/permissions", vhost_permissions, tag=admin)
    router.add("GET", "/api/topic-permissions", list_topic_permissions, tag=admin)
    router.add("GET", "/api/topic-permissions/{vhost}/{user}", get_topic_permissions, tag=admin)
    router.add("PUT", "/api/topic-permissions/{vhost}/{user}", put_topic_permission, tag=admin)
    router.add("DELETE", "/api/topic-permissions/{vhost}/{user}", delete_topic_permissions, tag=admin)
    router.add("DELETE", "/api/topic-permissions/{vhost}/{user}/{exchange}", delete_topic_permissions, tag=admin)
    router.add("GET", "/api/vhosts/{vhost}/topic-permissions", vhost_topic_permissions, tag=admin)


def permission_json(user: str, vhost: str, permissions: Permissions) -> dict[str, Any]:
    """A permissions entry as RabbitMQ's API shows it."""
    return {"user": user, "vhost": vhost, "configure": permissions.configure,
            "write": permissions.write, "read": permissions.read}


def topic_permission_json(user: str, vhost: str, topic: TopicPermissions) -> dict[str, Any]:
    """A topic permissions entry as RabbitMQ's API shows it."""
    return {"user": user, "vhost": vhost, "exchange": topic.exchange, "write": topic.write, "read": topic.read}


def list_permissions(request: ApiRequest) -> Any:
    """Every user's permissions on every vhost."""
    rows = [permission_json(u, v, p) for (u, v), p in config(request).database.permissions.items()]
    return listing(request, rows, ("vhost", "user"))


def vhost_permissions(request: ApiRequest) -> Any:
    """The permissions on one vhost."""
    vhost = request.vhost().name
    rows = [permission_json(u, v, p) for (u, v), p in config(request).database.permissions.items() if v == vhost]
    return listing(request, rows, ("user",))


def get_permission(request: ApiRequest) -> dict[str, Any]:
    """One user's permissions on one vhost."""
    user, vhost = request.args["user"], request.args["vhost"]
    permissions = config(request).database.permissions_for(user, vhost)
    if permissions is None:
        raise not_found()
    return permission_json(user, vhost, permissions)


def _texts(values: list[Any]) -> list[str]:
    if not all(isinstance(value, str) for value in values):
        raise bad_request("configure, write and read must be strings (regular expressions)")
    return values


def put_permission(request: ApiRequest) -> Reply | None:
    """Set ``configure``, ``write`` and ``read``."""
    user, vhost = request.args["user"], request.args["vhost"]
    configure, write, read = _texts(required(request.json(), "configure", "write", "read"))
    existed = config(request).database.permissions_for(user, vhost) is not None
    applied(lambda: config(request).set_permissions(user, vhost, configure, write, read))
    return created(existed)


def delete_permission(request: ApiRequest) -> None:
    """Clear a user's permissions on a vhost."""
    applied(lambda: config(request).clear_permissions(request.args["user"], request.args["vhost"]))


def list_topic_permissions(request: ApiRequest) -> Any:
    """Every topic permission."""
    rows = [topic_permission_json(u, v, t) for (u, v, _), t in config(request).database.topic_permissions.items()]
    return listing(request, rows, ("vhost", "user"))


def vhost_topic_permissions(request: ApiRequest) -> Any:
    """The topic permissions on one vhost."""
    vhost = request.vhost().name
    rows = [topic_permission_json(u, v, t) for (u, v, _), t in config(request).database.topic_permissions.items()
            if v == vhost]
    return listing(request, rows, ("user",))


def get_topic_permissions(request: ApiRequest) -> Any:
    """One user's topic permissions on one vhost (404 without any)."""
    user, vhost = request.args["user"], request.args["vhost"]
    rows = [topic_permission_json(u, v, t) for (u, v, _), t in config(request).database.topic_permissions.items()
            if (u, v) == (user, vhost)]
    if not rows:
        raise not_found()
    return rows


def put_topic_permission(request: ApiRequest) -> Reply | None:
    """Set ``write`` and ``read`` for routing keys on ``exchange``."""
    user, vhost = request.args["user"], request.args["vhost"]
    exchange, write, read = _texts(required(request.json(), "exchange", "write", "read"))
    existed = (user, vhost, exchange) in config(request).database.topic_permissions
    applied(lambda: config(request).set_topic_permissions(user, vhost, exchange, write, read))
    return created(existed)


def delete_topic_permissions(request: ApiRequest) -> None:
    """Clear a user's topic permissions on a vhost (on one exchange, or all)."""
    applied(lambda: config(request).clear_topic_permissions(
        request.args["user"], request.args["vhost"], request.args.get("exchange")))
