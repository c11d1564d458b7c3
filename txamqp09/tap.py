"""``twistd amqp09``: options and the service the plugin builds.

Examples::

    twistd -n amqp09 --port 5672
    twistd -n amqp09 --port 5672 --data-dir /var/lib/txamqp09
    twistd -n amqp09 --port 5672 --transient
    twistd -n amqp09 --port 5672 --store 'postgresql://broker@db1,db2/amqp?target_session_attrs=read-write'
    twistd -n amqp09 --port 5672 --store 'postgresql://broker@db1,db2/amqp?target_session_attrs=read-write' \\
        --node-name mq1 --lease-period 3 --lease-renew 1
    twistd -n amqp09 --listen tcp:5672:interface=127.0.0.1 --listen tcp:5673
    twistd -n amqp09 --port 5672 --management tcp:15672:interface=127.0.0.1
    twistd -n amqp09 --port 5672 --prometheus tcp:15692:interface=127.0.0.1
    twistd -n amqp09 --definitions definitions.json --ssl-port 5671 \\
        --ssl-key server.key --ssl-cert server.crt --ssl-ca ca.crt --ssl-verify required

The security options (users, SASL mechanisms, tickets, TLS) come from
:class:`~txamqp09.broker.auth.options.SecurityOptions`; docs/security.rst
explains them.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from pathlib import Path
from typing import Any, ClassVar, Optional, cast

from twisted.application import service
from twisted.internet.endpoints import (
    SSL4ServerEndpoint,
    TCP4ServerEndpoint,
    TCP6ServerEndpoint,
    serverFromString,
)
from twisted.internet.interfaces import (
    IProtocolFactory,
    IReactorFromThreads,
    IReactorTime,
    IStreamServerEndpoint,
)
import twisted
from twisted.python import usage

from txamqp09 import __version__
from txamqp09.broker import oplog
from txamqp09.broker.auth.options import SecurityOptions, port_number
from txamqp09.broker.collector import DEFAULT_FREEZE_THRESHOLD
from txamqp09.broker.federation.service import FederationService
from txamqp09.broker.disk import DEFAULT_DISK_FREE_LIMIT, DiskMonitor, StoreAlarm
from txamqp09.broker.memory import DEFAULT_MEMORY_HIGH_WATERMARK, parse_watermark
from txamqp09.broker.model import Broker, Persistence
from txamqp09.broker.model.store import DEFAULT_MEMORY_BUDGET
from txamqp09.broker.classes.staging import DEFAULT_STAGING_TTL
from txamqp09.broker.server import DEFAULT_HIGH_WATERMARK, ServerFactory
from txamqp09.broker.serving import ServingWindow
from txamqp09.broker.service import BrokerService
from txamqp09.management import Node, RecordingEndpoint, make_site
from txamqp09.management.node import StatisticsService
from txamqp09.prometheus import make_metrics_site
from txamqp09.shovel.definition import STATIC_SHOVELS, ShovelDefinition, static_shovels
from txamqp09.shovel.service import ShovelService
from txamqp09.store.sqlite import SQLiteStore
from txamqp09.store.url import POSTGRESQL, StoreURLError, check_store_url, store_from_url
from txamqp09.units import parse_size

__all__ = ["DEFAULT_LEASE_PERIOD", "DEFAULT_LEASE_RENEW", "Options", "makeService"]

#: Seconds a group's active broker holds its lease without renewing it.
DEFAULT_LEASE_PERIOD = 3.0
#: Seconds between two renewals of the lease.
DEFAULT_LEASE_RENEW = 1.0


class Options(SecurityOptions):
    """Command-line options of ``twistd amqp09`` (with the security options).

    :ivar static_shovels: the static shovels of the ``--definitions`` file,
        by name, once the options are parsed.
    """

    static_shovels: dict[str, ShovelDefinition]

    synopsis = "[--port PORT] [--listen ENDPOINT ...] [--definitions FILE] [--ssl-port PORT ...]"
    longdesc = (
        "Run an AMQP broker that speaks AMQP 0-9, 0-8 and 0-9-1 on the same "
        "port, chosen per connection by the protocol header. Without "
        "--definitions it has one virtual host, /, and one user, guest "
        "(password guest), who may connect only from this machine. --port "
        "listens on every interface; --listen tcp:5672:interface=127.0.0.1 "
        "listens on this machine only. twistd writes its process id to "
        "twistd.pid in the current directory: give a second broker started "
        "from the same directory its own --pidfile (a twistd option, before "
        "amqp09), or --pidfile= for none."
    )
    optParameters: ClassVar[list[list[Any]]] = [
        ["port", "p", None, "TCP port to listen on, on every interface (e.g. 5672)."],
        ["frame-max", None, 131072, "Largest frame the broker accepts (a size: 131072, 128KiB).", parse_size],
        ["channel-max", None, 2047,
         "Channels a 0-9-1 connection may have open at once (RabbitMQ's channel_max); "
         "the highest channel number on 0-8 and 0-9.", int],
        ["heartbeat", None, 60, "Heartbeat interval the broker proposes, in seconds (0: off).", int],
        ["high-watermark", None, DEFAULT_HIGH_WATERMARK,
         "Bytes of ready messages above which publishers are blocked (a size: 512MiB, 1GB).",
         parse_size],
        ["memory-high-watermark", None, DEFAULT_MEMORY_HIGH_WATERMARK,
         "Memory the broker may use before publishers are blocked (the memory alarm): "
         "a fraction of the machine's memory (0.4) or a size (768MiB).", parse_watermark],
        ["consumer-timeout", None, 1800000,
         "Milliseconds a delivery may stay unacknowledged before its channel is closed "
         "with 406 and its messages requeued (RabbitMQ's consumer_timeout; 0: never).", int],
        ["handshake-timeout", None, 10000,
         "Milliseconds a client has to open its connection (RabbitMQ's handshake_timeout).",
         int],
        ["connection-max", None, None,
         "Connections open at once beyond which new ones are refused (RabbitMQ's "
         "connection_max; default: no limit).", int],
        ["data-dir", None, None,
         "Directory of the message store (default: $XDG_STATE_HOME/txamqp09, "
         "or ~/.local/state/txamqp09)."],
        ["store", None, None,
         "Where durable entities and persistent messages are kept: sqlite:PATH (an SQLite "
         "file; default sqlite:DATA-DIR/store.db) or a libpq URI postgresql://user@host[:port]/database "
         "(several hosts with ?target_session_attrs=read-write follow a promoted standby; "
         "needs txamqp09[postgresql]). Brokers started with the same PostgreSQL database "
         "form a group: one serves, the others stand by (docs/high-availability.rst)."],
        ["node-name", None, None,
         "This broker's name in its group (default: the host name and the first AMQP port, "
         "e.g. mq1:5672)."],
        ["lease-period", None, None,
         f"Seconds a group's active broker holds its lease without renewing it (default "
         f"{DEFAULT_LEASE_PERIOD:g}): it stops serving before then, and a standby takes over "
         "once the lease expired.", float],
        ["lease-renew", None, None,
         f"Seconds between two renewals of the lease by the active broker (default "
         f"{DEFAULT_LEASE_RENEW:g}); shorter than --lease-period.", float],
        ["memory-budget", None, DEFAULT_MEMORY_BUDGET,
         "Bytes of message bodies held in memory (a size: 256MiB, 1GiB); beyond it "
         "they are paged out to the store and read back when their queue reaches them.",
         parse_size],
        ["disk-free-limit", None, DEFAULT_DISK_FREE_LIMIT,
         "Free space on the data directory's file system below which publishers are "
         "blocked (a size: 50MB, 1GiB; RabbitMQ's disk_free_limit.absolute).", parse_size],
        ["staging-ttl", None, DEFAULT_STAGING_TTL,
         "Seconds a file or message staging entry nobody touches is kept before it is "
         "abandoned (0: kept until the staging limit needs its room).", float],
        ["log-level", None, "info",
         f"The broker's log lines of this level and above: {', '.join(oplog.LEVELS)} "
         "(debug: HTTP requests; info: connections opened and closed; warn: refused "
         "logins and vhosts, handshake timeouts).", oplog.check_level],
        ["freeze-backlog", None, DEFAULT_FREEZE_THRESHOLD,
         "Queued messages from which the garbage collector's full passes skip the "
         "objects that survived the last one (0: never).", int],
    ]
    optFlags: ClassVar[list[list[Any]]] = [
        ["transient", None,
         "Keep nothing on disk: durable entities and persistent messages live in memory only."],
    ]

    def __init__(self) -> None:
        super().__init__()
        self["listen"] = []
        self["management"] = []
        self["prometheus"] = []
        self._dispatch.update({
            name: NamedCoercion(self, dispatch.coerce)
            for name, dispatch in self._dispatch.items()
            if isinstance(dispatch, usage.CoerceParameter)
        })

    def opt_version(self) -> None:
        """Print txamqp09's version (and Twisted's and Python's), then exit."""
        print(f"txamqp09 {__version__} (Twisted {twisted.__version__}, Python {platform.python_version()})")
        sys.exit(0)

    def parseOptions(self, options: Optional[list[str]] = None) -> None:
        """Parse *options*; under twistd (a subcommand), a usage error is one
        line on stderr and exit status 1 rather than twistd's whole help."""
        try:
            super().parseOptions(options)
        except usage.UsageError as error:
            if getattr(self, "parent", None) is None:
                raise
            raise SystemExit(f"amqp09: {error} (see twistd amqp09 --help)") from None

    def opt_listen(self, endpoint: str) -> None:
        """Listen on a Twisted server endpoint description, e.g.
        tcp:5672:interface=127.0.0.1 (repeatable)."""
        self["listen"].append(endpoint)

    def opt_management(self, endpoint: str) -> None:
        """Serve the management HTTP API (RabbitMQ's) on a Twisted server
        endpoint, e.g. tcp:15672:interface=127.0.0.1 or ssl:15671:... (repeatable;
        off unless given)."""
        self["management"].append(endpoint)

    def opt_prometheus(self, endpoint: str) -> None:
        """Serve Prometheus metrics (/metrics, /metrics/per-object,
        /metrics/detailed, with RabbitMQ's names) on a Twisted server endpoint,
        e.g. tcp:15692:interface=127.0.0.1 (repeatable; off unless given)."""
        self["prometheus"].append(endpoint)

    def postOptions(self) -> None:
        if self["port"] is not None:
            self["listen"].append(f"tcp:{port_number('port', self['port'])}")
        if not self["listen"]:
            self["listen"].append("tcp:5672")
        for option in ("listen", "management", "prometheus"):
            for description in self[option]:
                check_endpoint(option, description)
        if self["frame-max"] < 4096:
            raise usage.UsageError("--frame-max must be at least 4096")
        if self["consumer-timeout"] < 0:
            raise usage.UsageError("--consumer-timeout must be 0 (off) or a number of milliseconds")
        if self["handshake-timeout"] <= 0:
            raise usage.UsageError("--handshake-timeout must be a positive number of milliseconds")
        if self["connection-max"] is not None and self["connection-max"] < 1:
            raise usage.UsageError("--connection-max must be at least 1")
        if self["transient"] and self["data-dir"] is not None:
            raise usage.UsageError("--transient keeps nothing on disk: it takes no --data-dir")
        if self["store"] is not None:
            if self["transient"]:
                raise usage.UsageError("--transient keeps nothing: it takes no --store")
            try:
                check_store_url(self["store"])
            except StoreURLError as error:
                raise usage.UsageError(f"--store: {error}") from None
        self._check_group()
        if self["data-dir"] is None:
            self["data-dir"] = str(default_data_dir())
        self.check_security()
        try:
            self.static_shovels = static_shovels(self.definitions.source.get(STATIC_SHOVELS))
        except ValueError as error:
            raise usage.UsageError(f"--definitions {self['definitions']}: {error}") from None

    @property
    def in_group(self) -> bool:
        """Whether the broker is a member of a group (its store is PostgreSQL)."""
        return bool(self["store"]) and self["store"].startswith(POSTGRESQL)

    def lease_timing(self) -> tuple[float, float]:
        """The lease period and renewal interval, in seconds."""
        return self["lease-period"], self["lease-renew"]

    def _check_group(self) -> None:
        """Check the group's options and fill in their defaults."""
        given = [name for name in ("node-name", "lease-period", "lease-renew") if self[name] is not None]
        if given and not self.in_group:
            raise usage.UsageError(
                f"--{given[0]} applies to a group of brokers: give --store postgresql://..."
            )
        if self["lease-period"] is None:
            self["lease-period"] = DEFAULT_LEASE_PERIOD
        if self["lease-renew"] is None:
            self["lease-renew"] = min(DEFAULT_LEASE_RENEW, self["lease-period"] / 3)
        if not 0 < self["lease-renew"] < self["lease-period"]:
            raise usage.UsageError("--lease-renew must be positive and shorter than --lease-period")
        if self["node-name"] is None:
            self["node-name"] = f"{socket.gethostname()}:{_first_port(self['listen'])}"


