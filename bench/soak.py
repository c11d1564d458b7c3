"""kill -9 under load: the broker killed and restarted N times while independent clients work.

Each cycle starts the broker on the same data directory, connects a pika
publisher (persistent 1 KiB messages in confirm mode, ``--window`` unconfirmed
at most) and a pika consumer (acknowledging every delivery, prefetch 100)
to one durable queue, lets them run for ``--seconds``, and kills the broker
with SIGKILL. Every body carries its number and a pattern derived from it,
so the consumer recognises each message and any corruption.

Per cycle it prints: messages confirmed in the cycle; lost (messages
confirmed in earlier cycles that the consumer has still not received: the
queue is nearly empty, so they must have come at the start of this one);
corrupt bodies; deliveries marked redelivered; the store's size on disk
after the kill; the broker's restart time (from spawning it until its port
answers) and its restore time (what it logs for opening the store). A last
restart drains what is left and gives the final count of lost messages.

Run::

    python bench/soak.py                        # 100 cycles
    python bench/soak.py --cycles 5 --json      # what the test suite runs
"""

from __future__ import annotations

import argparse
import json
import os
import re
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

import pika
import pika.exceptions

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this source tree

from broker import Txamqp09Broker  # noqa: E402

QUEUE = "bench-soak"
_NUMBER = struct.Struct(">Q")
_RESTORED = re.compile(rb"message store restored: .* in ([0-9.]+) s")


def body(number: int, size: int) -> bytes:
    """Message *number*'s body: its number, then a pattern it determines."""
    head = _NUMBER.pack(number)
    return head + bytes((number * 7 + i) % 251 for i in range(size - len(head)))


