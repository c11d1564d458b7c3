"""A stream log in the SQLite store: recovery, timestamp search and page reads.

Writes a log of N messages (256-byte bodies, segments of 100,000 messages)
straight into a fresh database, then opens it with :class:`SQLiteStore` and
times what the broker asks of a large log: recovery (the segments of every
log), finding the offset of a timestamp in the middle of the log, and
reading one page of :data:`~txamqp09.broker.model.stream.READ_PAGE` messages
from the middle.

Run::

    python bench/stream_store.py                 # 1,000,000 messages
    python bench/stream_store.py --messages 5000000
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Optional

from twisted.internet import reactor

from txamqp09.broker.model.stream import READ_PAGE
from txamqp09.store.sqlite import _SCHEMA, SQLiteStore

_START = 1_700_000_000_000


def fill(path: Path, messages: int, body_size: int) -> None:
    """A database whose stream ``s`` holds *messages* messages, one millisecond apart."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(_SCHEMA)
    db.execute("INSERT INTO queues VALUES ('/', 's', 0, x'00000000')")
    body = b"x" * body_size
    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO stream_log VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (("/", "s", i, i - i % 100_000, _START + i, "", "s", b"\x00\x00", body) for i in range(messages)),
    )
    db.execute("COMMIT")
    db.close()


def measure(path: Path, messages: int) -> None:
    store = SQLiteStore(path, reactor)  # type: ignore[arg-type]
    started = time.perf_counter()
    recovered = store.open()
    print(f"recovery: {len(recovered.logs[('/', 's')])} segments of {messages:,} messages "
          f"in {time.perf_counter() - started:.2f} s")
    middle = messages // 2
    started = time.perf_counter()
    found = store.log_offset_at("/", "s", _START + middle, 0)
    print(f"offset of a timestamp: {found} in {(time.perf_counter() - started) * 1000:.2f} ms")
    started = time.perf_counter()
    page = store.read_log("/", "s", middle, READ_PAGE)
    print(f"page of {len(page)} messages: {(time.perf_counter() - started) * 1000:.2f} ms")
    store.close().addBoth(lambda _: reactor.stop())  # type: ignore[attr-defined]


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages in the log")
    parser.add_argument("--body-size", type=int, default=256, help="bytes per message body")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-stream-store-") as directory:
        path = Path(directory) / "store.db"
        fill(path, options.messages, options.body_size)
        reactor.callWhenRunning(measure, path, options.messages)  # type: ignore[attr-defined]
        reactor.run()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
