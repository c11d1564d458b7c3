"""CPU instructions the SQLite store spends per persistent message, per removal and per spilled body, counted with cachegrind.

The store alone (no broker, no sockets), in a temporary directory, with its
writer thread: N persistent messages of 100 bytes are published to one
durable queue, 1,000 at a time (then a wait until they are durable); with
``ack`` they are then removed from it in the order published, 100 per call
(as consumers' acknowledgements reach the store), 1,000 at a time. Every
removal meets a message already written, so it costs a delete. With
``spill`` nothing is published: N bodies of 100 bytes are spilled instead
(as the broker pages out messages the store does not keep otherwise), 1,000
at a time. Cachegrind counts the instructions of both threads::

    PY=$(python -c "import sys; print(sys.executable)")
    for phases in publish ack spill; do for n in 2000 22000; do
        PYTHONHASHSEED=0 PYTHONPATH=. valgrind --tool=cachegrind --cache-sim=no \\
            --cachegrind-out-file=/dev/null $PY bench/store_messages.py $n $phases 2>&1 | grep "I *refs"
    done; done

The difference of the two ``publish`` counts divided by 20,000 is the cost of
publishing one message; that of the two ``ack`` counts, less the publishing,
is the cost of one removal; that of the two ``spill`` counts, of one spill.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from stream_hotpath import ThreadCalls, settle, wait_for
from txamqp09.store.interface import DurableQueue, StoredMessage
from txamqp09.store.sqlite import SQLiteStore
from txamqp09.wire import _amqp0_9_1 as spec

#: Operations handed to the store between two waits for durability.
WINDOW = 1000
#: Messages one removal names.
ACKS = 100


def main(count: int, phases: str) -> None:
    """Publish *count* messages (a multiple of :data:`WINDOW`), then remove
    them if *phases* is ``ack``; or spill as many bodies if it is ``spill``."""
    with tempfile.TemporaryDirectory(prefix="store-messages-") as directory:
        calls = ThreadCalls()
        store = SQLiteStore(Path(directory) / "store.db", calls)  # type: ignore[arg-type]
        store.open()
        store.add_queue(DurableQueue("/", "q"))
        properties = spec.BasicProperties(delivery_mode=2).encode()
        body = b"x" * 100
        queues = [("/", "q")]
        for first in range(1, count + 1, WINDOW):
            for message_id in range(first, first + WINDOW):
                if phases == "spill":
                    store.spill(message_id, body)
                else:
                    store.publish(StoredMessage(message_id, "", "q", properties, body, 100), queues)
            wait_for(store, calls)
        if phases == "ack":
            for first in range(1, count + 1, WINDOW):
                for start in range(first, first + WINDOW, ACKS):
                    store.remove("/", "q", range(start, start + ACKS))
                wait_for(store, calls)
        settle(store, calls)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
