"""The broker as the management API sees it: one facade over its parts.

A :class:`Node` gathers what the endpoints read and change: the model's
virtual hosts, the open connections, the security database, the message
store, the listeners and the statistics. The API is built on a node::

    node = Node(factory, store)
    site = make_site(node)

Listeners that should appear in ``/api/overview`` and answer
``/api/health/checks/port-listener/{port}`` are wrapped in
:class:`RecordingEndpoint`, which notes each port once it listens.
"""

from __future__ import annotations

import os
import resource
import shutil
import socket
import time
from dataclasses import dataclass
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Optional, Protocol

from twisted.application.service import Service
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IListeningPort, IProtocolFactory, IStreamServerEndpoint
from zope.interface import implementer

from txamqp09.broker.model import Queue, Session, VirtualHost
from txamqp09.management.rows import QueueRows
from txamqp09.management.stats import Statistics
from txamqp09.management.views import queue_view

if TYPE_CHECKING:
    from txamqp09.broker.federation.service import FederationService
    from txamqp09.broker.server import ServerConnection, ServerFactory
    from txamqp09.shovel.service import ShovelService
    from txamqp09.store.interface import IMessageStore

__all__ = ["GroupView", "Listener", "Node", "RecordingEndpoint", "StatisticsService"]


class GroupView(Protocol):
    """The group a node is a member of, as the management API reads it
    (:class:`~txamqp09.group.service.GroupService`).

    :ivar timing: the lease's period and renewal interval (``period`` and
        ``renew``, seconds).
    """

    timing: Any

    @property
    def serving(self) -> bool:
        """Whether this node is the group's active broker."""

    def status(self) -> Any:
        """The group as this node sees it (its ``role`` and ``as_json()``:
        see :class:`~txamqp09.group.service.GroupStatus`)."""


@dataclass(frozen=True)
class Listener:
    """A port the broker listens on.

    :ivar protocol: ``amqp``, ``amqp/ssl``, ``http`` or ``https``, as RabbitMQ names them.
    :ivar ip_address: the address it is bound to.
    :ivar port: the port number.
    """

    protocol: str
    ip_address: str
    port: int


