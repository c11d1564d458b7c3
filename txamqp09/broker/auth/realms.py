"""AMQP 0-8/0-9 access realms: named sets of exchanges and queues.

A realm lives in one virtual host and collects resources by name or by glob
pattern (``*`` any run of characters, ``?`` one character, ``[abc]`` a set;
see :func:`fnmatch.fnmatchcase`). Realm names are paths starting with
``/data`` (application resources) or ``/admin`` (administration), as the 0-8
specification requires.

A virtual host with no realms configured has one implicit realm, ``/data``,
holding every exchange and queue: the specification says every server MUST
implement ``/data``, and 0-8 clients request it before any work.

Users hold *rights* on realms: passive, active, write, read and exclusive.
Rights can be granted explicitly per user, virtual host and realm; a user with
no explicit grant on a realm gets rights derived from their vhost permissions
(see :func:`derived_rights`), so a 0-8 client asking for ``/data`` works with
no realm configuration at all.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from fnmatch import fnmatchcase

from txamqp09.broker.auth.permissions import (
    Permission,
    Permissions,
    ResourceKind,
    checked_name,
)

__all__ = [
    "DEFAULT_REALM",
    "REALM_PREFIXES",
    "AccessRealm",
    "Right",
    "derived_rights",
    "satisfies",
    "valid_realm_name",
]

#: Realm names must start with one of these (AMQP 0-8, access.request).
REALM_PREFIXES = ("/data", "/admin")


class Right(str, enum.Enum):
    """A right on a realm, as access.request names them."""

    #: learn about the realm's resources (passive declares).
    PASSIVE = "passive"
    #: create and delete the realm's resources.
    ACTIVE = "active"
    #: publish to the realm's exchanges.
    WRITE = "write"
    #: consume from, get from and purge the realm's queues.
    READ = "read"
    #: hold the realm as the only channel that uses it.
    EXCLUSIVE = "exclusive"


def valid_realm_name(name: str) -> bool:
    """Whether ``name`` is ``/data`` or ``/admin``, or a path below one of them."""
    return any(name == prefix or name.startswith(prefix + "/") for prefix in REALM_PREFIXES)


@dataclass(frozen=True)
class AccessRealm:
    """A named set of exchanges and queues in one virtual host.

    :ivar name: the realm's path, e.g. ``/data`` or ``/data/billing``.
    :ivar exchanges: exchange names or glob patterns.
    :ivar queues: queue names or glob patterns.
    """

    name: str
    exchanges: tuple[str, ...] = ("*",)
    queues: tuple[str, ...] = ("*",)

    def __post_init__(self) -> None:
        if not valid_realm_name(self.name):
            raise ValueError(
                f"realm name {self.name!r} must be /data or /admin or a path below them"
            )

    def contains(self, kind: ResourceKind, name: str) -> bool:
        """Whether the resource belongs to this realm (the default exchange as ``amq.default``)."""
        patterns = self.exchanges if kind is ResourceKind.EXCHANGE else self.queues
        resource = checked_name(name)
        return any(fnmatchcase(resource, pattern) for pattern in patterns)


#: The implicit realm of a virtual host that has none configured.
DEFAULT_REALM = AccessRealm("/data")

_RIGHT_FOR_PERMISSION = {
    Permission.CONFIGURE: Right.ACTIVE,
    Permission.WRITE: Right.WRITE,
    Permission.READ: Right.READ,
}


def derived_rights(permissions: Permissions | None) -> frozenset[Right]:
    """Realm rights for a user with no explicit grant on the realm.

    Passive if the user may use the virtual host at all; active, write and read
    where the matching configure, write and read expression is not empty; never
    exclusive (that takes an explicit grant). The vhost permissions are still
    checked resource by resource on every method, so deriving rights this way
    grants nothing the permissions do not.
    """
    if permissions is None:
        return frozenset()
    held = {right for permission, right in _RIGHT_FOR_PERMISSION.items() if permissions.holds(permission)}
    return frozenset({Right.PASSIVE, *held})


def satisfies(held: frozenset[Right], wanted: Right) -> bool:
    """Whether ``held`` rights cover ``wanted``; active covers passive."""
    return wanted in held or (wanted is Right.PASSIVE and Right.ACTIVE in held)
