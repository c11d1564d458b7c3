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

from collections.abc import Iterable, Mapping
from typing import Any, Optional

from twisted.internet.interfaces import IAddress
from twisted.logger import FilteringLogObserver, LogLevel, LogLevelFilterPredicate, Logger, globalLogPublisher
from twisted.python.failure import Failure

from txamqp09.wire.errors import AMQPError
from txamqp09.wire.fields import field_text

__all__ = [
    "LEVELS",
    "accepting",
    "check_level",
    "connection_closed",
    "connection_opened",
    "connection_refused",
    "consumer_timeout",
    "counted",
    "data_directory",
    "definitions_applied",
    "disk_alarm",
    "disk_unreadable",
    "group_role",
    "group_session",
    "handshake_timeout",
    "http_request",
    "known_names",
    "memory_alarm",
    "memory_watermark",
    "listening",
    "log",
    "login_refused",
    "restored",
    "secret_update_refused",
    "secret_updated",
    "set_level",
    "startup_failed",
    "store_writes",
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


def check_level(name: str) -> str:
    """*name* if it is one of :data:`LEVELS` (a ``--log-level`` value).

    :raises ValueError: it is not.
    """
    if name not in LEVELS:
        raise ValueError(f"{name!r} is not a log level: use one of {', '.join(LEVELS)}")
    return name


def set_level(name: str) -> None:
    """Log only lines of level *name* (one of :data:`LEVELS`) and above.

    :raises ValueError: *name* is not a level.
    """
    _levels.setLogLevelForNamespace("txamqp09.broker", LogLevel.levelWithName(check_level(name)))


def counted(count: int, noun: str, plural: Optional[str] = None) -> str:
    """*count* and *noun*, plural unless *count* is 1 (``"1 listener"``,
    ``"2 listeners"``, ``counted(0, "policy", "policies")``)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def _names(names: Iterable[str]) -> str:
    return ", ".join(repr(name) for name in sorted(names)) or "none"


def data_directory(path: Optional[str], store: Optional[str] = None) -> None:
    """Where the message store lives (None: the broker is transient): *store*
    names it when it is not ``store.db`` in the data directory."""
    if path is None:
        log.info("transient broker: nothing is kept on disk (no data directory)")
    else:
        log.info("data directory {path} (message store {store})", path=path, store=store or f"{path}/store.db")


def definitions_applied(
    path: Optional[str], definitions: Optional[Mapping[str, Any]], unsupported: Iterable[str]
) -> None:
    """The definitions file loaded (None: none was given) and what of it was
    applied; one more line for each part of it the broker does not act on."""
    if path is None or definitions is None:
        log.info("no definitions file")
        return
    counts = ", ".join(
        counted(len(definitions.get(kind) or ()), noun, kind)
        for kind, noun in (
            ("users", "user"), ("vhosts", "vhost"), ("permissions", "permission"), ("queues", "queue"),
            ("exchanges", "exchange"), ("bindings", "binding"), ("policies", "policy"),
        )
    )
    log.info("definitions file {path} applied: {counts}", path=path, counts=counts)
    for item in unsupported:
        log.warn("definitions file {path}: not applied: {item}", path=path, item=item)


def known_names(users: Iterable[str], vhosts: Iterable[str]) -> None:
    """The users and virtual hosts the broker knows (names only)."""
    log.info("users: {users}; vhosts: {vhosts}", users=_names(users), vhosts=_names(vhosts))


def restored(queues: int, exchanges: int, messages: int, seconds: float, paged: int, followed: bool = False) -> None:
    """What the message store gave back at startup (*followed*: as what
    changed since the copy it kept while the broker stood by)."""
    log.info(
        "message store restored: {queues}, {exchanges}, {messages} in {seconds:.2f} s "
        "({paged} of bodies left on disk{followed})",
        queues=counted(queues, "durable queue"), exchanges=counted(exchanges, "durable exchange"),
        messages=counted(messages, "persistent message"), seconds=seconds, paged=counted(paged, "byte"),
        followed="; read what changed since the copy kept while standing by" if followed else "",
    )


def listening(protocol: str, address: IAddress) -> None:
    """A listener for *protocol* (``amqp``, ``http``...) is bound to *address*."""
    host = getattr(address, "host", None)
    if host in ("0.0.0.0", "::"):
        where = f"every interface ({host}), port {address.port}"  # type: ignore[attr-defined]
    elif host is not None:
        where = f"{host} only, port {address.port}"  # type: ignore[attr-defined]
    else:
        where = str(address)
    log.info("listening for {protocol} on {where}", protocol=protocol, where=where)


def startup_failed(reason: str) -> None:
    """The broker cannot start (it exits with status 1 after this line)."""
    log.critical("cannot start: {reason}", reason=reason)


def accepting(listeners: int) -> None:
    """Startup is over: the broker accepts connections."""
    log.info("accepting connections on {listeners}", listeners=counted(listeners, "listener"))


def connection_opened(peer: str, user: str, vhost: str, version: str, client_properties: Mapping[str, Any]) -> None:
    """A client opened a virtual host (its product and version from its
    connection.start-ok properties)."""
    log.info(
        "connection from {peer} opened: user {user!r}, vhost {vhost!r}, AMQP {version}, client {product}",
        peer=peer, user=user, vhost=vhost, version=version, product=_product(client_properties),
    )


def _product(client_properties: Mapping[str, Any]) -> str:
    """``"pika 1.3.2"`` from a client's properties (``"unnamed"`` without a product)."""
    words = []
    for key in ("product", "version"):
        value = field_text(client_properties.get(key))
        if value:
            words.append(str(value))
    return " ".join(words) or "unnamed"


def connection_closed(peer: str, user: Optional[str], reason: Any, seconds: float) -> None:
    """A connection ended (*user* None: it never logged in): *reason* is the
    AMQP error it was closed with (200 for a normal close), or the
    transport's failure if it was simply lost."""
    if isinstance(reason, AMQPError):
        why = f"{reason.reply_code} {reason.reply_text}"
    elif isinstance(reason, Failure):
        why = f"connection lost: {reason.getErrorMessage()}"
    else:
        why = "connection lost"
    log.info(
        "connection from {peer} closed after {seconds:.1f} s: user {user}, {reason}",
        peer=peer, user=repr(user) if user is not None else "(none)", reason=why, seconds=seconds,
    )


def login_refused(user: Optional[str], host: str, mechanism: str, reason: str) -> None:
    """A login was refused (the reason is the broker's, not the client's text)."""
    log.warn(
        "login refused: user {user} from {host} using {mechanism}: {reason}",
        user=repr(user) if user is not None else "(unnamed)", host=host, mechanism=mechanism, reason=reason,
    )


def http_request(client: str, user: str, method: str, uri: str, status: int) -> None:
    """An HTTP request (management API, web UI, metrics) was answered: the
    access log, at debug (``--log-level debug``)."""
    log.debug(
        "http request from {client} (user {user}): {method} {uri} answered {status}",
        client=client, user=repr(user) if user else "(none)", method=method, uri=uri, status=status,
    )


def secret_update_refused(user: str, host: str, reason: str) -> None:
    """connection.update-secret was refused."""
    log.warn("secret update refused: user {user!r} from {host}: {reason}", user=user, host=host, reason=reason)


def secret_updated(user: str, host: str, reason: str) -> None:
    """connection.update-secret was accepted; *reason* is the client's."""
    log.info("secret updated: user {user!r} from {host}: {reason}", user=user, host=host, reason=reason)


def vhost_refused(peer: str, user: str, vhost: str, reason: str) -> None:
    """connection.open named a vhost that does not exist or that the user may not open."""
    log.warn(
        "connection from {peer} refused vhost {vhost!r} for user {user!r}: {reason}",
        peer=peer, user=user, vhost=vhost, reason=reason,
    )


def connection_refused(peer: str, limit: int) -> None:
    """A connection was refused: *limit* connections were open (--connection-max)."""
    log.warn(
        "connection from {peer} refused: {limit} connections are open, the limit "
        "(--connection-max)",
        peer=peer, limit=limit,
    )


def consumer_timeout(peer: str, channel: int, seconds: float) -> None:
    """A channel was closed: a delivery stayed unacknowledged longer than --consumer-timeout."""
    log.warn(
        "channel {channel} of the connection from {peer} closed: a delivery was not "
        "acknowledged within {seconds:g} s (--consumer-timeout); its messages are requeued",
        peer=peer, channel=channel, seconds=seconds,
    )


def memory_watermark(setting: float | int, watermark: int, total: int) -> None:
    """The memory alarm's watermark: *setting* (a fraction of the *total*
    bytes of the machine's memory, or bytes) is *watermark* bytes."""
    if isinstance(setting, float):
        log.info(
            "memory high watermark {watermark:.1f} MiB: {setting:g} of the machine's {total:.1f} MiB",
            watermark=watermark / 2**20, setting=setting, total=total / 2**20,
        )
    else:
        log.info("memory high watermark {watermark:.1f} MiB", watermark=watermark / 2**20)


def memory_alarm(raised: bool, used: int, watermark: int) -> None:
    """The memory alarm went up (publishers blocked) or cleared; sizes in bytes."""
    if raised:
        log.warn(
            "memory alarm: {used:.1f} MiB in use, above the high watermark of "
            "{watermark:.1f} MiB; publishing connections are blocked",
            used=used / 2**20, watermark=watermark / 2**20,
        )
    else:
        log.info(
            "memory alarm cleared: {used:.1f} MiB in use, below the high watermark of "
            "{watermark:.1f} MiB",
            used=used / 2**20, watermark=watermark / 2**20,
        )


def disk_alarm(raised: bool, free: int, directory: str, limit: int, store_error: Optional[str]) -> None:
    """The disk alarm went up (publishers blocked) or cleared; sizes in bytes.
    *store_error* is what the store last reported of a failed write, if any."""
    if raised:
        log.warn(
            "disk alarm set: {free:.1f} MiB free on {directory}, limit {limit:.1f} MiB{error}; "
            "publishers are blocked",
            free=free / 2**20, directory=directory, limit=limit / 2**20,
            error=f" (the store reports: {store_error})" if store_error else "",
        )
    else:
        log.info(
            "disk alarm cleared: {free:.1f} MiB free on {directory}, limit {limit:.1f} MiB",
            free=free / 2**20, directory=directory, limit=limit / 2**20,
        )


def store_writes(error: Optional[str]) -> None:
    """The message store's writes started failing (*error*) or work again (None)."""
    if error is not None:
        log.error("the message store cannot write: {error}; it tries again", error=error)
    else:
        log.info("the message store writes again")


def disk_unreadable(directory: str, error: str) -> None:
    """The free space of the data directory could not be read."""
    log.error("cannot read the free space of {directory}: {error}", directory=directory, error=error)


def handshake_timeout(peer: str, seconds: float) -> None:
    """A connection did not finish opening in time and was dropped."""
    log.warn("connection from {peer} dropped: not opened within {seconds} s", peer=peer, seconds=seconds)


def group_role(role: str, detail: str, level: str = "info") -> None:
    """This broker's role in its group changed to *role* (``standby``,
    ``active``, ``fenced``, ``stopped``); *detail* says why, in a sentence."""
    log.emit(
        LogLevel.levelWithName(level), "group role {role}: {detail}", role=role, detail=detail,
    )


def group_session(error: Optional[str]) -> None:
    """The group's lease session broke (*error*) or is back (None)."""
    if error is not None:
        log.warn("group lease session lost: {error}; reconnecting", error=error)
    else:
        log.info("group lease session open again")