class NamedCoercion(usage.CoerceParameter):
    """An option's type conversion whose usage error names the option
    (``--memory-budget: 'lots' is not a size: ...``)."""

    def dispatch(self, parameterName: str, value: Optional[str]) -> None:
        """Convert *value* and keep it as option *parameterName*.

        :raises usage.UsageError: it has no value or cannot be converted.
        """
        if value is None:
            raise usage.UsageError(f"--{parameterName} needs a value")
        try:
            self.options.opts[parameterName] = self.coerce(value)
        except ValueError as error:
            raise usage.UsageError(f"--{parameterName}: {error}") from None


#: The endpoint types whose port :func:`check_endpoint` checks (Twisted
#: keeps it in their ``_port``).
_PORTED_ENDPOINTS = (TCP4ServerEndpoint, TCP6ServerEndpoint, SSL4ServerEndpoint)


def check_endpoint(option: str, description: str) -> None:
    """Refuse a ``--OPTION`` endpoint description Twisted cannot make a
    server endpoint of, or whose port is outside 0-65535, before anything
    starts.

    :raises usage.UsageError: naming the option and the description.
    """
    from twisted.internet import reactor

    try:
        endpoint = serverFromString(reactor, description)
    except Exception as error:  # Twisted's parsers raise ValueError, TypeError, KeyError, OSError, SSL errors
        raise usage.UsageError(f"--{option} {description!r} is not a server endpoint: {error}") from None
    if isinstance(endpoint, _PORTED_ENDPOINTS) and not 0 <= endpoint._port <= 65535:
        raise usage.UsageError(
            f"--{option} {description!r}: the port must be from 0 to 65535, not {endpoint._port}"
        )


