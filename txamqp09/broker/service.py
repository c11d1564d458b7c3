"""The broker as a service: listeners inside, the message store around them.

:class:`BrokerService` is what ``twistd amqp09`` runs. Its children are the
listening services. Starting, it opens the message store and rebuilds the
broker from what the store recovered before any listener starts, so no
client sees a half-restored broker; then it starts the runtime
configuration (:mod:`txamqp09.broker.runtime`) from the store's settings
and the ``--definitions`` file. It closes the connections of a vhost or a
user deleted at run time. Stopping, it stops the listeners, closes
every client connection (320 CONNECTION_FORCED, as RabbitMQ does on
shutdown) so that nothing more reaches the store, and then closes the store,
whose Deferred fires once everything written so far is on disk.

While it runs, a :class:`~txamqp09.broker.collector.CollectorPolicy` keeps
the garbage collector's full passes off large backlogs (the restored one
first), and a :class:`~txamqp09.broker.disk.DiskMonitor` raises the disk
alarm when the store's file system runs low.
"""

from __future__ import annotations

import gc
import time
from typing import Any, Callable, Mapping, Optional, TypeVar

from twisted.application.service import MultiService
from twisted.internet.defer import Deferred, maybeDeferred
from twisted.logger import Logger

from txamqp09.broker.collector import DEFAULT_FREEZE_THRESHOLD, CollectorPolicy
from txamqp09.broker.disk import DiskMonitor
from txamqp09.broker.server import ServerFactory
from txamqp09.store.interface import MessageStore, Settings
from txamqp09.wire.errors import ConnectionForced

__all__ = ["BrokerService"]

_T = TypeVar("_T")


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
    """

    log = Logger()

    def __init__(
        self,
        factory: ServerFactory,
        store: Optional[MessageStore],
        freeze_threshold: int = DEFAULT_FREEZE_THRESHOLD,
        definitions: Optional[Mapping[str, Any]] = None,
        disk_monitor: Optional[DiskMonitor] = None,
    ) -> None:
        super().__init__()
        self.factory = factory
        self.store = store
        self.definitions = definitions
        self.disk_monitor = disk_monitor
        factory.config.store = store
        factory.config.vhost_deleted.append(self._vhost_deleted)
        factory.config.user_deleted.append(self._user_deleted)
        self.collector = CollectorPolicy(factory.broker, factory.clock, freeze_threshold)

    def startService(self) -> None:
        """Open the store and restore the broker, then start the listeners."""
        settings: Settings = {}
        if self.store is not None:
            settings = _without_collector(self._restore)
            # What was restored lives until it is consumed: keep it out of the
            # collector's full passes, which would walk every message each time.
            self.collector.freeze()
        report = self.factory.config.start(settings, self.definitions)
        for item in report.unsupported:
            self.log.warn("--definitions: not applied: {item}", item=item)
        self.collector.start()
        if self.disk_monitor is not None:
            self.disk_monitor.startService()
        super().startService()

    def _restore(self) -> Settings:
        """Open the store and rebuild the broker from what it recovered; the
        stored runtime configuration."""
        persistence = self.factory.broker.persistence
        assert self.store is not None and persistence is not None and persistence.store is self.store
        started = time.monotonic()
        recovered = self.store.open(body_budget=persistence.memory_budget)
        count = sum(len(messages) for messages in recovered.messages.values())
        self.factory.broker.restore(recovered)
        self.log.info(
            "message store opened: {queues} durable queues, {exchanges} durable exchanges, "
            "{messages} persistent messages restored in {seconds:.2f} s "
            "({paged} bytes of bodies left on disk)",
            queues=len(recovered.queues),
            exchanges=len(recovered.exchanges),
            messages=count,
            seconds=time.monotonic() - started,
            paged=persistence.paged_bytes,
        )
        return recovered.settings

    def _vhost_deleted(self, name: str) -> None:
        """Close the connections to a deleted vhost (320, as RabbitMQ)."""
        for connection in list(self.factory.connections):
            if connection.vhost == name:
                connection.close(ConnectionForced(f"vhost '{name}' is deleted"))

    def _user_deleted(self, name: str) -> None:
        """Close the connections of a deleted user (320, as RabbitMQ)."""
        for connection in list(self.factory.connections):
            if connection.user is not None and connection.user.name == name:
                connection.close(ConnectionForced(f"user '{name}' is deleted"))

    def stopService(self) -> Deferred[Any]:
        """Stop listening, close every connection, then close the store."""
        stopped: Deferred[Any] = maybeDeferred(super().stopService)
        for connection in list(self.factory.connections):
            connection.close(ConnectionForced("broker shutdown"))
        self.collector.stop()
        if self.disk_monitor is not None:
            self.disk_monitor.stopService()
        store = self.store
        if store is not None:
            stopped.addCallback(lambda _: store.close())
        return stopped
