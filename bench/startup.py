"""Broker start-up time with a large backlog of persisted messages.

Fills a message store with N persistent messages on one durable queue
(written straight through the store, as the broker would have written them),
then starts ``twistd amqp09`` on it and reports how long the broker took
until it listened, what its log says the restore took, its resident memory,
and the queue's message count as a client sees it.

Run::

    python bench/startup.py                      # 1,000,000 messages of 1 KiB
    python bench/startup.py --messages 200000 --body-size 100
    python bench/startup.py --data-dir /tmp/backlog --keep   # reuse a filled store
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional, cast

from broker import Connection, rss_kib

from twisted.internet.interfaces import IReactorFromThreads
from txamqp09.store.interface import DurableQueue, StoredMessage
from txamqp09.store.sqlite import SQLiteStore
from txamqp09.wire import _amqp0_9_1 as spec

QUEUE = "backlog"
_LISTENING = re.compile(rb"ServerFactory starting on (\d+)")
_RESTORED = re.compile(rb"(\d+) persistent messages restored in ([\d.]+) s")
#: Messages handed to the store between two waits for durability.
_CHUNK = 20000


def fill(path: Path, messages: int, body_size: int) -> float:
    """Write *messages* persistent messages for queue ``backlog``; the seconds it took."""
    from twisted.internet import reactor
    from twisted.internet.defer import ensureDeferred

    store = SQLiteStore(path, cast(IReactorFromThreads, reactor))
    properties = spec.BasicProperties(delivery_mode=2, content_type="application/octet-stream").encode()
    body = b"x" * body_size

    async def write() -> None:
        recovered = store.open()
        first = recovered.next_message_id
        store.add_queue(DurableQueue("/", QUEUE))
        for start in range(first, first + messages, _CHUNK):
            for message_id in range(start, min(start + _CHUNK, first + messages)):
                sequence = store.publish(StoredMessage(message_id, "", QUEUE, properties, body, body_size), [("/", QUEUE)])
            await store.when_durable(sequence)
        await store.close()

    started = time.monotonic()
    done = ensureDeferred(write())
    done.addBoth(lambda result: reactor.stop() or result)  # type: ignore[attr-defined]
    reactor.run()  # type: ignore[attr-defined]
    return time.monotonic() - started


def start(data_dir: Path) -> tuple[subprocess.Popen[bytes], int, float, Optional[float]]:
    """Start the broker on *data_dir*: (process, port, seconds until it listened,
    the restore time its log reports)."""
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "twisted", "--log-format", "text", "amqp09", "--listen",
         "tcp:0:interface=127.0.0.1", "--heartbeat", "0", "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    assert process.stdout is not None
    restored: Optional[float] = None
    for line in process.stdout:
        found = _RESTORED.search(line)
        if found:
            restored = float(found.group(2))
        listening = _LISTENING.search(line)
        if listening:
            return process, int(listening.group(1)), time.monotonic() - started, restored
    raise RuntimeError(f"the broker exited with status {process.wait()} before listening")


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages in the backlog")
    parser.add_argument("--body-size", type=int, default=1024, help="bytes per message body")
    parser.add_argument("--data-dir", help="the store's directory (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the data dir; reuse it if filled")
    options = parser.parse_args(argv)
    base = Path(options.data_dir or tempfile.mkdtemp(prefix="bench-startup-"))
    path = base / "store.db"
    try:
        if not path.exists():
            seconds = fill(path, options.messages, options.body_size)
            print(f"filled {options.messages:,} messages of {options.body_size} B in {seconds:.1f} s "
                  f"({path.stat().st_size / 2**20:,.0f} MiB)")
        process, port, seconds, restored = start(base)
        try:
            connection = Connection(port)
            declared: Any = connection.call(spec.QueueDeclare(queue=QUEUE, passive=True), spec.QueueDeclareOk)
            connection.close()
            print(f"listening after {seconds:.2f} s (restore: {restored} s), "
                  f"{declared.message_count:,} messages ready, RSS {rss_kib(process.pid) / 1024:,.0f} MiB")
        finally:
            process.terminate()
            process.wait()
    finally:
        if not options.keep:
            for each in base.iterdir():
                each.unlink()
            base.rmdir()


if __name__ == "__main__":
    main()
