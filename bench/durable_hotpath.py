"""CPU instructions per persistent message published with confirms to a durable queue, counted with cachegrind.

One in-memory broker connection (no sockets; a real SQLite store in a
temporary directory, with its writer thread) on 0-9-1: N persistent
(delivery-mode 2) messages of 100 bytes, each with its own message-id (as
the Spark data source's batch write sends them; the ids repeat every 1,000
messages, so that building them costs nothing per message), published in confirm mode
to a durable classic queue, 100 per ``dataReceived``, at most 1,000 waiting
for the disk; no consumer (the messages stay queued). Cachegrind counts the
instructions of every thread, the store's writer included::

    PY=$(python -c "import sys; print(sys.executable)")
    for n in 2000 22000; do
        PYTHONHASHSEED=0 PYTHONPATH=. valgrind --tool=cachegrind --cache-sim=no \\
            --cachegrind-out-file=/dev/null $PY bench/durable_hotpath.py $n 2>&1 | grep "I *refs"
    done

The difference of the two counts divided by 20,000 is the cost of one
message. Batch sizes depend on how the writer thread is scheduled, so
counts vary by a few percent between runs.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from stream_hotpath import BATCH, WINDOW, confirming_connection, settle, wait_for
from txamqp09.wire import _amqp0_9_1 as spec
from txamqp09.wire.frames import content_frames


def main(count: int) -> None:
    """Publish *count* persistent messages (a multiple of 1,000)."""
    with tempfile.TemporaryDirectory(prefix="durable-hotpath-") as directory:
        run(count, Path(directory) / "store.db")


def run(count: int, path: Path) -> None:
    """:func:`main` with the store at *path*."""
    store, calls, server, transport = confirming_connection(path, spec.QueueDeclare(queue="q", durable=True))
    publish = spec.BasicPublish(routing_key="q")
    batches = [
        b"".join(
            content_frames(1, publish, spec.BasicProperties(delivery_mode=2, message_id=f"w-0-{number}"),
                           b"x" * 100, 131072)
            for number in range(first, first + BATCH)
        )
        for first in range(0, WINDOW, BATCH)
    ]
    for _ in range(count // WINDOW):
        for batch in batches:
            server.dataReceived(batch)
            transport.clear()
        wait_for(store, calls)
    settle(store, calls)


if __name__ == "__main__":
    main(int(sys.argv[1]))
