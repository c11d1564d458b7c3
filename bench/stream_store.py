"""A stream log in the SQLite store: recovery, timestamp search and chunk reads.

Writes a log of N messages (256-byte bodies, segments of 100,000 messages,
chunks of ``--chunk`` messages, as a writer taking that many appends per
batch makes them) straight into a fresh database, then opens it with
:class:`SQLiteStore` and times what the broker asks of a large log:
recovery (the segments of every log, from the chunk headers), finding the
offset of a timestamp in the middle of the log, and reading the chunk that
holds the middle offset. With ``--version-0`` the database is written in
the layout of version 0 (one row per message) instead, and the first time
is that of opening it, which migrates it to chunks.

Run::

    python bench/stream_store.py                 # 1,000,000 messages
    python bench/stream_store.py --messages 5000000 --chunk 100
    python bench/stream_store.py --version-0
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Optional

from twisted.internet import reactor

from txamqp09.store.chunks import LogChunk
from txamqp09.store.sql import prepare
from txamqp09.store.sqlite import SQLiteDatabase, SQLiteStore
from txamqp09.wire.forwarding import envelope

_START = 1_700_000_000_000
_SEGMENT = 100_000
_VERSION_0_LOG = (
    "CREATE TABLE stream_log (vhost TEXT NOT NULL, queue TEXT NOT NULL, position INTEGER NOT NULL,"
    " segment INTEGER NOT NULL, timestamp INTEGER NOT NULL, exchange TEXT NOT NULL,"
    " routing_key TEXT NOT NULL, properties BLOB NOT NULL, body BLOB NOT NULL,"
    " PRIMARY KEY (vhost, queue, position))"
)


def fill(path: Path, messages: int, body_size: int, chunk_size: int) -> None:
    """A database whose stream ``s`` holds *messages* messages, one millisecond apart."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    prepare(SQLiteDatabase(db), str(path))
    db.execute("INSERT INTO queues VALUES ('/', 's', 0, x'00000000')")
    body = b"x" * body_size
    names = envelope("", "s")
    db.execute("BEGIN")
    for first in range(0, messages, chunk_size):
        end = min(first + chunk_size, messages, first - first % _SEGMENT + _SEGMENT)
        chunk = LogChunk(first, first - first % _SEGMENT)
        for offset in range(first, end):
            chunk.add(_START + offset, names, b"\x00\x00", body)
        db.execute("INSERT INTO stream_chunks VALUES ('/', 's', ?, ?, ?, ?, ?, ?, ?, ?)", chunk.take())
    db.execute("COMMIT")
    db.close()


def fill_version_0(path: Path, messages: int, body_size: int) -> None:
    """A database of layout version 0 whose stream ``s`` holds *messages*
    messages, one row each, one millisecond apart."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE queues (vhost TEXT NOT NULL, name TEXT NOT NULL,"
               " auto_delete INTEGER NOT NULL, arguments BLOB NOT NULL, PRIMARY KEY (vhost, name))")
    db.execute(_VERSION_0_LOG)
    db.execute("INSERT INTO queues VALUES ('/', 's', 0, x'00000000')")
    body = b"x" * body_size
    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO stream_log VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (("/", "s", i, i - i % _SEGMENT, _START + i, "", "s", b"\x00\x00", body) for i in range(messages)),
    )
    db.execute("COMMIT")
    db.close()


def measure(path: Path, messages: int, opening: str) -> None:
    store = SQLiteStore(path, reactor)  # type: ignore[arg-type]
    started = time.perf_counter()
    recovered = store.open()
    print(f"{opening}: {len(recovered.logs[('/', 's')])} segments of {messages:,} messages "
          f"in {time.perf_counter() - started:.3f} s")
    middle = messages // 2
    started = time.perf_counter()
    found = store.log_offset_at("/", "s", _START + middle, 0)
    print(f"offset of a timestamp: {found} in {(time.perf_counter() - started) * 1000:.2f} ms")
    started = time.perf_counter()
    chunk = store.read_log("/", "s", middle)
    assert chunk is not None
    print(f"the chunk holding offset {middle:,} ({chunk.count} messages): "
          f"{(time.perf_counter() - started) * 1000:.2f} ms")
    store.close().addBoth(lambda _: reactor.stop())  # type: ignore[attr-defined]


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages in the log")
    parser.add_argument("--body-size", type=int, default=256, help="bytes per message body")
    parser.add_argument("--chunk", type=int, default=1000, help="messages per chunk")
    parser.add_argument("--version-0", action="store_true", help="write the log as version 0 did")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-stream-store-") as directory:
        path = Path(directory) / "store.db"
        if options.version_0:
            fill_version_0(path, options.messages, options.body_size)
            opening = "migration and recovery"
        else:
            fill(path, options.messages, options.body_size, options.chunk)
            opening = "recovery"
        reactor.callWhenRunning(measure, path, options.messages, opening)  # type: ignore[attr-defined]
        reactor.run()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
