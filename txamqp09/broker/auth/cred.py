"""twisted.cred for AMQP: checkers, the realm, and the user avatar.

::

    portal = Portal(AMQPRealm(database), [PasswordChecker(database), ExternalChecker(database)])
    interface, user, logout = yield portal.login(credentials, None, IAMQPUser)

The avatar (:class:`AMQPUser`) answers permission questions from the database
as it is at the time of asking, so changed permissions apply to connections
already open. The broker calls ``logout`` when the connection is lost; the realm
counts the connections each user has open (:meth:`AMQPRealm.connections`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from twisted.cred.checkers import ICredentialsChecker
from twisted.cred.credentials import IUsernamePassword
from twisted.cred.error import UnauthorizedLogin
from twisted.cred.portal import IRealm, Portal
from twisted.internet.defer import Deferred, fail, succeed
from zope.interface import Attribute, Interface, implementer

from txamqp09.broker.auth.passwords import hash_password
from txamqp09.broker.auth.permissions import Permission
from txamqp09.broker.auth.realms import Right
from txamqp09.broker.auth.sasl import IAMQPCredentials, IExternalCredentials, PeerInfo
from txamqp09.broker.auth.users import GUEST, UserDatabase

__all__ = [
    "AMQPRealm",
    "AMQPUser",
    "DIRECT_USER",
    "DirectUser",
    "ExternalChecker",
    "IAMQPUser",
    "LoopbackOnly",
    "PasswordChecker",
    "make_portal",
]


class IAMQPUser(Interface):
    """An authenticated user, as the broker sees them for one connection."""

    name = Attribute("The user's name (str).")
    tags = Attribute("The user's tags (tuple of str), e.g. ('administrator',).")

    def may_open_vhost(vhost: str) -> bool:  # type: ignore[misc]
        """Whether the user may open ``vhost`` (it exists and they have permissions on it)."""

    def allows(permission: Permission, vhost: str, name: str) -> bool:  # type: ignore[misc]
        """Whether ``permission`` on resource ``name`` in ``vhost`` is granted."""

    def can_configure(vhost: str, name: str) -> bool:  # type: ignore[misc]
        """Whether the user may create, delete or change resource ``name``."""

    def can_write(vhost: str, name: str) -> bool:  # type: ignore[misc]
        """Whether the user may put messages into resource ``name``."""

    def can_read(vhost: str, name: str) -> bool:  # type: ignore[misc]
        """Whether the user may take messages out of resource ``name``."""

    def realm_rights(vhost: str, realm: str) -> frozenset[Right]:  # type: ignore[misc]
        """The rights the user holds on an access realm of ``vhost``."""


@implementer(IAMQPUser)
class AMQPUser:
    """The avatar: a user name and a live view of their rights in the database."""

    def __init__(self, database: UserDatabase, name: str) -> None:
        self.database = database
        self.name = name

    def __repr__(self) -> str:
        return f"<AMQPUser {self.name!r}>"

    @property
    def tags(self) -> tuple[str, ...]:
        """The user's tags now (empty if the user was deleted)."""
        user = self.database.users.get(self.name)
        return user.tags if user is not None else ()

    def may_open_vhost(self, vhost: str) -> bool:
        """Whether ``vhost`` exists and the user has a permissions entry on it."""
        return vhost in self.database.vhosts and self.database.permissions_for(self.name, vhost) is not None

    def allows(self, permission: Permission, vhost: str, name: str) -> bool:
        """RabbitMQ's check: the permission's expression matches somewhere in ``name``."""
        permissions = self.database.permissions_for(self.name, vhost)
        return permissions is not None and permissions.allows(permission, name)

    def can_configure(self, vhost: str, name: str) -> bool:
        """Whether the user may create, delete or change resource ``name``."""
        return self.allows(Permission.CONFIGURE, vhost, name)

    def can_write(self, vhost: str, name: str) -> bool:
        """Whether the user may put messages into resource ``name``."""
        return self.allows(Permission.WRITE, vhost, name)

    def can_read(self, vhost: str, name: str) -> bool:
        """Whether the user may take messages out of resource ``name``."""
        return self.allows(Permission.READ, vhost, name)

    def realm_rights(self, vhost: str, realm: str) -> frozenset[Right]:
        """The rights the user holds on ``realm`` in ``vhost``."""
        return self.database.realm_rights(self.name, vhost, realm)


#: The name of the user a direct connection without a user acts as (RabbitMQ's).
DIRECT_USER = "none"


@implementer(IAMQPUser)
class DirectUser:
    """The avatar of a connection of this broker to itself that names no
    user (a shovel's or federation upstream's ``amqp://``): like RabbitMQ's
    direct connections, it acts as user ``none`` with every right on every
    virtual host there is; no password, no tags."""

    name = DIRECT_USER
    tags: tuple[str, ...] = ()

    def __init__(self, database: UserDatabase) -> None:
        self.database = database

    def __repr__(self) -> str:
        return "<DirectUser>"

    def may_open_vhost(self, vhost: str) -> bool:
        """Whether ``vhost`` exists."""
        return vhost in self.database.vhosts

    def allows(self, permission: Permission, vhost: str, name: str) -> bool:
        """Always."""
        return True

    def can_configure(self, vhost: str, name: str) -> bool:
        """Always."""
        return True

    def can_write(self, vhost: str, name: str) -> bool:
        """Always."""
        return True

    def can_read(self, vhost: str, name: str) -> bool:
        """Always."""
        return True

    def realm_rights(self, vhost: str, realm: str) -> frozenset[Right]:
        """Every right."""
        return frozenset(Right)


