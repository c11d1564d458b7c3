"""The broker's operator log: one line for each thing an operator acts on.

Every line an operator reads about the broker's life goes through this
module, so they share one namespace (``txamqp09.broker``), one style
(``key value`` facts after a short sentence) and one level filter, which
``twistd amqp09 --log-level`` sets::

    from txamqp09.broker import oplog

    oplog.set_level("warn")
    oplog.login_refused("guest", "10.0.0.7", "PLAIN", "wrong password")

Startup lines come in the order the broker does things: its data directory,
the definitions it applied, the users and virtual hosts it knows, what it
restored, each listener, and last that it accepts connections.

Hot paths (publish, deliver, ack) log nothing; these lines are per
connection at most.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

from twisted.logger import FilteringLogObserver, LogLevel, LogLevelFilterPredicate, Logger, globalLogPublisher

__all__ = [
    "LEVELS",
    "accepting",
    "connection_closed",
    "connection_opened",
    "data_directory",
    "definitions_applied",
    "handshake_timeout",
    "known_names",
    "listening",
    "log",
    "login_refused",
    "restored",
    "secret_update_refused",
    "set_level",
    "vhost_refused",
]

#: The names ``--log-level`` accepts, quietest last.
LEVELS = ("debug", "info", "warn", "error", "critical")

_levels = LogLevelFilterPredicate(defaultLogLevel=LogLevel.info)

#: The broker's operator log (other modules may add their lines through it).
log = Logger(
    namespace="txamqp09.broker",
    observer=FilteringLogObserver(globalLogPublisher, [_levels]),
)


def set_level(name: str) -> None:
    """Log only lines of level *name* (one of :data:`LEVELS`) and above.

    :raises ValueError: *name* is not a level.
    """
    if name not in LEVELS:
        raise ValueError(f"{name!r} is not a log level: use one of {', '.join(LEVELS)}")
    _levels.setLogLevelForNamespace("txamqp09.broker", LogLevel.levelWithName(name))


def _names(names: Iterable[str]) -> str:
    return ", ".join(repr(name) for name in sorted(names)) or "none"


def data_directory(path: Optional[str]) -> None:
    """Where the message store lives (None: the broker is transient)."""
    if path is None:
        log.info("transient broker: nothing is kept on disk (no data directory)")
    else:
        log.info("data directory {path} (message store {path}/store.db)", path=path)


def definitions_applied(path: Optional[str], users: int, vhosts: int, permissions: int) -> None:
    """The definitions file loaded (None: the defaults) and what it set up."""
    if path is None:
        log.info("no definitions file: default vhost '/' and user 'guest' (loopback only)")
    else:
        log.info(
            "definitions file {path} applied: {users} users, {vhosts} vhosts, {permissions} permissions",
            path=path, users=users, vhosts=vhosts, permissions=permissions,
        )


def known_names(users: Iterable[str], vhosts: Iterable[str]) -> None:
    """The users and virtual hosts the broker knows (names only)."""
    log.info("users: {users}; vhosts: {vhosts}", users=_names(users), vhosts=_names(vhosts))


def restored(queues: int, exchanges: int, messages: int, seconds: float, paged: int) -> None:
    """What the message store gave back at startup."""
    log.info(
        "message store restored: {queues} durable queues, {exchanges} durable exchanges, "
        "{messages} persistent messages in {seconds:.2f} s ({paged} bytes of bodies left on disk)",
        queues=queues, exchanges=exchanges, messages=messages, seconds=seconds, paged=paged,
    )


def listening(description: str, where: str) -> None:
    """A listener is bound: its endpoint *description* and *where* it is reachable."""
    log.info("listening on {where} ({description})", where=where, description=description)


def accepting(listeners: int) -> None:
    """Startup is over: the broker accepts connections."""
    log.info("accepting connections on {listeners} listeners", listeners=listeners)


def connection_opened(peer: str, user: str, vhost: str, version: str, product: str) -> None:
    """A client opened a virtual host."""
    log.info(
        "connection from {peer} opened: user {user!r}, vhost {vhost!r}, AMQP {version}, client {product}",
        peer=peer, user=user, vhost=vhost, version=version, product=product,
    )


def connection_closed(peer: str, user: Optional[str], reason: str, seconds: float) -> None:
    """A connection ended (*user* None: it never logged in)."""
    log.info(
        "connection from {peer} closed after {seconds:.1f} s: user {user}, {reason}",
        peer=peer, user=repr(user) if user is not None else "(none)", reason=reason, seconds=seconds,
    )


def login_refused(user: Optional[str], host: str, mechanism: str, reason: str) -> None:
    """A login was refused (the reason is the broker's, not the client's text)."""
    log.warn(
        "login refused: user {user} from {host} using {mechanism}: {reason}",
        user=repr(user) if user is not None else "(unnamed)", host=host, mechanism=mechanism, reason=reason,
    )


def secret_update_refused(user: str, host: str, reason: str) -> None:
    """connection.update-secret was refused."""
    log.warn("secret update refused: user {user!r} from {host}: {reason}", user=user, host=host, reason=reason)


def vhost_refused(peer: str, user: str, vhost: str, reason: str) -> None:
    """connection.open named a vhost that does not exist or that the user may not open."""
    log.warn(
        "connection from {peer} refused vhost {vhost!r} for user {user!r}: {reason}",
        peer=peer, user=user, vhost=vhost, reason=reason,
    )


def handshake_timeout(peer: str, seconds: float) -> None:
    """A connection did not finish opening in time and was dropped."""
    log.warn("connection from {peer} dropped: not opened within {seconds} s", peer=peer, seconds=seconds)
