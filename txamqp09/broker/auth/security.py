"""The security layer in one object, as the server connection calls it.

:class:`Security` is built once per broker and shared by every connection
(``txamqp09.broker.server``)::

    security = Security(UserDatabase.default(), reactor)

    # connection.start
    peer = PeerInfo.from_transport(self.transport)
    mechanisms = security.mechanisms_field(peer)
    # connection.start-ok
    login = yield security.login(method.mechanism, method.response, peer)
    # connection.update-secret (0-9-1)
    yield security.check_secret(login.user, method.new_secret, method.reason, peer)
    # connection.open
    guard = security.open_vhost(login.user, method.virtual_host, tickets=version_has_tickets)
    # every channel method; basic.publish on the fast path; channel closed
    guard.check(channel, method)
    guard.check_publish(channel, ticket, exchange)
    guard.channel_closed(channel)
    # connection lost
    login.logout()

See docs/security.rst, "In the broker".
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Optional, Protocol

from twisted.cred.error import UnauthorizedLogin, UnhandledCredentials
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.python.failure import Failure

from txamqp09.broker.auth.cred import (
    DIRECT_USER,
    DirectUser,
    IAMQPUser,
    LoopbackOnly,
    make_portal,
    secret_of,
    username_of,
)
from txamqp09.broker.auth.errors import HardAccessRefused, LoginRefused
from txamqp09.broker.auth.methods import AccessGuard
from txamqp09.broker.auth.sasl import MechanismRegistry, PasswordCredentials, PeerInfo
from txamqp09.broker.auth.throttle import LoginThrottle
from txamqp09.broker.auth.tickets import RealmUsage, TicketTable
from txamqp09.broker.auth.users import GUEST, UserDatabase
from txamqp09.broker import oplog
from txamqp09.wire.errors import InvalidPath, NotAllowed

__all__ = ["Login", "Security", "refusal_text"]

_CONNECTION_OPEN = (10, 40)
#: What the portal gives for a login: (interface, avatar, logout).
_Avatar = tuple[Any, IAMQPUser, Callable[[], None]]


def refusal_text(mechanism: str) -> str:
    """The one reply text of every refused login: it says nothing of why."""
    return (
        f"ACCESS_REFUSED - Login was refused using authentication mechanism {mechanism}. "
        "For details see the broker logfile."
    )


@dataclass(frozen=True)
class Login:
    """A successful login.

    :ivar user: the avatar.
    :ivar logout: call it once the connection is lost.
    """

    user: IAMQPUser
    logout: Callable[[], None]


class Census(Protocol):
    """Counts what the broker has open, for the vhost and user limits."""

    def vhost_connections(self, vhost: str) -> int:
        """Open connections (connection.open done) on *vhost*."""

    def user_channels(self, user: str) -> int:
        """Open channels of all of *user*'s connections."""