def _first_port(descriptions: list[str]) -> str:
    """The port of the first of the endpoint *descriptions* that names one
    (``tcp:5672:interface=...``, ``tcp:port=5672``), or ``amqp``."""
    for description in descriptions:
        for part in description.split(":")[1:]:
            key, _, value = part.rpartition("=")
            if key in ("", "port") and value.isdigit():
                return value
    return "amqp"


def default_data_dir() -> Path:
    """Where the message store lives without --data-dir: the XDG state directory."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "txamqp09"


def makeService(options: Options, clock: Optional[IReactorTime] = None) -> service.MultiService:
    """The broker: one listening service per endpoint (and the TLS port), sharing
    one factory, inside a :class:`~txamqp09.broker.service.BrokerService` that
    opens the message store first and closes it last."""
    from twisted.internet import reactor

    if clock is None:
        clock = reactor  # type: ignore[assignment]
    assert clock is not None
    # A member of a group is known by its name in the group everywhere.
    node_name = options["node-name"] if options.in_group else f"txamqp09@{socket.gethostname()}"
    window = ServingWindow()
    store = None
    identity = None
    if options.in_group:
        from txamqp09.group.lease import guard
        from txamqp09.group.records import Identity

        identity = Identity.new(options["node-name"])
        store = store_from_url(
            options["store"], window.gate(cast(IReactorFromThreads, reactor)),
            application_name=identity.session, guard=guard(identity),
        )
    elif not options["transient"]:
        store = store_from_url(
            options["store"] or f"sqlite:{Path(options['data-dir']) / 'store.db'}",
            cast(IReactorFromThreads, reactor), application_name=node_name,
        )
    factory = ServerFactory(
        clock,
        Broker(persistence=Persistence(store, options["memory-budget"]) if store is not None else None),
        security=options.security(clock),
        frame_max=options["frame-max"],
        channel_max=options["channel-max"],
        heartbeat=options["heartbeat"],
        high_watermark=options["high-watermark"],
        memory_high_watermark=options["memory-high-watermark"],
        consumer_timeout=options["consumer-timeout"] / 1000,
        negotiation_timeout=options["handshake-timeout"] / 1000,
        connection_max=options["connection-max"],
        staging_ttl=options["staging-ttl"],
        window=window,
    )
    monitor = None
    if isinstance(store, SQLiteStore):
        monitor = DiskMonitor(
            store.path.parent, options["disk-free-limit"], factory.alarms, clock, reserved=store.log_allowance,
        )
        monitor.watch(store)
    elif store is not None:
        StoreAlarm(factory.alarms).watch(store)
    definitions = None
    if options["definitions"]:
        # The static shovels are the shovel service's.
        definitions = {key: value for key, value in options.definitions.source.items() if key != STATIC_SHOVELS}
    broker: Any = BrokerService(
        factory, store, options["freeze-backlog"], definitions, monitor,
        data_dir=None if options["transient"] else options["data-dir"],
        store_location=None if store is None or options["store"] is None else store.location,
        definitions_file=options["definitions"],
    )
    broker.exit_on_startup_error = True
    twistd_options = getattr(options, "parent", None)
    broker.pidfile = twistd_options.get("pidfile") if twistd_options is not None else None
    oplog.set_level(options["log-level"])
    listeners: list[tuple[IStreamServerEndpoint, IProtocolFactory, str]] = [
        (serverFromString(reactor, description), factory, "amqp") for description in options["listen"]
    ]
    tls = options.tls_endpoint(clock)
    if tls is not None:
        listeners.append((tls, factory, "amqp/ssl"))
    federation = FederationService(factory.config, reactor, node_name, broker.amqp_address, factory.alarms)
    broker.add_serving(federation)
    shovels = ShovelService(factory.config, reactor, broker.amqp_address, node_name, options.static_shovels)
    node = Node(factory, store, node_name)
    node.federation = federation
    node.shovels = shovels
    if options["management"]:
        listeners = _with_management(broker, node, listeners, options["management"])
    if options["prometheus"]:
        listeners = listeners + _metrics_listeners(node, options["prometheus"], monitor, clock)
    for endpoint, served, protocol in listeners:
        broker.add_listener(endpoint, served, protocol)
    broker.add_serving(shovels)
    if identity is not None:
        node.group = broker.group = _group(options, identity, broker, store, window)
    return broker


def _group(options: Options, identity: Any, broker: BrokerService, store: Any, window: ServingWindow) -> Any:
    """The group *broker* is a member of (its store's database holds the
    lease); fenced, the broker removes its pid file and exits."""
    from twisted.internet import reactor

    from txamqp09.group.keeper import LeaseTiming
    from txamqp09.group.service import GroupService, exit_fenced

    def exit() -> None:
        broker.remove_pidfile()
        exit_fenced()

    group = GroupService(
        options["store"], identity, LeaseTiming(*options.lease_timing()), broker, window, reactor, exit=exit,
    )
    group.watch_store(store)
    return group


def _with_management(
    broker: service.MultiService,
    node: Node,
    listeners: list[tuple[IStreamServerEndpoint, IProtocolFactory, str]],
    descriptions: list[str],
) -> list[tuple[IStreamServerEndpoint, IProtocolFactory, str]]:
    """*listeners* plus the management API's, each telling *node* where it
    listens; the node's statistics are sampled while *broker* runs."""
    from twisted.internet import reactor

    site = make_site(node)
    listeners = listeners + [
        (serverFromString(reactor, description), site, "https" if description.startswith("ssl:") else "http")
        for description in descriptions
    ]
    StatisticsService(node).setServiceParent(broker)
    return [(RecordingEndpoint(endpoint, node, protocol), served, protocol) for endpoint, served, protocol in listeners]


def _metrics_listeners(
    node: Node, descriptions: list[str], disk: Optional[DiskMonitor], clock: IReactorTime
) -> list[tuple[IStreamServerEndpoint, IProtocolFactory, str]]:
    """The Prometheus metrics listeners (RabbitMQ's ``http/prometheus``),
    each telling *node* where it listens; *clock* paces their encoding."""
    from twisted.internet import reactor

    site = make_metrics_site(node, clock, disk)
    protocol = "http/prometheus"
    return [
        (RecordingEndpoint(serverFromString(reactor, description), node, protocol), site, protocol)
        for description in descriptions
    ]