#: What twisted.cred checkers return (ours: the user's name in UTF-8).
_AvatarId = bytes | tuple[()]

#: Checked when the user does not exist, so that both cases take as long.
_NOBODY = hash_password("")


class LoopbackOnly(UnauthorizedLogin):
    """The password was right, but this user may only connect from this machine."""


def username_of(credentials: Any) -> str:
    """The user name *credentials* carry, as text."""
    name = credentials.username
    return name.decode("utf-8") if isinstance(name, bytes) else str(name)


def secret_of(credentials: Any) -> bytes | None:
    """The password *credentials* carry, as UTF-8 (None for mechanisms
    without one, such as EXTERNAL)."""
    password = getattr(credentials, "password", None)
    if password is None:
        return None
    return password if isinstance(password, bytes) else str(password).encode("utf-8")


def _peer(credentials: Any) -> PeerInfo:
    return credentials.peer if IAMQPCredentials.providedBy(credentials) else PeerInfo()


class _LoopbackPolicy:
    """Refuses ``loopback_users`` whose connection does not come from this machine."""

    def __init__(self, database: UserDatabase, loopback_users: Iterable[str]) -> None:
        self.database = database
        self.loopback_users = frozenset(loopback_users)

    def admit(self, name: str, credentials: Any) -> Deferred[_AvatarId]:
        """The avatar id (the UTF-8 name) unless a loopback-only user is remote."""
        if name in self.loopback_users and not _peer(credentials).is_loopback:
            return fail(LoopbackOnly(f"user {name!r} can only connect via localhost"))
        return succeed(name.encode("utf-8"))


@implementer(ICredentialsChecker)
class PasswordChecker(_LoopbackPolicy):
    """Checks user names and passwords (PLAIN, AMQPLAIN) against the database.

    :param loopback_users: users who may log in only from a loopback address
        (RabbitMQ's ``loopback_users``; ``guest`` by default).
    """

    credentialInterfaces = (IUsernamePassword,)

    def __init__(self, database: UserDatabase, loopback_users: Iterable[str] = (GUEST,)) -> None:
        super().__init__(database, loopback_users)

    def requestAvatarId(self, credentials: Any) -> Deferred[_AvatarId]:
        """The user's name if the password matches its hash; the same failure otherwise."""
        name = username_of(credentials)
        user = self.database.users.get(name)
        password = credentials.password
        if isinstance(password, bytes):
            password = password.decode("utf-8", "replace")
        hashed = user.password_hash if user is not None else _NOBODY
        if not hashed.verify(password) or user is None:
            return fail(UnauthorizedLogin("unknown user or wrong password"))
        return self.admit(name, credentials)


@implementer(ICredentialsChecker)
class ExternalChecker(_LoopbackPolicy):
    """Accepts a verified client certificate naming an existing user (EXTERNAL).

    The TLS layer has verified the certificate against the configured CA; the
    user it names must exist in the database (its password is not used).
    """

    credentialInterfaces = (IExternalCredentials,)

    def __init__(self, database: UserDatabase, loopback_users: Iterable[str] = (GUEST,)) -> None:
        super().__init__(database, loopback_users)

    def requestAvatarId(self, credentials: Any) -> Deferred[_AvatarId]:
        """The certificate's user if they exist."""
        name = username_of(credentials)
        if name not in self.database.users:
            return fail(UnauthorizedLogin("no user for the certificate"))
        return self.admit(name, credentials)


@implementer(IRealm)
class AMQPRealm:
    """Makes :class:`AMQPUser` avatars and counts open connections per user."""

    def __init__(self, database: UserDatabase) -> None:
        self.database = database
        self._connections: Counter[str] = Counter()

    def requestAvatar(
        self, avatarId: Any, mind: object, *interfaces: Any
    ) -> tuple[Any, AMQPUser, Callable[[], None]]:
        """``(IAMQPUser, avatar, logout)``; ``logout`` is safe to call more than once."""
        if IAMQPUser not in interfaces:
            raise NotImplementedError("AMQPRealm only makes IAMQPUser avatars")
        name = avatarId.decode("utf-8") if isinstance(avatarId, bytes) else avatarId
        self._connections[name] += 1
        done: list[bool] = []

        def logout() -> None:
            if not done:
                done.append(True)
                self._connections[name] -= 1
                if not self._connections[name]:
                    del self._connections[name]

        return IAMQPUser, AMQPUser(self.database, name), logout

    def connections(self, name: str) -> int:
        """How many logged-in connections ``name`` has."""
        return self._connections[name]


def make_portal(
    database: UserDatabase, loopback_users: Iterable[str] = (GUEST,)
) -> tuple[Portal, AMQPRealm]:
    """A portal with the password and certificate checkers over ``database``."""
    realm = AMQPRealm(database)
    checkers = [PasswordChecker(database, loopback_users), ExternalChecker(database, loopback_users)]
    return Portal(realm, checkers), realm
