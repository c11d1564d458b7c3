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

__all__ = ["GUEST", "User", "UserDatabase", "VirtualHost"]

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
        self._forget(1, name)

    def _forget(self, position: int, name: str) -> None:
        """Drop the permissions and grants whose key names ``name`` at ``position``."""
        self.permissions = {key: p for key, p in self.permissions.items() if key[position] != name}
        self.grants = {key: g for key, g in self.grants.items() if key[position] != name}
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
