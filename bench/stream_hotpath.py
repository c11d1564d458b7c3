"""CPU instructions per message appended to a stream and read from it, counted with cachegrind.

One in-memory broker connection (no sockets; a real SQLite store in a
temporary directory, with its writer thread) on 0-9-1. ``append``: N
messages of 256 bytes published in confirm mode to a stream, 100 per
``dataReceived``, at most 1,000 waiting for the disk. ``read`` does the same,
then reads the N messages back with a consumer from ``first`` (prefetch
1,000, one ``basic.ack`` with ``multiple`` per 1,000 deliveries). Cachegrind
counts the instructions of every thread, the store's writer included::

    PY=$(python -c "import sys; print(sys.executable)")
    for phase in append read; do for n in 2000 22000; do
        PYTHONHASHSEED=0 PYTHONPATH=. valgrind --tool=cachegrind --cache-sim=no \\
            --cachegrind-out-file=/dev/null $PY bench/stream_hotpath.py $phase $n 2>&1 | grep "I *refs"
    done; done

The difference of the two ``append`` counts divided by 20,000 is the cost
of one append; that of the ``read`` counts, minus the append's, the cost of
one read (bench/README.rst records the figures). Batch sizes depend on how
the writer thread is scheduled, so counts vary by a few percent between runs.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from hotpath import open_channel
from txamqp09.broker.model import Broker
from txamqp09.broker.model.store import Persistence
from txamqp09.broker.server import ServerFactory
from txamqp09.store.sqlite import SQLiteStore
from txamqp09.wire import _amqp0_9_1 as spec
from txamqp09.wire.frames import content_frames, method_frame

BATCH = 100
WINDOW = 1000


class ThreadCalls:
    """The store's reactor: calls from its writer thread wait in a list until :meth:`run`."""

    def __init__(self) -> None:
        self.calls: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []

    def callFromThread(self, function: Callable[..., Any], *args: Any) -> None:
        self.calls.append((function, args))

    def run(self) -> None:
        while self.calls:
            function, args = self.calls.pop(0)
            function(*args)


def main(phase: str, count: int) -> None:
    """Append *count* messages (a multiple of 1,000) to a stream; with
    *phase* ``read``, read them back too."""
    with tempfile.TemporaryDirectory(prefix="stream-hotpath-") as directory:
        run(phase, count, Path(directory) / "store.db")


def run(phase: str, count: int, path: Path) -> None:
    """:func:`main` with the store at *path*."""
    store, calls, server, transport = confirming_connection(
        path, spec.QueueDeclare(queue="s", durable=True, arguments={"x-queue-type": "stream"})
    )
    batch = content_frames(1, spec.BasicPublish(routing_key="s"), spec.BasicProperties(), b"x" * 256, 131072) * BATCH
    for sent in range(BATCH, count + 1, BATCH):
        server.dataReceived(batch)
        transport.clear()
        if sent % WINDOW == 0:
            wait_for(store, calls)
    if phase == "read":
        for number, method in [
            (2, spec.ChannelOpen()),
            (2, spec.BasicQos(prefetch_count=WINDOW)),
            (2, spec.BasicConsume(queue="s", consumer_tag="r", arguments={"x-stream-offset": "first"})),
        ]:
            server.dataReceived(method_frame(number, method))
        for tag in range(WINDOW, count + 1, WINDOW):
            transport.clear()
            server.dataReceived(method_frame(2, spec.BasicAck(delivery_tag=tag, multiple=True)))
    settle(store, calls)


def confirming_connection(
    path: Path, declare: spec.QueueDeclare
) -> tuple[SQLiteStore, ThreadCalls, Any, StringTransport]:
    """A broker with its store at *path* and a connection to it: channel 1
    open, its queue declared by *declare*, in confirm mode. Returns the
    store, its calls from the writer thread, the server protocol and its transport."""
    calls = ThreadCalls()
    store = SQLiteStore(path, calls)  # type: ignore[arg-type]
    broker = Broker(persistence=Persistence(store))
    broker.restore(store.open())
    transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 40000))
    server = ServerFactory(Clock(), broker).buildProtocol(None)
    server.makeConnection(transport)
    open_channel(server, declare, spec.ConfirmSelect())
    return store, calls, server, transport


def settle(store: SQLiteStore, calls: ThreadCalls) -> None:
    """Close *store*, running its calls until it has closed."""
    closed = store.close()
    while not closed.called:
        time.sleep(0.0005)
        calls.run()


def wait_for(store: SQLiteStore, calls: ThreadCalls) -> None:
    """Until everything appended so far is on disk (and the broker told)."""
    while store.durable_sequence < store.last_sequence:
        time.sleep(0.0005)
        calls.run()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
