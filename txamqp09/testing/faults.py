"""Faults for the SQLite store: writes that fail as a full or broken disk makes them fail.

:func:`faulty_store` makes an :class:`~txamqp09.store.sqlite.SQLiteStore`
whose writer connection raises the errors SQLite raises for ``ENOSPC``
(:data:`DISK_FULL`) and ``EIO`` (:data:`IO_ERROR`) at chosen statements::

    store, faults = faulty_store(path, reactor)
    store.open()
    faults.arm("INSERT INTO messages", DISK_FULL)   # the next batch of messages fails
    faults.arm("COMMIT", IO_ERROR, times=3)         # the next three commits fail

A fault fires before its statement runs, so a fault on ``COMMIT`` leaves a
transaction whose statements all ran, as a failing fsync does.

:func:`mount_small_file_system` gives a real full disk: a tmpfs of a chosen
size (root only; the reason is raised when it cannot be mounted).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import threading
from pathlib import Path
from typing import Any, Iterable

from twisted.internet.interfaces import IReactorFromThreads

from txamqp09.store.sqlite import SQLiteStore

__all__ = [
    "DISK_FULL",
    "Faults",
    "IO_ERROR",
    "MountFailed",
    "faulty_connection",
    "faulty_store",
    "mount_small_file_system",
    "unmount",
]

#: What SQLite reports when the file system is full (SQLITE_FULL).
DISK_FULL = "database or disk is full"
#: What SQLite reports when a read or write of the disk fails (SQLITE_IOERR).
IO_ERROR = "disk I/O error"


class Faults:
    """Errors armed for the statements of one store's writer connection
    (armed on any thread, raised on the writer's)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: [statement prefix (upper case), error text, times left]
        self._armed: list[list[Any]] = []
        #: Errors raised so far, as (statement prefix, error text).
        self.raised: list[tuple[str, str]] = []

    def arm(self, statement: str, error: str, times: int = 1) -> None:
        """Fail the next *times* statements that start with *statement* with *error*."""
        with self._lock:
            self._armed.append([statement.upper(), error, times])

    def disarm(self) -> None:
        """Fail nothing more."""
        with self._lock:
            self._armed.clear()

    def check(self, sql: str) -> None:
        """Raise the error armed for *sql*, if any."""
        statement = sql.lstrip().upper()
        with self._lock:
            for armed in self._armed:
                prefix, error, times = armed
                if statement.startswith(prefix) and times:
                    armed[2] = times - 1
                    self.raised.append((prefix, error))
                    raise sqlite3.OperationalError(error)


class _FaultyConnection(sqlite3.Connection):
    """A connection that consults :attr:`faults` before every statement."""

    faults: Faults

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        self.faults.check(sql)
        return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> sqlite3.Cursor:
        self.faults.check(sql)
        return super().executemany(sql, parameters)

    def executescript(self, script: str, /) -> sqlite3.Cursor:
        self.faults.check(script)
        return super().executescript(script)


def faulty_connection(faults: Faults) -> type[sqlite3.Connection]:
    """A class of SQLite connections that obey *faults* (for
    :attr:`SQLiteStore.connection_class` or
    :attr:`SQLiteStore.checkpoint_connection_class`)."""
    return type("FaultyConnection", (_FaultyConnection,), {"faults": faults})


def faulty_store(path: str | Path, reactor: IReactorFromThreads) -> tuple[SQLiteStore, Faults]:
    """An SQLite store at *path* and the faults its writer connection obeys."""
    faults = Faults()
    store = SQLiteStore(path, reactor)
    store.connection_class = faulty_connection(faults)
    return store, faults


class MountFailed(Exception):
    """A file system could not be mounted (the message says why)."""


def mount_small_file_system(directory: str | Path, size: int) -> None:
    """Mount a tmpfs of *size* bytes on *directory* (created if missing).

    :raises MountFailed: not root, or ``mount`` refused.
    """
    if os.geteuid() != 0:
        raise MountFailed("mounting a small file system needs root")
    Path(directory).mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
            check=True, capture_output=True, text=True,
        )
    except FileNotFoundError:
        raise MountFailed("no mount command") from None
    except subprocess.CalledProcessError as error:
        raise MountFailed(f"mount refused: {error.stderr.strip()}") from None


def unmount(directory: str | Path) -> None:
    """Unmount what :func:`mount_small_file_system` mounted on *directory*."""
    subprocess.run(["umount", "--lazy", str(directory)], check=True, capture_output=True)
