"""How responsive the broker stays while a backlog builds up in memory.

Starts ``twistd amqp09 --transient`` (nothing on disk, publishers never
blocked; with ``--store``, a broker with a message store in a temporary
directory, which pages bodies beyond its memory budget out), publishes N transient messages to one queue nobody consumes, and
meanwhile measures, twenty times a second on another connection, how long
the broker takes to answer a passive queue.declare. The garbage collector's
full passes over a growing backlog are what shows in the slowest answers;
the run is made once with the broker's default ``--freeze-backlog`` and once
with ``--freeze-backlog 0`` (the collector left as it is), alternately.

Run::

    python bench/backlog.py                          # 3,000,000 messages of 100 B
    python bench/backlog.py --messages 1000000 --repeat 2
    python bench/backlog.py --messages 10000000 --store --body-size 1024
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from typing import Optional

from broker import Connection, rss_kib
from startup import start

from txamqp09.broker.collector import DEFAULT_FREEZE_THRESHOLD
from txamqp09.wire import _amqp0_9_1 as spec
from txamqp09.wire.frames import content_frames

QUEUE = "backlog"
#: Messages per write of the publisher.
_BURST = 1000
#: Seconds between two passive declares.
_PING_INTERVAL = 0.05


def publish(port: int, messages: int, body_size: int) -> None:
    """Publish *messages* transient messages to the backlog queue, as fast as the socket takes them."""
    publisher = Connection(port)
    burst = content_frames(
        1, spec.BasicPublish(exchange="", routing_key=QUEUE), spec.BasicProperties(),
        b"x" * body_size, publisher.frame_max,
    ) * _BURST
    for _ in range(messages // _BURST):
        publisher.sock.sendall(burst)
    publisher.call(spec.QueueDeclare(queue=QUEUE, passive=True), spec.QueueDeclareOk)
    publisher.close()


def run(freeze: int, messages: int, body_size: int, store: bool) -> str:
    """Build the backlog on a broker started with ``--freeze-backlog freeze``; a report line."""
    data_dir = tempfile.mkdtemp(prefix="bench-backlog-")
    process, port, _, _ = start(
        *(("--data-dir", data_dir) if store else ("--transient",)),
        "--freeze-backlog", str(freeze), "--high-watermark", str(1 << 40),
    )
    try:
        pinger = Connection(port)
        pinger.call(spec.QueueDeclare(queue=QUEUE), spec.QueueDeclareOk)
        publisher = threading.Thread(target=publish, args=(port, messages, body_size))
        started = time.perf_counter()
        publisher.start()
        pings: list[float] = []
        while publisher.is_alive():
            asked = time.perf_counter()
            pinger.call(spec.QueueDeclare(queue=QUEUE, passive=True), spec.QueueDeclareOk)
            pings.append(time.perf_counter() - asked)
            time.sleep(max(0.0, asked + _PING_INTERVAL - time.perf_counter()))
        seconds = time.perf_counter() - started
        publisher.join()
        queued = pinger.call(spec.QueueDeclare(queue=QUEUE, passive=True), spec.QueueDeclareOk)
        pinger.close()
        pings.sort()
        return (
            f"--freeze-backlog {freeze:>7}: {queued.message_count:,} queued in {seconds:.1f} s "
            f"({queued.message_count / seconds:,.0f} msg/s), RSS {rss_kib(process.pid) / 1024:,.0f} MiB; "
            f"passive declare median {statistics.median(pings) * 1e3:.1f} ms, "
            f"p99 {pings[int(len(pings) * 0.99)] * 1e3:.1f} ms, max {pings[-1] * 1e3:.1f} ms "
            f"({len(pings)} answers)"
        )
    finally:
        process.terminate()
        process.wait()
        shutil.rmtree(data_dir)


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=3_000_000, help="messages in the backlog")
    parser.add_argument("--body-size", type=int, default=100, help="bytes per message body")
    parser.add_argument("--repeat", type=int, default=1, help="runs per setting")
    parser.add_argument("--store", action="store_true", help="run the broker with a message store")
    parser.add_argument(
        "--only-default", action="store_true", help="skip the runs with --freeze-backlog 0"
    )
    options = parser.parse_args(argv)
    settings = (DEFAULT_FREEZE_THRESHOLD,) if options.only_default else (DEFAULT_FREEZE_THRESHOLD, 0)
    for _ in range(options.repeat):
        for freeze in settings:
            print(run(freeze, options.messages, options.body_size, options.store), flush=True)


if __name__ == "__main__":
    main()
