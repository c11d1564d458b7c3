"""SQLite's write-ahead log: how many bytes it holds, and checkpoints beside the writer's commits.

The SQLite store checkpoints its log on a connection and a thread of their
own (:class:`Checkpointer`) while the writer goes on committing, and reads
the log's size from the wal-index (:class:`LogFrames`) to know when; see
:meth:`~txamqp09.store.sqlite.SQLiteStore._checkpoint`.
"""

from __future__ import annotations

import os
import sqlite3
import struct
import threading
from pathlib import Path
from typing import Callable, Optional

from twisted.internet.interfaces import IReactorFromThreads

from txamqp09.store.sql import describe

__all__ = ["Checkpointer", "LogFrames"]


class Checkpointer:
    """Checkpoints the write-ahead log on a connection and a thread of its
    own, when the writer asks (see :meth:`~txamqp09.store.sqlite.SQLiteStore._checkpoint`).

    :ivar asked: the writer asked for a checkpoint and has not caught up
        with it yet (set and cleared by the writer thread alone).
    :ivar ended: the checkpoint asked for has ended (set by the
        checkpointer, cleared by the writer).
    """

    def __init__(
        self, db: sqlite3.Connection, reactor: IReactorFromThreads,
        failed: Callable[[Optional[str]], None], name: str,
    ) -> None:
        self._db = db
        self._reactor = reactor
        self._failed = failed
        self._wanted = threading.Condition()
        self._waiting = False
        self._running = False
        self._stopping = False
        self._failing = False
        self.asked = False
        self.ended = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start the thread (writer thread)."""
        self._thread.start()

    def wake(self) -> None:
        """Checkpoint the log now (writer thread)."""
        with self._wanted:
            self._waiting = True
            self._wanted.notify()

    def settle(self) -> None:
        """Wait until no checkpoint is asked for or under way (writer thread)."""
        with self._wanted:
            while self._waiting or self._running:
                self._wanted.wait()

    def stop(self) -> None:
        """Let a checkpoint under way end, stop the thread and close the
        connection (writer thread; a second call changes nothing)."""
        with self._wanted:
            self._stopping = True
            self._wanted.notify()
        if self._thread.ident is not None:
            self._thread.join()
        self._db.close()

    def _run(self) -> None:
        while True:
            with self._wanted:
                while not self._waiting and not self._stopping:
                    self._wanted.wait()
                if self._stopping:
                    return
                self._waiting = False
                self._running = True
            try:
                self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            except Exception as error:
                if not self._failing:
                    self._failing = True
                    self._reactor.callFromThread(self._failed, describe(error))
            else:
                if self._failing:
                    self._failing = False
                    self._reactor.callFromThread(self._failed, None)
            with self._wanted:
                self._running = False
                self.ended = True
                self._wanted.notify_all()


#: The fields of the wal-index header (https://www.sqlite.org/walformat.html)
#: :class:`LogFrames` reads: the index's version, the page size and the
#: number of frames in the log (``mxFrame``), in the machine's byte order.
_WAL_INDEX_HEADER = struct.Struct("=I8x2xHI")
#: The wal-index version this store knows the header of.
_WAL_INDEX_VERSION = 3007000
#: Bytes of the log file's header, and of each frame's header.
_WAL_HEADER = 32
_FRAME_HEADER = 24


class LogFrames:
    """The bytes of frames the write-ahead log holds (writer thread).

    Once a checkpoint has copied every frame into the database, SQLite
    writes the next transaction from the start of the log's file again,
    over the old frames, without shrinking the file (unless it is larger
    than ``journal_size_limit``): the file's size then no longer tells what
    the log holds. SQLite keeps the count of frames in the header of the
    wal-index, the ``-shm`` file the connections to the database share
    (its layout is part of SQLite's documented file formats). When that
    header cannot be read, the file's size stands in for it.
    """

    def __init__(self, index: Path, log: Path) -> None:
        self._log = log
        try:
            self._index: Optional[int] = os.open(index, os.O_RDONLY)
        except OSError:
            self._index = None

    def size(self) -> int:
        """The bytes of the log's frames (with their headers)."""
        if self._index is not None:
            header = os.pread(self._index, _WAL_INDEX_HEADER.size, 0)
            if len(header) == _WAL_INDEX_HEADER.size:
                version, page_size, frames = _WAL_INDEX_HEADER.unpack(header)
                if version == _WAL_INDEX_VERSION:
                    page_size = 65536 if page_size == 1 else page_size
                    return _WAL_HEADER + frames * (page_size + _FRAME_HEADER) if frames else 0
        try:
            return self._log.stat().st_size
        except FileNotFoundError:
            return 0

    def close(self) -> None:
        """Close the wal-index's file (writer thread)."""
        if self._index is not None:
            os.close(self._index)
            self._index = None
