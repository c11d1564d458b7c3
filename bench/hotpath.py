"""CPU instructions per published and delivered message, counted with cachegrind.

One in-memory broker connection (no sockets, no reactor) on 0-9-1: a
consumer with no-ack on queue ``q``, then N 16-byte messages published to it
in batches of 100 per ``dataReceived``. Counting instructions instead of
timing makes small changes to the hot path visible on a busy machine::

    PY=$(python -c "import sys; print(sys.executable)")
    for n in 2000 22000; do
        PYTHONHASHSEED=0 PYTHONPATH=. valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \\
            $PY bench/hotpath.py $n 2>&1 | grep "I *refs"
    done

(the difference of the two counts divided by 20,000 is the cost of one
message, start-up excluded; bench/README.rst records the current figure).

With a body size and a read size (``bench/hotpath.py N SIZE READ``), the N
messages carry bodies of SIZE bytes in 128 KiB frames, and each reaches the
broker in blocks of READ bytes, as a socket read would hand it over: the
difference of two counts divided by the bytes moved is the instructions per
body byte, in practice the number of times each byte is copied (``memcpy``
counts one instruction per byte under cachegrind)::

    for n in 10 20; do
        PYTHONHASHSEED=0 PYTHONPATH=. valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \\
            $PY bench/hotpath.py $n 1048576 1048576 2>&1 | grep "I *refs"
    done
"""

from __future__ import annotations

import sys
from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from txamqp09.broker.memory import tune_allocator
from txamqp09.broker.server import ServerFactory
from txamqp09.wire import _amqp0_9_1 as spec
from txamqp09.wire.base import Method
from txamqp09.wire.frames import content_frames, method_frame
from txamqp09.wire.versions import AMQP0_9_1

BATCH = 100


class DiscardingTransport(StringTransport):
    """A transport that keeps nothing written (a socket's send copies nothing in user space)."""

    def write(self, data: bytes) -> None:
        """Drop *data*."""


def main(count: int, body_size: int = 16, read_size: int = 0) -> None:
    """Publish and deliver *count* messages (a multiple of 100 for 16-byte
    bodies, read 100 at a time); with a *read_size*, each message arrives in
    blocks of that many bytes."""
    transport = (DiscardingTransport if read_size else StringTransport)(
        peerAddress=IPv4Address("TCP", "127.0.0.1", 40000)
    )
    server = ServerFactory(Clock()).buildProtocol(None)
    server.makeConnection(transport)
    open_channel(server, spec.QueueDeclare(queue="q"), spec.BasicConsume(queue="q", consumer_tag="c", no_ack=True))
    frames = content_frames(1, spec.BasicPublish(routing_key="q"), spec.BasicProperties(), b"x" * body_size, 131072)
    if read_size:
        tune_allocator()  # as the broker does: large blocks are reused, not mapped anew
        blocks = [frames[at : at + read_size] for at in range(0, len(frames), read_size)]
        for _ in range(count):
            for block in blocks:
                server.dataReceived(block)
            transport.clear()
        return
    batch = frames * BATCH
    for _ in range(count // BATCH):
        server.dataReceived(batch)
        transport.clear()


def open_channel(server: Any, *methods: Method) -> None:
    """Connect as guest on 0-9-1 to *server* (a connected server protocol),
    open channel 1 and send *methods* on it."""
    server.dataReceived(AMQP0_9_1.header)
    for number, method in [
        (0, spec.ConnectionStartOk(client_properties={}, mechanism="PLAIN", response=b"\0guest\0guest", locale="en_US")),
        (0, spec.ConnectionTuneOk(channel_max=0, frame_max=131072, heartbeat=0)),
        (0, spec.ConnectionOpen(virtual_host="/")),
        (1, spec.ChannelOpen()),
        *((1, method) for method in methods),
    ]:
        server.dataReceived(method_frame(number, method))


if __name__ == "__main__":
    main(*(int(argument) for argument in sys.argv[1:]))
