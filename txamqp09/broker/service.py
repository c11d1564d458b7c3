"""The broker as a service: listeners inside, the message store around them.

:class:`BrokerService` is what ``twistd amqp09`` runs. Its children are the
listening services. Starting, it opens the message store and rebuilds the
broker from what the store recovered before any listener starts, so no
client sees a half-restored broker; then it starts the runtime
configuration (:mod:`txamqp09.broker.runtime`) from the store's settings
and the ``--definitions`` file. Stopping, it stops the listeners, closes
every client connection (320 CONNECTION_FORCED, as RabbitMQ does on
shutdown) so that nothing more reaches the store, and then closes the store,
whose Deferred fires once everything written so far is on disk.

While it runs, a :class:`~txamqp09.broker.collector.CollectorPolicy` keeps
the garbage collector's full passes off large backlogs (the restored one
first), and a :class:`~txamqp09.broker.disk.DiskMonitor` raises the disk
alarm when the store's file system runs low.

In a group of brokers (:mod:`txamqp09.group`) the broker starts as a
standby: its management and metrics listeners run, but it neither restores
the store nor opens its *serving* children (the AMQP listeners, federation,
shovels) until the group makes it active (:meth:`BrokerService.serve`).
Meanwhile it follows the store's database (a
:class:`~txamqp09.store.interface.Followable` store keeps a copy of it
current), so that taking over reads only what changed since; it
stops serving at once when the group fences it
(:meth:`BrokerService.stop_serving`). Stopping, it closes the store first
and leaves the group last, so that a standby takes over from a store that
has written everything.
"""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Protocol, TypeVar

from twisted.application.internet import StreamServerEndpointService
from twisted.application.service import IService, MultiService, Service
from twisted.internet.defer import Deferred, DeferredList, maybeDeferred
from twisted.internet.error import CannotListenError
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import IAddress, IListeningPort, IProtocolFactory, IStreamServerEndpoint
from zope.interface import implementer

from txamqp09.broker import oplog

from txamqp09.broker.collector import DEFAULT_FREEZE_THRESHOLD, CollectorPolicy
from txamqp09.broker.model.store import restored_message
from txamqp09.broker.disk import DiskMonitor
from txamqp09.broker.server import ServerFactory
from txamqp09.broker.runtime import ConfigError
from txamqp09.links.uri import LocalAddress
from txamqp09.store.interface import Followable, IMessageStore, Settings
from txamqp09.store.sqlite import StoreInUse
from txamqp09.wire.errors import ConnectionForced

__all__ = ["AMQP_PROTOCOLS", "BrokerService", "Group", "StartupError"]

_T = TypeVar("_T")

#: The listeners' protocols that serve AMQP (opened only while the broker serves).
AMQP_PROTOCOLS = ("amqp", "amqp/ssl")


class Group(Protocol):
    """The group a broker is a member of, as the broker service sees it
    (:class:`~txamqp09.group.service.GroupService`)."""

    def startService(self) -> None:
        """Join the group (the broker stands by until it is made active)."""

    def stopService(self) -> Deferred[None]:
        """Leave the group (releasing the lease if held)."""


class StartupError(Exception):
    """The broker cannot start; the message says why, in one line."""


@implementer(IStreamServerEndpoint)
class _LoggedEndpoint:
    """A server endpoint that logs where it listens once it does."""

    def __init__(self, endpoint: IStreamServerEndpoint, protocol: str) -> None:
        self.endpoint = endpoint
        self.protocol = protocol
        #: Where it listens, once it does.
        self.address: Optional[IAddress] = None

    def listen(self, protocolFactory: IProtocolFactory) -> Deferred[IListeningPort]:
        """Listen on the wrapped endpoint and log the port's address."""
        listening: Deferred[IListeningPort] = self.endpoint.listen(protocolFactory)

        def log(port: IListeningPort) -> IListeningPort:
            self.address = port.getHost()
            oplog.listening(self.protocol, port.getHost())
            return port

        return listening.addCallback(log)


def _without_collector(work: Callable[[], _T]) -> _T:
    """Run *work* with the cyclic garbage collector off.

    Recovery makes millions of objects that live on; collections triggered
    by their allocation would walk all of them again and again (twice the
    time for a large store).
    """
    gc.disable()
    try:
        return work()
    finally:
        gc.enable()


