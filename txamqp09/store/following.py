"""Following a store's database while another process writes it: a standby's warm copy.

A broker standing by in a group (:mod:`txamqp09.group`) does not serve, but
it will have to, at once, from what the store holds then. A
:class:`Follower` keeps a :class:`~txamqp09.store.mirror.Mirror` of the
database current in a thread of its own: every :data:`FOLLOW_SECONDS` it
reads, in one snapshot, what changed since (the topology, the rows of the
removal log, the messages added).

When the database cannot be read (it is unreachable, being promoted, or
its tables are not made yet) the follower connects again at the next
round; the mirror stays, and the next catch-up reads what it missed. An
error that is not the database's stops the follower, and its mirror is not
used.

:meth:`Follower.stop` ends the thread and hands the mirror over: the
store's :meth:`~txamqp09.store.writer.SQLStore.open` makes its last
catch-up on its own connection once the broker serves (after
the group's lease was taken, which every commit of the previous writer
precedes), and recovers from it.
"""

from __future__ import annotations

import threading
from time import monotonic
from typing import Callable, Optional

from twisted.logger import Logger

from txamqp09.store.mirror import Mirror
from txamqp09.store.sql import Database

__all__ = ["FOLLOW_SECONDS", "Follower", "STOP_SECONDS"]

_log = Logger()
#: Seconds between two catch-ups.
FOLLOW_SECONDS = 0.25
#: Seconds :meth:`Follower.stop` waits for a catch-up under way to end
#: (it interrupts its statements; one that still runs is left behind, and
#: its mirror is not used).
STOP_SECONDS = 2.0
#: Seconds between two interruptions of a catch-up under way when stopping.
_INTERRUPT_SECONDS = 0.01


class Follower:
    """Keeps *mirror* current in a thread of its own (see the module's docstring).

    :param connect: a new connection to the database (for the thread).
    :param read_errors: what reading the database raises when it fails
        (the connection is then made again).
    :param name: the thread's name.
    """

    def __init__(
        self,
        connect: Callable[[], Database],
        mirror: Mirror,
        read_errors: tuple[type[Exception], ...],
        name: str,
    ) -> None:
        self.mirror = mirror
        self._connect = connect
        self._read_errors = read_errors
        self._stopping = threading.Event()
        self._broken = False
        #: The thread's connection while it is open.
        self._db: Optional[Database] = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        #: Catch-ups made (for tests and benchmarks).
        self.catch_ups = 0

    def start(self) -> None:
        """Start following."""
        self._thread.start()

    def stop(self) -> Optional[Mirror]:
        """Stop following, interrupting a catch-up under way (the mirror
        keeps what it had read; the next catch-up reads the rest); the
        mirror, or None when it cannot be used (the follower broke, or did
        not stop within :data:`STOP_SECONDS`)."""
        self._stopping.set()
        deadline = monotonic() + STOP_SECONDS
        self._thread.join(_INTERRUPT_SECONDS)
        while self._thread.is_alive() and monotonic() < deadline:
            db = self._db
            if db is not None:
                db.interrupt()
            self._thread.join(_INTERRUPT_SECONDS)
        if self._broken or self._thread.is_alive():
            return None
        return self.mirror

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                try:
                    if self._db is None:
                        self._db = self._connect()
                    with self._db.snapshot():
                        self.mirror.catch_up(self._db)
                    self.catch_ups += 1
                except self._read_errors:
                    self._close()
                self._stopping.wait(FOLLOW_SECONDS)
        except Exception:
            self._broken = True
            _log.failure("following the message store failed; taking over will read it whole")
        finally:
            self._close()

    def _close(self) -> None:
        """Close the thread's connection, if open."""
        db, self._db = self._db, None
        if db is not None:
            db.close()
