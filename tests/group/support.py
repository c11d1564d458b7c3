"""Brokers of a group in child processes, the PostgreSQL servers they share,
and waiting for conditions in the reactor."""

from __future__ import annotations

import atexit
import re
import tempfile
import time
from typing import Any, Callable, Optional

from twisted.internet import reactor
from twisted.internet.defer import Deferred, succeed
from twisted.python.failure import Failure

from tests.broker.process import BrokerProcess
from txamqp09.group.records import Address
from txamqp09.group.probe import Listening, listening
from txamqp09.testing.postgresql import PostgreSQL, group_url
from txamqp09.testing.rabbitmq import free_port

__all__ = [
    "SERVING",
    "STANDING_BY",
    "GroupBroker",
    "ReplicatedPostgreSQL",
    "accepts",
    "shared_replicated",
    "until",
]

#: Seconds a broker may take to log what a test waits for, on a busy machine.
WAIT = 60.0
#: Characters of a broker's output shown when it did not log what was awaited.
_SHOWN = 4000
#: The line a broker logs once it serves (restored, listening).
SERVING = rb"accepting connections on"
#: The line a broker logs once it stands by.
STANDING_BY = rb"group role standby"


def until(condition: Callable[[], bool], interval: float = 0.02, timeout: float = WAIT) -> Deferred[None]:
    """Fires once *condition()* holds, looking every *interval* seconds;
    fails after *timeout* seconds."""
    done: Deferred[None] = Deferred()
    deadline = time.monotonic() + timeout

    def look() -> None:
        if condition():
            done.callback(None)
        elif time.monotonic() > deadline:
            done.errback(AssertionError(f"not within {timeout} s: {condition}"))
        else:
            reactor.callLater(interval, look)

    look()
    return done


class GroupBroker(BrokerProcess):
    """``twistd amqp09 --store URL --node-name NAME`` on a port chosen now
    (a standby's clients must know it before it listens).

    :ivar exit_code: its exit status once it ended (None: killed by a signal).
    """

    def __init__(self, data_dir: str, url: str, node: str, *extra: str) -> None:
        super().__init__(data_dir, "--store", url, "--node-name", node, "--heartbeat", "1", *extra, port=free_port())
        self.node = node
        self.log = b""
        self.exit_code: Optional[int] = None
        self.ended: Deferred[None] = Deferred()
        self._patterns: list[tuple[re.Pattern[bytes], Deferred[None]]] = []

    def start(self, reactor: Any, until: bytes = STANDING_BY) -> Deferred[None]:  # type: ignore[override]
        """Spawn the broker; fires once its output matched *until* (by
        default, once it stands by)."""
        listening = super().start(reactor)
        listening.addErrback(lambda _: None)  # a standby never listens
        return self.wait_for(until)

    def wait_for(self, pattern: bytes, timeout: float = WAIT) -> Deferred[None]:
        """Fires once the broker's output has matched *pattern* (at once if
        it has); fails after *timeout* seconds, with the broker's output."""
        compiled = re.compile(pattern)
        if compiled.search(self.log):
            return succeed(None)
        waiter: Deferred[None] = Deferred(lambda _: self._patterns.remove(entry))
        entry = (compiled, waiter)
        self._patterns.append(entry)

        def explain(_: Any, seconds: float) -> None:
            output = self.log.decode(errors="replace")[-_SHOWN:]
            raise AssertionError(f"{self.node} did not log {pattern!r} within {seconds} s:\n{output}")

        return waiter.addTimeout(timeout, reactor, onTimeoutCancel=explain)

    def outReceived(self, data: bytes) -> None:
        super().outReceived(data)
        self.log += data
        matched = [(pattern, waiter) for pattern, waiter in self._patterns if pattern.search(self.log)]
        for entry in matched:
            self._patterns.remove(entry)
            entry[1].callback(None)

    errReceived = outReceived

    def processEnded(self, reason: Failure) -> None:
        self.exit_code = getattr(reason.value, "exitCode", None)
        super().processEnded(reason)
        self.ended.callback(None)

    def signal(self, number: int) -> None:
        """Send the process a signal (``signal.SIGSTOP``, ``signal.SIGCONT``...)."""
        assert self.transport is not None
        self.transport.signalProcess(number)


def accepts(port: int) -> bool:
    """Whether something listens on *port* of 127.0.0.1 now."""
    return listening([Address("amqp", "127.0.0.1", port)], timeout=1.0) is Listening.YES


class ReplicatedPostgreSQL:
    """A PostgreSQL primary with a synchronous streaming standby."""

    def __init__(self) -> None:
        self.primary = PostgreSQL(tempfile.mkdtemp(prefix="txamqp09-group-primary-"))
        self.standby: Optional[PostgreSQL] = None
        try:
            self.primary.start()
            self.standby = self.primary.add_standby(tempfile.mkdtemp(prefix="txamqp09-group-standby-"))
            self.primary.make_synchronous()
        except BaseException:
            self.remove()
            raise

    def new_database(self) -> str:
        """A new database; the libpq URI naming both servers, that follows a promotion."""
        assert self.standby is not None
        name = self.primary.new_database().rsplit("/", 1)[1]
        return group_url([self.primary, self.standby], name)

    def remove(self) -> None:
        for server in (self.standby, self.primary):
            if server is not None:
                server.remove()


_shared: list[ReplicatedPostgreSQL] = []


def shared_replicated() -> ReplicatedPostgreSQL:
    """The replicated pair this test process shares (tests that do not
    crash it): started on first use, removed at exit."""
    if not _shared:
        _shared.append(ReplicatedPostgreSQL())
        atexit.register(_shared[0].remove)
    return _shared[0]
