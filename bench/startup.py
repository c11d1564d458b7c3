"""Broker start-up time with a large backlog of persisted messages, and the backlog's drain.

Fills a message store with N persistent messages on one durable queue
(written straight through the store, as the broker would have written them),
then starts ``twistd amqp09`` on it and reports how long the broker took
until it listened, what its log says the restore took, its resident memory,
and the queue's message count as a client sees it. With ``--drain`` a
consumer (prefetch 500, one ack per message) then empties the queue, reading
paged-out bodies back as it goes, while another connection measures how long
the broker takes to answer a passive queue.declare, ten times a second.

Run::

    python bench/startup.py                      # 1,000,000 messages of 1 KiB
    python bench/startup.py --messages 200000 --body-size 100
    python bench/startup.py --data-dir /tmp/backlog --keep   # reuse a filled store
    python bench/startup.py --drain              # then empty the queue
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

import selectors
import statistics

from broker import ROOT, Connection, _counter, rss_kib

from twisted.internet.interfaces import IReactorFromThreads
from txamqp09.store.interface import DurableQueue, StoredMessage
from txamqp09.store.url import store_from_url
from txamqp09.wire import _amqp0_9_1 as spec

QUEUE = "backlog"
_LISTENING = re.compile(rb"ServerFactory starting on (\d+)")
_RESTORED = re.compile(rb"(\d+) persistent messages in ([\d.]+) s")
#: Messages handed to the store between two waits for durability.
_CHUNK = 20000


def fill(url: str, messages: int, body_size: int) -> float:
    """Write *messages* persistent messages for queue ``backlog`` into the
    store *url* names (``sqlite:PATH``, ``postgresql://...``); the seconds it took."""
    from twisted.internet import reactor
    from twisted.internet.defer import ensureDeferred

    store = store_from_url(url, cast(IReactorFromThreads, reactor))
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
    def stop(result: Any) -> Any:
        reactor.stop()  # type: ignore[attr-defined]
        return result

    done.addBoth(stop)
    reactor.run()  # type: ignore[attr-defined]
    return time.monotonic() - started


def add_backlog_options(parser: argparse.ArgumentParser, body_size: int) -> None:
    """The options of the backlog (:func:`filled_store`): its size, its
    bodies' size (*body_size* by default) and where it is kept."""
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages in the backlog")
    parser.add_argument("--body-size", type=int, default=body_size, help="bytes per message body")
    parser.add_argument("--data-dir", help="the store's directory (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the data dir; reuse it if filled")


def filled_store(base: Path, messages: int, body_size: int) -> Path:
    """The store ``store.db`` in *base*, filled with :func:`fill` (and the
    filling reported) unless it is there already."""
    path = base / "store.db"
    if not path.exists():
        seconds = fill(f"sqlite:{path}", messages, body_size)
        print(f"filled {messages:,} messages of {body_size} B in {seconds:.1f} s "
              f"({path.stat().st_size / 2**20:,.0f} MiB)")
    return path


def start(*options: str) -> tuple[subprocess.Popen[bytes], int, float, Optional[float]]:
    """Start the broker with more command-line *options*: (process, port,
    seconds until it listened, the restore time its log reports)."""
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "twisted", "--log-format", "text", "amqp09", "--listen",
         "tcp:0:interface=127.0.0.1", "--heartbeat", "0", *options],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT},
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


def drain(port: int, messages: int) -> tuple[float, list[float]]:
    """Consume *messages* from the backlog: (seconds, round-trip times of a
    passive declare on another connection meanwhile)."""
    consumer, pinger = Connection(port), Connection(port)
    consumer.call(spec.BasicQos(prefetch_count=500), spec.BasicQosOk)
    # Deliveries follow consume-ok at once: the counter reads them all from the socket.
    consumer.send(1, spec.BasicConsume(queue=QUEUE, consumer_tag="bench"))
    consumer.sock.setblocking(False)
    count = _counter(False, consumer.sock)
    selector = selectors.DefaultSelector()
    selector.register(consumer.sock, selectors.EVENT_READ)
    received, pings = 0, []
    started = next_ping = time.perf_counter()
    while received < messages:
        for _key, _events in selector.select(0.1):
            received += count()
        if time.perf_counter() >= next_ping:
            asked = time.perf_counter()
            pinger.call(spec.QueueDeclare(queue=QUEUE, passive=True), spec.QueueDeclareOk)
            pings.append(time.perf_counter() - asked)
            next_ping = asked + 0.1
    seconds = time.perf_counter() - started
    selector.close()
    consumer.close()
    pinger.close()
    return seconds, pings


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_backlog_options(parser, body_size=1024)
    parser.add_argument("--drain", action="store_true", help="then consume the backlog")
    options = parser.parse_args(argv)
    base = Path(options.data_dir or tempfile.mkdtemp(prefix="bench-startup-"))
    try:
        filled_store(base, options.messages, options.body_size)
        process, port, seconds, restored = start("--data-dir", str(base))
        try:
            connection = Connection(port)
            declared: Any = connection.call(spec.QueueDeclare(queue=QUEUE, passive=True), spec.QueueDeclareOk)
            connection.close()
            print(f"listening after {seconds:.2f} s (restore: {restored} s), "
                  f"{declared.message_count:,} messages ready, RSS {rss_kib(process.pid) / 1024:,.0f} MiB")
            if options.drain:
                seconds, pings = drain(port, declared.message_count)
                print(f"drained {declared.message_count:,} messages in {seconds:.1f} s "
                      f"({declared.message_count / seconds:,.0f} msg/s), RSS {rss_kib(process.pid) / 1024:,.0f} MiB; "
                      f"passive declare answered in {statistics.median(pings) * 1e3:.1f} ms (median), "
                      f"{max(pings) * 1e3:.1f} ms (max)")
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