class Node:
    """One broker, for the management API.

    It makes the statistics and the kept queue rows and hands itself down
    to them as what they read of a broker (:class:`~.base.NodeLike`,
    :class:`~.stats.MeasuredNode`, :class:`~.rows.ListedNode`), with the
    view that builds a queue's row as a callback: they never import it.

    :param factory: the AMQP listeners' factory (its broker model, security
        and open connections).
    :param store: the message store, or None for a broker that keeps nothing.
    :param name: the node name RabbitMQ's JSON shows (``txamqp09@host`` by default).
    """

    def __init__(
        self, factory: ServerFactory, store: Optional[IMessageStore] = None, name: Optional[str] = None
    ) -> None:
        self.factory = factory
        self.broker = factory.broker
        self.security = factory.security
        self.database = factory.security.database
        self.store = store
        self.clock = factory.clock
        self.name = name if name is not None else f"txamqp09@{socket.gethostname()}"
        #: Wall-clock time the node was made, for ``uptime``.
        self.started = time.time()
        self.listeners: list[Listener] = []
        #: Counters sampled into rates (started by :meth:`start`).
        self.stats = Statistics(self, self.clock)
        #: How many changes have been made through the API (see :meth:`changed`).
        self.changes = 0
        #: Encoded queue rows and orders kept between requests (see :mod:`.rows`).
        self.queue_rows = QueueRows(self, lambda queue, unacked: queue_view(self, queue, unacked))
        #: The broker's dynamic shovels (``/api/shovels``), when it runs them.
        self.shovels: Optional[ShovelService] = None
        #: The broker's federation links (``/api/federation-links``), if it runs them.
        self.federation: Optional[FederationService] = None
        #: The group this node is a member of (None: it serves alone).
        self.group: Optional[GroupView] = None

    def start(self) -> None:
        """Start sampling statistics."""
        self.stats.start()

    def stop(self) -> None:
        """Stop sampling statistics."""
        self.stats.stop()

    def changed(self) -> None:
        """Note that a request changed something, so that lists made
        afterwards show it (see :meth:`.rows.QueueRows.snapshot`)."""
        self.changes += 1

    def vhost(self, name: str) -> Optional[VirtualHost]:
        """The model's virtual host *name*, or None if the security database has none."""
        if name not in self.database.vhosts:
            return None
        return self.broker.add_vhost(name)

    def vhosts(self) -> list[VirtualHost]:
        """Every virtual host, in name order."""
        return [self.broker.add_vhost(name) for name in sorted(self.database.vhosts)]

    @property
    def connections(self) -> list[ServerConnection]:
        """The AMQP connections that are open (negotiation finished)."""
        return [connection for connection in self.factory.connections if connection.vhost is not None]

    def sessions(self) -> Iterator[Session]:
        """The model sessions of every open connection's channels."""
        for connection in self.connections:
            yield from connection.client.sessions

    def unacked(self) -> dict[Queue, tuple[int, int]]:
        """Delivered, unacknowledged messages and their body bytes, by queue."""
        held: dict[Queue, tuple[int, int]] = {}
        for session in self.sessions():
            for delivery in session.unacked.values():
                count, size = held.get(delivery.queue, (0, 0))
                held[delivery.queue] = (count + 1, size + delivery.message.size)
        return held

    def alarms(self) -> list[str]:
        """The resources in alarm: the broker's memory and disk alarms, and
        ``memory`` while the ready-bytes throttle holds publishers back."""
        active = set(self.factory.alarms.active())
        if self.factory.throttle.blocked:
            active.add("memory")
        return sorted(active)

    def data_dir(self) -> str:
        """The directory holding the store (the working directory without one)."""
        path = getattr(self.store, "path", None)
        return os.path.dirname(str(path)) if path is not None else os.getcwd()

    def store_bytes(self) -> int:
        """The bytes the store's files take on disk now (its database and,
        beside it, SQLite's write-ahead log and index); 0 without a store."""
        path = getattr(self.store, "path", None)
        if path is None:
            return 0
        total = 0
        for suffix in ("", "-wal", "-shm"):
            try:
                total += os.stat(f"{path}{suffix}").st_size
            except OSError:
                pass
        return total

    def resources(self) -> dict[str, int]:
        """What the process uses now: ``mem_used`` (resident bytes),
        ``fd_used`` and ``sockets_used`` (open file descriptors and sockets,
        from /proc where there is one), ``disk_free`` (bytes free for the store)."""
        fd_used, sockets_used = _open_files()
        data_dir = self.data_dir()
        return {
            "mem_used": _resident_bytes(),
            "fd_used": fd_used,
            "sockets_used": sockets_used,
            "disk_free": shutil.disk_usage(data_dir).free if os.path.isdir(data_dir) else 0,
        }

    def listening(self, protocol: str, port: IListeningPort) -> None:
        """Note that *port* listens for *protocol*."""
        address: Any = port.getHost()
        self.listeners.append(Listener(protocol, getattr(address, "host", str(address)), getattr(address, "port", 0)))


def _open_files() -> tuple[int, int]:
    """File descriptors in use (and of those, sockets), from /proc when it exists."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return 0, 0
    sockets = 0
    for name in names:
        try:
            sockets += os.readlink(f"/proc/self/fd/{name}").startswith("socket:")
        except OSError:
            pass
    return len(names), sockets


def _resident_bytes() -> int:
    """The process's resident memory now (peak where /proc is missing)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class StatisticsService(Service):
    """Samples a node's statistics while it runs."""

    def __init__(self, node: Node) -> None:
        self.node = node

    def startService(self) -> None:
        super().startService()
        self.node.start()

    def stopService(self) -> Deferred[None] | None:
        self.node.stop()
        return super().stopService()  # type: ignore[no-any-return]


@implementer(IStreamServerEndpoint)
class RecordingEndpoint:
    """A server endpoint that tells a :class:`Node` where it listens.

    :param endpoint: the endpoint to listen on.
    :param node: told about the port once it listens.
    :param protocol: the protocol's name for the node's listener list.
    """

    def __init__(self, endpoint: IStreamServerEndpoint, node: Node, protocol: str) -> None:
        self.endpoint = endpoint
        self.node = node
        self.protocol = protocol

    def listen(self, protocolFactory: IProtocolFactory) -> Deferred[IListeningPort]:
        """Listen on the wrapped endpoint and record the port."""
        listening: Deferred[IListeningPort] = self.endpoint.listen(protocolFactory)

        def record(port: IListeningPort) -> IListeningPort:
            self.node.listening(self.protocol, port)
            return port

        return listening.addCallback(record)