class BrokerService(MultiService):
    """The broker's listeners (child services) and its message store.

    :param factory: the factory the listeners share (its broker is restored).
    :param store: the message store, or None for a broker that keeps
        nothing (memory only).
    :param freeze_threshold: queued messages from which the collector's
        survivors are frozen (see :mod:`txamqp09.broker.collector`).
    :param definitions: a definitions file's content, imported over the
        stored runtime configuration at every start (``--definitions``).
    :param disk_monitor: watches the store's free space (started once the
        store is open, before the listeners).
    :param data_dir: the store's directory, for the log (None: transient).
    :param store_location: where the store keeps its data, for the log
        (None: ``store.db`` in *data_dir*).
    :param definitions_file: where *definitions* came from, for the log.

    Starting, it logs (:mod:`txamqp09.broker.oplog`) each listener as it is
    bound, its data directory, the definitions it applied, the users and
    vhosts it knows and what it restored, and last that it accepts
    connections. A start that cannot succeed (a port in use, a data
    directory in use, definitions that cannot be applied) raises
    :class:`StartupError`; with :attr:`exit_on_startup_error` (``twistd
    amqp09``) it is one log line and exit status 1 instead.
    """

    #: Log a :class:`StartupError` and exit with status 1 rather than raise it.
    exit_on_startup_error = False
    #: The process id file twistd wrote for this process (None: none); such
    #: an exit removes it.
    pidfile: Optional[str] = None

    def __init__(
        self,
        factory: ServerFactory,
        store: Optional[IMessageStore],
        freeze_threshold: int = DEFAULT_FREEZE_THRESHOLD,
        definitions: Optional[Mapping[str, Any]] = None,
        disk_monitor: Optional[DiskMonitor] = None,
        *,
        data_dir: Optional[str] = None,
        store_location: Optional[str] = None,
        definitions_file: Optional[str] = None,
    ) -> None:
        super().__init__()
        self.factory = factory
        self.store = store
        self.definitions = definitions
        self.disk_monitor = disk_monitor
        self.data_dir = data_dir
        self.store_location = store_location
        self.definitions_file = definitions_file
        factory.config.store = store
        self._endpoints: list[tuple[_LoggedEndpoint, IService]] = []
        self.collector = CollectorPolicy(factory.broker, factory.clock, freeze_threshold)
        #: The group this broker is a member of (None: it serves alone).
        self.group: Optional[Group] = None
        #: The children that run only while the broker serves.
        self._serving: list[IService] = []

    def add_listener(self, endpoint: IStreamServerEndpoint, factory: IProtocolFactory, protocol: str) -> None:
        """Listen on *endpoint* with *factory* while the broker runs (AMQP
        ones while it serves); the operator log names *protocol* (``amqp``,
        ``http``...) and the address."""
        logged = _LoggedEndpoint(endpoint, protocol)
        listener = StreamServerEndpointService(logged, factory)
        self._endpoints.append((logged, listener))
        # A port that cannot be bound fails the start instead of being logged.
        listener._raiseSynchronously = True
        if protocol in AMQP_PROTOCOLS:
            self.add_serving(listener)
        else:
            listener.setServiceParent(self)

    def add_serving(self, child: IService) -> None:
        """Run *child* only while the broker serves (all the time alone; in
        a group, while it is the active broker)."""
        child.setServiceParent(self)
        self._serving.append(child)

    def addresses(self) -> list[tuple[str, str, int]]:
        """(protocol, host, port) of every TCP listener listening now."""
        listening: list[tuple[str, str, int]] = []
        for endpoint, listener in self._endpoints:
            address = endpoint.address
            if listener.running and isinstance(address, (IPv4Address, IPv6Address)):
                listening.append((endpoint.protocol, address.host, address.port))
        return listening

    def amqp_address(self) -> Optional[LocalAddress]:
        """Where this broker's first plain AMQP listener on TCP listens (an
        address of every interface given as loopback), once it does, with
        the direct logins of its links to it."""
        for endpoint, _ in self._endpoints:
            address = endpoint.address
            if endpoint.protocol == "amqp" and isinstance(address, (IPv4Address, IPv6Address)):
                host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(address.host, address.host)
                return LocalAddress(host, address.port, self.factory.security.direct_login)
        return None

    def privilegedStartService(self) -> None:
        """Bind the listeners (before privileges are shed, under twistd); in
        a group, only those that run while it stands by."""
        if self.group is None:
            self._starting(super().privilegedStartService)
        else:
            self._starting(lambda: self._each_child(lambda child: child.privilegedStartService()))

    def startService(self) -> None:
        """Open the store and restore the broker, then start the listeners;
        in a group, start what runs while it stands by, and join the group."""
        if self.group is None:
            self._starting(self._start)
            oplog.accepting(self._amqp_listeners())
            return
        Service.startService(self)
        self._starting(lambda: self._each_child(lambda child: child.startService()))
        self._follow()
        self.group.startService()

    def _follow(self) -> None:
        """Standing by, keep a copy of the store's database current (when the
        store can), its messages made ready for the broker as they come, so
        that taking over reads only what changed since."""
        persistence = self.factory.broker.persistence
        if isinstance(self.store, Followable) and persistence is not None:
            self.store.follow(persistence.memory_budget, restored_message)

    def _each_child(self, step: Callable[[IService], None]) -> None:
        """Apply *step* to every child that runs while the broker stands by."""
        for child in self:
            if child not in self._serving:
                step(child)

    def _amqp_listeners(self) -> int:
        return sum(1 for endpoint, _ in self._endpoints if endpoint.protocol in AMQP_PROTOCOLS)

    def _start(self) -> None:
        self._restore_and_configure()
        super().startService()

    def _start_serving_children(self) -> None:
        """Start the children that run only while this broker serves."""
        for child in self._serving:
            child.startService()

    def serve(self) -> None:
        """Restore from the store and open the serving children (the group
        made this broker active).

        :raises StartupError: it cannot (the store or a port failed).
        """
        _as_startup_error(self._restore_and_configure)
        _as_startup_error(self._start_serving_children)
        oplog.accepting(self._amqp_listeners())

    def stop_serving(self, reason: str) -> None:
        """Close every connection (320 CONNECTION_FORCED with *reason*),
        deliver nothing more, and stop the serving children (the group
        fenced this broker)."""
        self.factory.stop_serving(ConnectionForced(reason))
        for child in self._serving:
            if child.running:
                child.stopService()

    def _restore_and_configure(self) -> None:
        """Restore the broker from the store and start its runtime configuration."""
        oplog.data_directory(self.data_dir, self.store_location)
        settings: Settings = {}
        if self.store is not None:
            settings = _without_collector(self._restore)
            # What was restored lives until it is consumed: keep it out of the
            # collector's full passes, which would walk every message each time.
            self.collector.freeze()
        try:
            report = self.factory.config.start(settings, self.definitions)
        except ConfigError as error:
            raise StartupError(f"--definitions {self.definitions_file}: {error}") from None
        oplog.definitions_applied(self.definitions_file, self.definitions, report.unsupported)
        database = self.factory.security.database
        oplog.known_names(database.users, database.vhosts)
        self.collector.start()
        if self.disk_monitor is not None:
            self.disk_monitor.startService()

    def _starting(self, step: Callable[[], Any]) -> None:
        """Run a step of the start; a failure is a :class:`StartupError`."""
        try:
            _as_startup_error(step)
        except StartupError as error:
            if not self.exit_on_startup_error:
                raise
            oplog.startup_failed(str(error))
            self.remove_pidfile()
            raise SystemExit(1) from None

    def remove_pidfile(self) -> None:
        """Remove :attr:`pidfile` if it holds this process's id."""
        if not self.pidfile:
            return
        try:
            if Path(self.pidfile).read_text(encoding="ascii").strip() == str(os.getpid()):
                os.remove(self.pidfile)
        except (OSError, UnicodeDecodeError):
            return

    def _restore(self) -> Settings:
        """Open the store and rebuild the broker from what it recovered; the
        stored runtime configuration."""
        persistence = self.factory.broker.persistence
        assert self.store is not None and persistence is not None and persistence.store is self.store
        started = time.monotonic()
        recovered = self.store.open(body_budget=persistence.memory_budget)
        count = sum(len(messages) for messages in recovered.messages.values())
        self.factory.broker.restore(recovered)
        oplog.restored(
            len(recovered.queues), len(recovered.exchanges), count, time.monotonic() - started,
            persistence.paged_bytes, recovered.followed,
        )
        return recovered.settings

    def stopService(self) -> Deferred[Any]:
        """Stop listening, close every connection, then close the store,
        and leave the group last."""
        Service.stopService(self)
        stopped: Deferred[Any] = DeferredList(
            [maybeDeferred(child.stopService) for child in reversed(list(self)) if child.running]
        )
        for connection in list(self.factory.connections):
            connection.close(ConnectionForced("broker shutdown"))
        self.collector.stop()
        if self.disk_monitor is not None:
            self.disk_monitor.stopService()
        store = self.store
        if store is not None:
            stopped.addCallback(lambda _: store.close())
        group = self.group
        if group is not None:
            stopped.addCallback(lambda _: group.stopService())
        return stopped


def _as_startup_error(step: Callable[[], Any]) -> None:
    """Run *step*; a port or store that fails it raises :class:`StartupError`."""
    try:
        step()
    except (CannotListenError, StoreInUse, OSError) as error:
        raise StartupError(str(error)) from error
