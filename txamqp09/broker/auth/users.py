"""Users, virtual hosts, permissions and realm grants: the security database.

The model is RabbitMQ's: users with password hashes and tags, virtual hosts,
and per user per vhost a :class:`~txamqp09.broker.auth.permissions.Permissions`
triple. On top of it sit the 0-8/0-9 access realms of each vhost and the
rights users hold on them (:mod:`txamqp09.broker.auth.realms`).

:meth:`UserDatabase.default` is what a fresh RabbitMQ node starts with: the
vhost ``/`` and the user ``guest`` (password ``guest``, tag ``administrator``,
all permissions on ``/``). Who may log in as ``guest`` from where is decided
by the credentials checker (loopback only, by default).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from txamqp09.broker.auth.passwords import SHA256, PasswordHash, hash_password
from txamqp09.broker.auth.permissions import Permissions
from txamqp09.broker.auth.realms import (
    DEFAULT_REALM,
    AccessRealm,
    Right,
    derived_rights,
)

__all__ = [
    "GUEST",
    "LIMIT_NAMES",
    "TopicPermissions",
    "User",
    "UserDatabase",
    "VirtualHost",
    "check_limits",
]

#: The default user's name and password.
GUEST = "guest"


@dataclass(frozen=True)
class User:
    """A user account.

    :ivar name: the login name.
    :ivar password_hash: the salted hash; an unusable one means no password.
    :ivar tags: RabbitMQ user tags (``administrator``, ``monitoring``, ...).
    :ivar extra: other fields of the user's definitions entry, kept for export.
    """

    name: str
    password_hash: PasswordHash
    tags: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class VirtualHost:
    """A virtual host.

    :ivar name: its name, e.g. ``/``.
    :ivar extra: other fields of its definitions entry (description, tags,
        metadata, default_queue_type), kept for export.
    """

    name: str
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)


#: The limits a user or a vhost may have (RabbitMQ's), by kind.
LIMIT_NAMES = {
    "user": ("max-connections", "max-channels"),
    "vhost": ("max-connections", "max-queues"),
}


def check_limits(kind: str, limits: Any) -> dict[str, int]:
    """*limits* checked: an object of known limit names and integers
    (a negative one means no limit, as in RabbitMQ).

    :param kind: ``"user"`` or ``"vhost"``.
    :raises ValueError: an unknown name or a value that is not an integer.
    """
    if not isinstance(limits, Mapping):
        raise ValueError(f"{kind} limits must be a JSON object, not {limits!r}")
    known = LIMIT_NAMES[kind]
    for name, value in limits.items():
        if name not in known:
            raise ValueError(f"Unrecognised terms [{{<<\"{name}\">>,{value!r}}}] in limits")
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} should be a number, actually was {value!r}")
    return dict(limits)


@dataclass(frozen=True)
class TopicPermissions:
    """A user's write and read expressions for routing keys on one topic exchange.

    ``{username}`` and ``{vhost}`` in an expression stand for the user's
    name and the vhost's (RabbitMQ's variables); an empty expression allows
    only the empty routing key.

    :raises ValueError: an expression is not a valid regular expression.
    """

    exchange: str
    write: str = ".*"
    read: str = ".*"

    def __post_init__(self) -> None:
        for name in ("write", "read"):
            expression = getattr(self, name)
            try:
                re.compile(expression.replace("{username}", "").replace("{vhost}", ""))
            except re.error as error:
                raise ValueError(
                    f"{name} topic permission {expression!r} is not a regular expression: {error}"
                ) from None

    def allows(self, permission: str, routing_key: str, user: str, vhost: str) -> bool:
        """Whether ``write`` or ``read`` (*permission*) is granted for *routing_key*."""
        expression = getattr(self, permission) or "^$"
        expression = expression.replace("{username}", user).replace("{vhost}", vhost)
        return re.search(expression, routing_key) is not None


class UserDatabase:
    """Users, vhosts, permissions, access realms and realm grants, in memory.

    Read the attributes freely; change them only through the methods, which
    count every change in :attr:`generation` (caches of granted checks
    compare it to know they are still valid).
    """

    def __init__(self) -> None:
        #: How many changes have been made.
        self.generation = 0
        self.users: dict[str, User] = {}
        self.vhosts: dict[str, VirtualHost] = {}
        self.permissions: dict[tuple[str, str], Permissions] = {}
        self.realms: dict[str, dict[str, AccessRealm]] = {}
        self.grants: dict[tuple[str, str, str], frozenset[Right]] = {}
        #: Topic permissions by (user, vhost, exchange).
        self.topic_permissions: dict[tuple[str, str, str], TopicPermissions] = {}
        #: Limits of users and of vhosts, by name (absent: none).
        self.user_limits: dict[str, dict[str, int]] = {}
        self.vhost_limits: dict[str, dict[str, int]] = {}

    def copy(self) -> UserDatabase:
        """A copy whose changes do not reach this database."""
        duplicate = UserDatabase()
        duplicate.replace(self)
        duplicate.generation = 0
        return duplicate

    def replace(self, other: UserDatabase) -> None:
        """Hold what *other* holds (a copy of its tables), as one change."""
        self.users = dict(other.users)
        self.vhosts = dict(other.vhosts)
        self.permissions = dict(other.permissions)
        self.realms = {vhost: dict(realms) for vhost, realms in other.realms.items()}
        self.grants = dict(other.grants)
        self.topic_permissions = dict(other.topic_permissions)
        self.user_limits = {name: dict(limits) for name, limits in other.user_limits.items()}
        self.vhost_limits = {name: dict(limits) for name, limits in other.vhost_limits.items()}
        self.generation += 1

    @classmethod
    def default(cls) -> UserDatabase:
        """A database holding vhost ``/`` and ``guest``/``guest`` with all permissions on it."""
        database = cls()
        database.add_vhost(VirtualHost("/"))
        database.add_user(GUEST, GUEST, tags=("administrator",))
        database.set_permissions(GUEST, "/", Permissions(".*", ".*", ".*"))
        return database

    # -- users and vhosts ------------------------------------------------------

    def add_user(
        self, name: str, password: str | None = None, tags: Iterable[str] = ()
    ) -> User:
        """Add or replace a user; ``password=None`` makes one that cannot log in with a password."""
        hashed = hash_password(password) if password is not None else PasswordHash(SHA256, b"")
        return self.put_user(User(name, hashed, tuple(tags)))

    def put_user(self, user: User) -> User:
        """Add or replace ``user`` as it is (e.g. with a hash imported from RabbitMQ)."""
        if not user.name:
            raise ValueError("a user needs a non-empty name")
        self.users[user.name] = user
        self.generation += 1
        return user

    def delete_user(self, name: str) -> None:
        """Remove a user with their permissions and realm grants."""
        self._require_user(name)
        del self.users[name]
        self.user_limits.pop(name, None)
        self._forget(0, name)

    def add_vhost(self, vhost: VirtualHost) -> VirtualHost:
        """Add or replace a virtual host."""
        self.vhosts[vhost.name] = vhost
        self.generation += 1
        return vhost

    def delete_vhost(self, name: str) -> None:
        """Remove a vhost with the permissions, realms and grants that refer to it."""
        self._require_vhost(name)
        del self.vhosts[name]
        self.realms.pop(name, None)
        self.vhost_limits.pop(name, None)
        self._forget(1, name)

    def _forget(self, position: int, name: str) -> None:
        """Drop the permissions and grants whose key names ``name`` at ``position``."""
        self.permissions = {key: p for key, p in self.permissions.items() if key[position] != name}
        self.grants = {key: g for key, g in self.grants.items() if key[position] != name}
        self.topic_permissions = {
            key: t for key, t in self.topic_permissions.items() if key[position] != name
        }
        self.generation += 1

    def _require_user(self, name: str) -> None:
        if name not in self.users:
            raise ValueError(f"no such user: {name!r}")

    def _require_vhost(self, name: str) -> None:
        if name not in self.vhosts:
            raise ValueError(f"no such virtual host: {name!r}")

    # -- permissions -----------------------------------------------------------

    def set_permissions(self, user: str, vhost: str, permissions: Permissions) -> None:
        """Give ``user`` these permissions on ``vhost`` (both must exist)."""
        self._require_user(user)
        self._require_vhost(vhost)
        self.permissions[user, vhost] = permissions
        self.generation += 1

    def clear_permissions(self, user: str, vhost: str) -> None:
        """Take away all of ``user``'s permissions on ``vhost``, and so access to it."""
        self.permissions.pop((user, vhost), None)
        self.generation += 1

    def permissions_for(self, user: str, vhost: str) -> Permissions | None:
        """``user``'s permissions on ``vhost``, or None when they may not use it."""
        return self.permissions.get((user, vhost))

    def set_topic_permissions(self, user: str, vhost: str, permissions: TopicPermissions) -> None:
        """Give ``user`` these topic permissions on an exchange of ``vhost``."""
        self._require_user(user)
        self._require_vhost(vhost)
        self.topic_permissions[user, vhost, permissions.exchange] = permissions
        self.generation += 1

    def clear_topic_permissions(self, user: str, vhost: str, exchange: str | None = None) -> None:
        """Remove ``user``'s topic permissions on ``exchange`` of ``vhost`` (all exchanges if None)."""
        self.topic_permissions = {
            key: t
            for key, t in self.topic_permissions.items()
            if not (key[:2] == (user, vhost) and exchange in (None, key[2]))
        }
        self.generation += 1

    def topic_allows(self, user: str, vhost: str, exchange: str, permission: str, routing_key: str) -> bool:
        """RabbitMQ's topic check: allowed unless a topic permission on the
        exchange exists whose ``permission`` expression does not match."""
        topic = self.topic_permissions.get((user, vhost, exchange))
        return topic is None or topic.allows(permission, routing_key, user, vhost)

    # -- limits ----------------------------------------------------------------

    def set_limits(self, kind: str, name: str, limits: Mapping[str, int]) -> None:
        """Set the limits (see :data:`LIMIT_NAMES`) of user or vhost *name*; none if empty."""
        if kind == "user":
            self._require_user(name)
        else:
            self._require_vhost(name)
        table = self.user_limits if kind == "user" else self.vhost_limits
        if limits:
            table[name] = check_limits(kind, limits)
        else:
            table.pop(name, None)
        self.generation += 1

    def limit(self, kind: str, name: str, limit: str) -> int | None:
        """The *limit* of user or vhost *name*, or None when it has none
        (a negative value means none too)."""
        table = self.user_limits if kind == "user" else self.vhost_limits
        value = table.get(name, {}).get(limit)
        return value if value is not None and value >= 0 else None

    # -- access realms ---------------------------------------------------------

    def add_realm(self, vhost: str, realm: AccessRealm) -> None:
        """Configure an access realm in ``vhost`` (replacing one of the same name)."""
        self._require_vhost(vhost)
        self.realms.setdefault(vhost, {})[realm.name] = realm
        self.generation += 1

    def realms_of(self, vhost: str) -> Mapping[str, AccessRealm]:
        """The realms of ``vhost``: those configured, or the implicit ``/data``."""
        return self.realms.get(vhost) or {DEFAULT_REALM.name: DEFAULT_REALM}

    def grant(self, user: str, vhost: str, realm: str, rights: Iterable[Right]) -> None:
        """Set ``user``'s rights on a realm of ``vhost``, replacing derived ones."""
        self._require_user(user)
        self._require_vhost(vhost)
        self.grants[user, vhost, realm] = frozenset(rights)
        self.generation += 1

    def realm_rights(self, user: str, vhost: str, realm: str) -> frozenset[Right]:
        """The rights ``user`` holds on ``realm``: granted, else derived from permissions."""
        granted = self.grants.get((user, vhost, realm))
        if granted is not None:
            return granted
        return derived_rights(self.permissions_for(user, vhost))