class Security:
    """Authentication and authorization for a broker.

    :param database: users, vhosts, permissions, realms.
    :param clock: for the login throttle.
    :param mechanisms: the SASL mechanisms to offer.
    :param loopback_users: users allowed to log in only from this machine.
    :param accept_ticket_zero: whether 0-8/0-9 clients may work without
        access.request (ticket 0); 0-9-1 has no tickets and always may.
    :param throttle: the login throttle (a default one on ``clock`` if None).
    """

    def __init__(
        self,
        database: UserDatabase,
        clock: IReactorTime,
        *,
        mechanisms: MechanismRegistry | None = None,
        loopback_users: Iterable[str] = (GUEST,),
        accept_ticket_zero: bool = True,
        throttle: LoginThrottle | None = None,
    ) -> None:
        self.database = database
        self.mechanisms = mechanisms if mechanisms is not None else MechanismRegistry()
        self.portal, self.realm = make_portal(database, loopback_users)
        self.throttle = throttle if throttle is not None else LoginThrottle(clock)
        self.accept_ticket_zero = accept_ticket_zero
        self.usage = RealmUsage()
        #: What is open, for the limits; the server factory sets it (None: no
        #: vhost connection or channel limit is checked).
        self.census: Census | None = None
        #: The passwords of direct logins by the user they act as (None: DirectUser), and back.
        self._direct_passwords: dict[Optional[str], str] = {}
        self._direct_users: dict[str, Optional[str]] = {}

    def direct_login(self, user: Optional[str]) -> tuple[str, str]:
        """A user name and password for connections of this broker to itself
        (a shovel's or federation upstream's URI without a host or a
        password), which log in as RabbitMQ's direct connections do: as
        *user* without checking a password (the user must exist), or, for
        None, as user ``none`` with every right (:class:`DirectUser`).

        The password is random, one per user acted as, and known only in
        this process (it changes with each start).
        """
        password = self._direct_passwords.get(user)
        if password is None:
            password = self._direct_passwords[user] = secrets.token_urlsafe(32)
            self._direct_users[password] = user
        return (DIRECT_USER if user is None else user), password

    def _direct_user(self, user: str | None, secret: bytes | None) -> Deferred[_Avatar] | None:
        """The login of a password :meth:`direct_login` handed out for
        *user*, or None when *secret* is not one for *user*."""
        password = secret.decode("utf-8", "replace") if secret is not None else ""
        if user is None or password not in self._direct_users:
            return None
        acting = self._direct_users[password]
        if acting is None:
            return succeed((IAMQPUser, DirectUser(self.database), lambda: None)) if user == DIRECT_USER else None
        if acting == user and user in self.database.users:
            return succeed(self.realm.requestAvatar(user.encode("utf-8"), None, IAMQPUser))
        return None

    def mechanisms_field(self, peer: PeerInfo) -> bytes:
        """connection.start's ``mechanisms`` for this peer."""
        return self.mechanisms.mechanisms_field(peer)

    def login(self, mechanism: str, response: bytes, peer: PeerInfo) -> Deferred[Login]:
        """Authenticate a connection.start-ok.

        The password is checked at once: a correct one is let in whatever
        failed before or fails meanwhile. A refusal is answered after the
        delay the throttle gives it (see :class:`LoginThrottle`): per user
        and host, so one client's failures slow down nobody else; at once
        when the throttle holds as many refusals as it may, with a text
        saying so. A password :meth:`direct_login` handed out logs in as it
        says. Fails with :class:`LoginRefused` (403, a connection
        exception): for an unoffered mechanism or a malformed response with
        a text saying so, for a wrong user or password with
        :func:`refusal_text`, which does not tell which. Every refusal is
        logged with the user name and the host.
        """
        try:
            credentials = self.mechanisms.credentials(mechanism, response, peer)
        except LoginRefused as error:
            malformed: LoginRefused | None = error
            user, secret = None, None
        else:
            malformed, user, secret = None, username_of(credentials), secret_of(credentials)
        direct = self._direct_user(user, secret)
        if direct is not None:
            return direct.addCallback(self._logged_in)
        if malformed is not None:
            return self._failed(None, mechanism, peer, malformed.reply_text, malformed.reply_text)
        checked = self.portal.login(credentials, None, IAMQPUser)
        return checked.addCallbacks(
            self._logged_in, self._refused, errbackArgs=(user, mechanism, peer),
        )

    def _logged_in(self, result: _Avatar) -> Login:
        _, user, logout = result
        return Login(user, logout)

    def _refused(
        self, failure: Failure, user: str | None, mechanism: str, peer: PeerInfo
    ) -> Deferred[Login] | Failure:
        failure.trap(UnauthorizedLogin, UnhandledCredentials)
        reason = str(failure.value)
        text = f"ACCESS_REFUSED - {reason}" if failure.check(LoopbackOnly) else refusal_text(mechanism)
        return self._failed(user, mechanism, peer, reason, text)

    def _failed(self, user: str | None, mechanism: str, peer: PeerInfo, reason: str, text: str) -> Deferred[Login]:
        """Log a refused login and answer it (403, *text*) once the throttle
        lets it; at once, saying why, when the throttle may not hold it."""
        answered = self.throttle.failed(user, peer.host)
        if answered is None:
            waiting = self._waiting_refusals(peer.host)
            oplog.login_refused(user, peer.host, mechanism, f"{reason} (answered at once: {waiting} wait)")
            return fail(LoginRefused(f"{text} Answered at once: {waiting} are already waiting for their reply."))
        oplog.login_refused(user, peer.host, mechanism, reason)
        return answered.addCallback(lambda _: Failure(LoginRefused(text)))

    def _waiting_refusals(self, host: str) -> str:
        """Which of the throttle's bounds *host*'s refusal met, in words."""
        held = self.throttle.held(host)
        if held >= self.throttle.max_held_per_host:
            return f"{held} refused logins from {host}"
        return f"{self.throttle.held()} refused logins"

    def check_secret(self, user: IAMQPUser, secret: bytes, reason: str, peer: PeerInfo) -> Deferred[None]:
        """connection.update-secret, answered as RabbitMQ 3.10 answers it.

        RabbitMQ asks only the authentication backends whose credentials
        can expire (OAuth 2 tokens, for one) to check a new secret; its
        internal user database, whose passwords do not expire, accepts any
        and the connection keeps its login. So here: a checker with a true
        ``credentials_expire`` attribute (one registered on :attr:`portal`
        for tokens, say) checks the secret as a login, without keeping the
        new login; the built-in checkers have none, and the secret is
        accepted unchecked. Either way the update is logged with *reason*.

        Fails with :class:`~txamqp09.wire.errors.NotAllowed` (530, RabbitMQ's
        text) when an expiring checker refuses the secret.
        """
        credentials = PasswordCredentials(user.name, secret.decode("utf-8", "replace"), "PLAIN", peer)
        if not getattr(self._checker_for(credentials), "credentials_expire", False):
            oplog.secret_updated(user.name, peer.host, reason)
            return succeed(None)
        checked = self.portal.login(credentials, None, IAMQPUser)

        def accepted(result: _Avatar) -> None:
            result[2]()
            oplog.secret_updated(user.name, peer.host, reason)

        def refused(failure: Failure) -> Failure:
            failure.trap(UnauthorizedLogin, UnhandledCredentials)
            oplog.secret_update_refused(user.name, peer.host, str(failure.value))
            return Failure(NotAllowed("New secret was refused by one of the backends", 10, 70))

        return checked.addCallbacks(accepted, refused)

    def _checker_for(self, credentials: Any) -> Any:
        """The checker :attr:`portal` hands *credentials* to, or None."""
        for interface, checker in self.portal.checkers.items():
            if interface.providedBy(credentials):
                return checker
        return None

    def open_vhost(self, user: IAMQPUser, vhost: str, *, tickets: bool) -> AccessGuard:
        """Check connection.open and make the connection's :class:`AccessGuard`.

        :param tickets: whether the protocol version has access tickets
            (0-8 and 0-9: True; 0-9-1: False).
        :raises InvalidPath: the vhost does not exist (402).
        :raises HardAccessRefused: the user has no permissions on it (403).
        """
        if vhost not in self.database.vhosts:
            raise InvalidPath(f"virtual host {vhost!r} does not exist", *_CONNECTION_OPEN)
        if not user.may_open_vhost(vhost):
            raise HardAccessRefused(
                f"ACCESS_REFUSED - access to vhost {vhost!r} refused for user {user.name!r}: "
                "they have no permissions on it",
                *_CONNECTION_OPEN,
            )
        self._check_connection_limits(user.name, vhost)
        accept_zero = self.accept_ticket_zero or not tickets
        table = TicketTable(self.usage, self.database, user, vhost, accept_zero)
        return AccessGuard(user, vhost, table)

    def _check_connection_limits(self, user: str, vhost: str) -> None:
        """Refuse a connection beyond the vhost's or the user's ``max-connections``
        (530, RabbitMQ's texts)."""
        limit = self.database.limit("vhost", vhost, "max-connections")
        if limit is not None and self.census is not None and self.census.vhost_connections(vhost) >= limit:
            raise NotAllowed(
                f"access to vhost '{vhost}' refused for user '{user}': "
                f"connection limit ({limit}) is reached",
                *_CONNECTION_OPEN,
            )
        limit = self.database.limit("user", user, "max-connections")
        # The realm counts this connection already (it is logged in).
        if limit is not None and self.realm.connections(user) - 1 >= limit:
            raise NotAllowed(
                f"connection refused for user '{user}': user connection limit ({limit}) is reached",
                *_CONNECTION_OPEN,
            )

    def check_channel_limit(self, user: str) -> None:
        """Refuse channel.open beyond the user's ``max-channels`` (530, RabbitMQ's text)."""
        limit = self.database.limit("user", user, "max-channels")
        if limit is not None and self.census is not None and self.census.user_channels(user) >= limit:
            raise NotAllowed(
                f"number of channels opened for user '{user}' has reached the maximum "
                f"allowed user limit of ({limit})",
                20, 10,
            )
