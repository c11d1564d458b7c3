"""The disk alarm: free space on the data directory's file system, as RabbitMQ watches it.

:class:`DiskMonitor` reads the free space of the file system that holds the
message store (``statvfs``: the blocks available to the broker's user) and
raises the ``"disk"`` alarm of :class:`~txamqp09.broker.alarms.ResourceAlarms`
while it is below the limit (``--disk-free-limit``, RabbitMQ's
``disk_free_limit.absolute``), which blocks every publishing connection;
consumers, acks and gets go on, and so space comes back as queues drain.
The alarm also stays up while the store reports that its writes fail (a
disk full before the limit was seen, or an I/O error), until a write
succeeds again and the free space is above the limit.

Space the store has the right to take at any moment counts as used: the
write-ahead log grows to its checkpoint size and is emptied again, and
counting it only when it is there would raise and clear the alarm with
each checkpoint.

The monitor looks again sooner the closer the free space is to the limit,
so that publishing at the disk's full speed cannot overshoot it between two
looks: the next look comes when :data:`ASSUMED_WRITE_RATE` bytes a second
could have used up the room left, but never later than
:data:`MAX_INTERVAL` nor sooner than :data:`MIN_INTERVAL` seconds.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Optional

from twisted.application.service import Service
from twisted.internet.interfaces import IDelayedCall, IReactorTime

from txamqp09.broker import oplog
from txamqp09.broker.alarms import ResourceAlarms
from txamqp09.store.interface import IMessageStore

__all__ = [
    "ASSUMED_WRITE_RATE",
    "DEFAULT_DISK_FREE_LIMIT",
    "DiskMonitor",
    "MAX_INTERVAL",
    "MIN_INTERVAL",
    "StoreAlarm",
]

#: RabbitMQ's default limit: 50 MB.
DEFAULT_DISK_FREE_LIMIT = 50_000_000
#: The fastest the broker is assumed to fill the disk, in bytes a second.
ASSUMED_WRITE_RATE = 250_000_000
#: Seconds between two looks, at least.
MIN_INTERVAL = 0.1
#: Seconds between two looks, at most.
MAX_INTERVAL = 10.0
#: The alarm's resource name.
DISK = "disk"


def free_bytes(directory: Path) -> int:
    """Bytes the broker may still write on the file system of *directory*."""
    status = os.statvfs(directory)
    return status.f_bavail * status.f_frsize


class DiskMonitor(Service):
    """Raises and clears the disk alarm (see the module's docstring).

    :param directory: the data directory (it exists once the store is open).
    :param limit: free bytes below which the alarm goes up.
    :param free: how free space is read (:func:`free_bytes`; tests give a fake).
    :param reserved: bytes the store may take at any moment without
        growing its data (see the module's docstring); they count as used.
    :ivar free: the free bytes at the last look, less those reserved (None
        before the first).
    :ivar store_error: what the store last reported of a failed write (None
        while its writes succeed).
    """

    def __init__(
        self,
        directory: Path,
        limit: int,
        alarms: ResourceAlarms,
        clock: IReactorTime,
        free: Callable[[Path], int] = free_bytes,
        reserved: Callable[[], int] = lambda: 0,
    ) -> None:
        self.directory = directory
        self.limit = limit
        self.alarms = alarms
        self.clock = clock
        self._read_free = free
        self._reserved = reserved
        self.free: Optional[int] = None
        self.store_error: Optional[str] = None
        self._next: Optional[IDelayedCall] = None

    def watch(self, store: IMessageStore) -> None:
        """Keep the alarm up while *store* reports failed writes."""
        store.add_failure_listener(self._store_reported)

    def startService(self) -> None:
        super().startService()
        self.check()

    def stopService(self) -> None:
        super().stopService()
        if self._next is not None and self._next.active():
            self._next.cancel()
        self._next = None

    def check(self) -> None:
        """Look at the free space now, raise or clear the alarm, and plan the next look."""
        if self._next is not None and self._next.active():
            self._next.cancel()
        try:
            self.free = free = self._read_free(self.directory) - self._reserved()
        except OSError as error:
            oplog.disk_unreadable(str(self.directory), str(error))
            free = self.free if self.free is not None else self.limit
        low = free < self.limit or self.store_error is not None
        if low and DISK not in self.alarms.active():
            oplog.disk_alarm(True, free, str(self.directory), self.limit, self.store_error)
            self.alarms.raise_alarm(DISK)
        elif not low and DISK in self.alarms.active():
            oplog.disk_alarm(False, free, str(self.directory), self.limit, None)
            self.alarms.clear_alarm(DISK)
        if self.running:
            self._next = self.clock.callLater(self.interval(free), self.check)

    def interval(self, free: int) -> float:
        """Seconds until the next look, with *free* bytes free now."""
        room = max(free - self.limit, 0)
        return min(max(room / ASSUMED_WRITE_RATE, MIN_INTERVAL), MAX_INTERVAL)

    def _store_reported(self, error: Optional[str]) -> None:
        """The store's writes fail (*error*) or work again (None): log the
        change, and look now."""
        if (error is None) != (self.store_error is None):
            oplog.store_writes(error)
        self.store_error = error
        self.check()


class StoreAlarm:
    """Raises the disk alarm while a store whose disk is not this machine's
    (a database server's) reports that its writes fail, and clears it once
    they work again: publishers wait while nothing can be confirmed.

    :ivar store_error: what the store last reported (None while its writes succeed).
    """

    def __init__(self, alarms: ResourceAlarms) -> None:
        self.alarms = alarms
        self.store_error: Optional[str] = None

    def watch(self, store: IMessageStore) -> None:
        """Follow *store*'s reports."""
        store.add_failure_listener(self._store_reported)

    def _store_reported(self, error: Optional[str]) -> None:
        if (error is None) != (self.store_error is None):
            oplog.store_writes(error)
        self.store_error = error
        if error is not None:
            self.alarms.raise_alarm(DISK)
        else:
            self.alarms.clear_alarm(DISK)
