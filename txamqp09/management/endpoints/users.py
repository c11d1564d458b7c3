"""``/api/users``: users, their password hashes, tags and permissions."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred

from txamqp09.broker.auth.users import User
from txamqp09.management.api import ApiRequest, Reply, Router, bad_request, listing, not_found
from txamqp09.management.configuration import applied, config, created, saved
from txamqp09.management.endpoints.common import refuse_unknown_fields
from txamqp09.management.endpoints.permissions import permission_json, topic_permission_json

__all__ = ["register", "user_json"]


def register(router: Router) -> None:
    """Add the users endpoints (administrators only, as RabbitMQ)."""
    admin = "administrator"
    router.add("GET", "/api/users", list_users, tag=admin)
    router.add("GET", "/api/users/without-permissions", without_permissions, tag=admin)
    router.add("POST", "/api/users/bulk-delete", bulk_delete, tag=admin)
    router.add("GET", "/api/users/{user}", get_user, tag=admin)
    router.add("PUT", "/api/users/{user}", put_user, tag=admin)
    router.add("DELETE", "/api/users/{user}", delete_user, tag=admin)
    router.add("GET", "/api/users/{user}/permissions", user_permissions, tag=admin)
    router.add("GET", "/api/users/{user}/topic-permissions", user_topic_permissions, tag=admin)


def user_json(request: ApiRequest, user: User) -> dict[str, Any]:
    """A user as RabbitMQ's API shows it."""
    return {
        "name": user.name,
        "password_hash": user.password_hash.to_definition(),
        "hashing_algorithm": user.password_hash.algorithm,
        "tags": list(user.tags),
        "limits": dict(config(request).database.user_limits.get(user.name, {})),
    }


def list_users(request: ApiRequest) -> Any:
    """Every user."""
    users = config(request).database.users.values()
    return listing(request, [user_json(request, user) for user in users], ("name",))


def without_permissions(request: ApiRequest) -> Any:
    """The users without permissions on any vhost."""
    database = config(request).database
    holders = {user for user, _ in database.permissions}
    rows = [user_json(request, user) for user in database.users.values() if user.name not in holders]
    return listing(request, rows, ("name",))


def _user(request: ApiRequest) -> User:
    user = config(request).database.users.get(request.args["user"])
    if user is None:
        raise not_found()
    return user


def get_user(request: ApiRequest) -> dict[str, Any]:
    """One user."""
    return user_json(request, _user(request))


def _tags(value: Any) -> list[str]:
    if isinstance(value, str):
        return [tag.strip() for tag in value.split(",") if tag.strip()]
    if isinstance(value, list) and all(isinstance(tag, str) for tag in value):
        return value
    raise bad_request(f"tags must be a list of strings or a comma-separated string, not {value!r}")


def put_user(request: ApiRequest) -> Deferred[Reply | None]:
    """Create or change a user: ``password`` or ``password_hash`` (with
    ``hashing_algorithm``), and ``tags``."""
    name = request.name("user", "User name")
    body = request.json()
    refuse_unknown_fields(body, ("password", "password_hash", "hashing_algorithm", "tags"))
    existed = name in config(request).database.users
    if "password" not in body and "password_hash" not in body and not existed:
        raise bad_request("Validation failed\n\npassword or password_hash must be set\n")
    for key in ("password", "password_hash", "hashing_algorithm"):
        if key in body and not isinstance(body[key], str):
            raise bad_request(f"{key} must be a string")
    tags = _tags(body.get("tags", ""))
    applied(lambda: config(request).put_user(
        name, password=body.get("password"), password_hash=body.get("password_hash"),
        hashing_algorithm=body.get("hashing_algorithm"), tags=tags,
    ))
    return created(request, existed)


def delete_user(request: ApiRequest) -> Deferred[Reply | None]:
    """Delete a user (their connections are closed)."""
    _user(request)
    applied(lambda: config(request).delete_user(request.args["user"]))
    return saved(request)


def bulk_delete(request: ApiRequest) -> Deferred[Reply | None]:
    """Delete the users ``{"users": [...]}`` names (those that exist)."""
    names = request.json().get("users")
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise bad_request("users must be a list of user names")
    for name in names:
        if name in config(request).database.users:
            config(request).delete_user(name)
    return saved(request)


def user_permissions(request: ApiRequest) -> Any:
    """A user's permissions on every vhost."""
    user = _user(request).name
    database = config(request).database
    rows = [permission_json(u, v, p) for (u, v), p in database.permissions.items() if u == user]
    return listing(request, rows, ("vhost",))


def user_topic_permissions(request: ApiRequest) -> Any:
    """A user's topic permissions."""
    user = _user(request).name
    database = config(request).database
    rows = [topic_permission_json(u, v, t) for (u, v, _), t in database.topic_permissions.items() if u == user]
    return listing(request, rows, ("vhost", "exchange"))