class Ledger:
    """What the clients know, across cycles (shared by the client threads)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.lock = threading.Lock()
        self.next_number = 0
        self.confirmed: set[int] = set()
        self.received: set[int] = set()
        self.corrupt = 0
        self.redelivered = 0

    def take_number(self) -> int:
        with self.lock:
            self.next_number += 1
            return self.next_number

    def delivered(self, content: bytes, redelivered: bool) -> None:
        number: int = _NUMBER.unpack_from(content)[0] if len(content) >= _NUMBER.size else 0
        with self.lock:
            if content != body(number, self.size):
                self.corrupt += 1
            else:
                self.received.add(number)
            self.redelivered += redelivered


class Publisher(threading.Thread):
    """pika's asynchronous connection, publishing with confirms until the broker dies."""

    def __init__(self, port: int, ledger: Ledger, window: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.ledger = ledger
        self.window = window
        self.confirmed = 0
        self._pending: dict[int, int] = {}
        self._tag = 0
        self._channel: Any = None
        self._properties = pika.BasicProperties(delivery_mode=2)

    def run(self) -> None:
        connection = pika.SelectConnection(
            pika.ConnectionParameters("127.0.0.1", self.port, heartbeat=0),
            on_open_callback=lambda opened: opened.channel(on_open_callback=self._opened),
            on_open_error_callback=lambda closed, _error: closed.ioloop.stop(),
            on_close_callback=lambda closed, _reason: closed.ioloop.stop(),
        )
        connection.ioloop.start()

    def _opened(self, channel: Any) -> None:
        self._channel = channel
        channel.queue_declare(
            QUEUE, durable=True,
            callback=lambda _: channel.confirm_delivery(self._settled, callback=lambda _: self._fill()),
        )

    def _fill(self) -> None:
        while len(self._pending) < self.window:
            number = self.ledger.take_number()
            self._tag += 1
            self._pending[self._tag] = number
            self._channel.basic_publish("", QUEUE, body(number, self.ledger.size), self._properties)

    def _settled(self, frame: Any) -> None:
        method = frame.method
        tags = [t for t in self._pending if t <= method.delivery_tag] if method.multiple else [method.delivery_tag]
        numbers = [self._pending.pop(tag) for tag in tags if tag in self._pending]
        if isinstance(method, pika.spec.Basic.Ack):
            with self.ledger.lock:
                self.ledger.confirmed.update(numbers)
            self.confirmed += len(numbers)
        self._fill()


class Consumer(threading.Thread):
    """pika's blocking connection, acknowledging every delivery until the broker dies
    (or, with *until_empty*, until the queue stays empty for a second)."""

    def __init__(self, port: int, ledger: Ledger, until_empty: bool = False) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.ledger = ledger
        self.until_empty = until_empty

    def run(self) -> None:
        try:
            connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", self.port, heartbeat=0))
            channel = connection.channel()
            channel.queue_declare(QUEUE, durable=True)
            channel.basic_qos(prefetch_count=100)
            for method, _properties, content in channel.consume(QUEUE, inactivity_timeout=1.0):
                if method is None:
                    if self.until_empty:
                        break
                    continue
                self.ledger.delivered(content, method.redelivered)
                channel.basic_ack(method.delivery_tag)
            connection.close()
        except (pika.exceptions.AMQPError, OSError):
            pass  # the broker was killed


def directory_size(directory: Path) -> int:
    """Bytes of the files in *directory*."""
    return sum(entry.stat().st_size for entry in directory.iterdir() if entry.is_file())


def restore_seconds(log: Path, start: int) -> Optional[float]:
    """The restore time the broker logged after byte *start* of its log."""
    found = _RESTORED.findall(log.read_bytes()[start:])
    return float(found[-1]) if found else None


def started(data_dir: Path, log: Path) -> tuple[Txamqp09Broker, float, Optional[float]]:
    """A broker on *data_dir*, with its restart and restore times."""
    offset = log.stat().st_size if log.exists() else 0
    began = time.monotonic()
    broker = Txamqp09Broker(str(data_dir), log=str(log))
    restart = time.monotonic() - began
    restore = restore_seconds(log, offset)
    deadline = time.monotonic() + 2
    while restore is None and time.monotonic() < deadline:  # the log line may lag the port
        time.sleep(0.02)
        restore = restore_seconds(log, offset)
    return broker, restart, restore


def run(data_dir: Path, log: Path, options: argparse.Namespace) -> dict[str, Any]:
    """The cycles, printing one line each unless *options.json*; the figures."""
    ledger = Ledger(options.body_size)
    cycles = []
    began = time.monotonic()
    confirmed_before = set()
    for cycle in range(1, options.cycles + 1):
        broker, restart, restore = started(data_dir, log)
        redelivered_before = ledger.redelivered
        publisher = Publisher(broker.port, ledger, options.window)
        consumer = Consumer(broker.port, ledger)
        publisher.start()
        consumer.start()
        time.sleep(options.seconds)  # the load runs for a fixed time, then the broker dies
        broker.kill()
        publisher.join(30)
        consumer.join(30)
        with ledger.lock:
            lost = len(confirmed_before - ledger.received)
            confirmed_before = set(ledger.confirmed)
        figures = {
            "cycle": cycle, "confirmed": publisher.confirmed, "lost": lost, "corrupt": ledger.corrupt,
            "redelivered": ledger.redelivered - redelivered_before,
            "store_bytes": directory_size(data_dir), "restart_seconds": round(restart, 3),
            "restore_seconds": restore,
        }
        cycles.append(figures)
        if not options.json:
            print(
                f"{cycle:5d} {figures['confirmed']:9,d} {lost:5d} {ledger.corrupt:7d}"
                f" {figures['redelivered']:11d} {figures['store_bytes'] / 1048576:9.2f}"
                f" {restart:9.3f} {restore if restore is not None else float('nan'):9.3f}",
                flush=True,
            )
    broker, restart, restore = started(data_dir, log)
    final = Consumer(broker.port, ledger, until_empty=True)
    final.start()
    final.join(120)
    broker.stop()
    return {
        "cycles": cycles,
        "confirmed": len(ledger.confirmed),
        "lost": len(ledger.confirmed - ledger.received),
        "corrupt": ledger.corrupt,
        "redelivered": ledger.redelivered,
        "store_bytes": directory_size(data_dir),
        "max_restart_seconds": max(c["restart_seconds"] for c in cycles),
        "max_restore_seconds": max((c["restore_seconds"] or 0) for c in cycles),
        "seconds": round(time.monotonic() - began, 1),
    }


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=100, help="kill -9 cycles (100)")
    parser.add_argument("--seconds", type=float, default=1.5, help="seconds of load per cycle (1.5)")
    parser.add_argument("--window", type=int, default=50, help="unconfirmed messages at most (50)")
    parser.add_argument("--body-size", type=int, default=1024, help="bytes per body (1024)")
    parser.add_argument("--data-dir", help="the store's directory (a new temporary one if omitted)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="soak-") as scratch:
        data_dir = Path(options.data_dir or os.path.join(scratch, "data"))
        if not options.json:
            print("cycle confirmed  lost corrupt redelivered store MiB restart s restore s")
        figures = run(data_dir, Path(scratch) / "broker.log", options)
    if options.json:
        print(json.dumps(figures))
    else:
        print(
            f"{len(figures['cycles'])} cycles in {figures['seconds']} s: {figures['confirmed']:,} confirmed,"
            f" {figures['lost']} lost, {figures['corrupt']} corrupt, {figures['redelivered']:,} redelivered;"
            f" store {figures['store_bytes'] / 1048576:.2f} MiB at the end;"
            f" restart at most {figures['max_restart_seconds']:.3f} s,"
            f" restore at most {figures['max_restore_seconds']:.3f} s"
        )


if __name__ == "__main__":
    main()
