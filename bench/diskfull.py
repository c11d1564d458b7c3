"""A full disk: the broker's data directory on a small file system, a publisher that fills it.

The broker runs with its data directory on a tmpfs of ``--size`` (96 MiB)
and ``--disk-free-limit`` (24 MiB). A pika publisher sends persistent 1 KiB
messages to a durable queue, waiting for each confirm, until the broker
sends connection.blocked (the disk alarm); a pika consumer on another
connection then drains the queue and acknowledges everything; once the
alarm clears the publisher is unblocked, and it publishes ``--after`` more
messages, which the consumer drains too. Every body carries its number, so
the consumer checks that each confirmed message arrived intact.

The report: messages confirmed before the alarm, free space when the
publisher was blocked, nacks and errors (there should be none: blocked, not
failed), messages drained, seconds until publishing resumed, and messages
confirmed after it resumed.

Each step (publishing until the alarm, draining until publishing resumes,
the confirms after it, the final drain) may take ``--timeout`` seconds. A
step that overruns fails the run: the broker is killed, which ends any wait
on it, and the run exits naming the step, what the clients saw, the free
space and the end of the broker's log, after every thread's stack.

Mounting a tmpfs needs root. Run::

    python bench/diskfull.py
    python bench/diskfull.py --size 32MiB --limit 8MiB --after 200 --json
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import struct
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pika
import pika.exceptions

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this source tree

from broker import Txamqp09Broker  # noqa: E402

from txamqp09.broker.disk import free_bytes
from txamqp09.testing.faults import MountFailed, mount_small_file_system, unmount
from txamqp09.units import parse_size

QUEUE = "bench-diskfull"
_NUMBER = struct.Struct(">Q")
MiB = 1024 * 1024


def body(number: int, size: int) -> bytes:
    """The body of message *number*: its number, then a pattern it determines."""
    head = _NUMBER.pack(number)
    return head + bytes((number + i) % 251 for i in range(size - len(head)))


def number_of(content: bytes, size: int) -> Optional[int]:
    """The number a body carries, or None if the body is not what it should be."""
    number: int = _NUMBER.unpack_from(content)[0]
    return number if content == body(number, size) else None


class Publisher(threading.Thread):
    """Publishes numbered persistent messages, each once the previous one is
    confirmed, until :meth:`finish`; notes when it is blocked and unblocked.

    It runs pika's asynchronous connection in its own thread, so that
    connection.blocked is seen the moment it arrives (a blocking connection
    would only hand it over between two publishes, and a blocked publish
    never returns).
    """

    def __init__(self, port: int, size: int, data_dir: Path) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.size = size
        self.data_dir = data_dir
        self.confirmed: list[int] = []
        self.nacked = 0
        self.error: Optional[str] = None
        self.blocked_at: Optional[float] = None
        self.confirmed_before_alarm = 0
        self.free_when_blocked = 0
        self.unblocked_at: Optional[float] = None
        self.confirmed_after_resuming = 0
        self.started_at = time.monotonic()
        self._number = 0
        self._finishing = False
        self._properties = pika.BasicProperties(delivery_mode=2)
        self._connection: Any = None
        self._channel: Any = None

    def run(self) -> None:
        self._connection = pika.SelectConnection(
            pika.ConnectionParameters("127.0.0.1", self.port, heartbeat=0),
            on_open_callback=lambda connection: connection.channel(on_open_callback=self._opened),
            on_open_error_callback=self._closed,
            on_close_callback=self._closed,
        )
        self._connection.add_on_connection_blocked_callback(self._blocked)
        self._connection.add_on_connection_unblocked_callback(self._unblocked)
        self._connection.ioloop.start()

    def finish(self) -> None:
        """Close the connection (from any thread)."""
        self._connection.ioloop.add_callback_threadsafe(self._finish)

    def _finish(self) -> None:
        self._finishing = True
        if self._connection.is_open:
            self._connection.close()

    def _opened(self, channel: Any) -> None:
        self._channel = channel
        channel.queue_declare(
            QUEUE, durable=True,
            callback=lambda _: channel.confirm_delivery(self._confirmed, callback=lambda _: self._publish()),
        )

    def _publish(self) -> None:
        self._number += 1
        self._channel.basic_publish("", QUEUE, body(self._number, self.size), self._properties)

    def _confirmed(self, frame: Any) -> None:
        if isinstance(frame.method, pika.spec.Basic.Ack):
            self.confirmed.append(self._number)
            if self.unblocked_at is not None:
                self.confirmed_after_resuming += 1
        else:
            self.nacked += 1
        if not self._finishing:
            self._publish()

    def _closed(self, _connection: Any, reason: Any) -> None:
        if not self._finishing:
            self.error = f"{type(reason).__name__}: {reason}"
        self._connection.ioloop.stop()

    def _blocked(self, _connection: Any, _frame: Any) -> None:
        if self.blocked_at is None:
            self.blocked_at = time.monotonic()
            self.confirmed_before_alarm = len(self.confirmed)
            self.free_when_blocked = free_bytes(self.data_dir)

    def _unblocked(self, _connection: Any, _frame: Any) -> None:
        if self.unblocked_at is None:
            self.unblocked_at = time.monotonic()


def drain(
    channel: Any, size: int, received: set[int], corrupt: list[bytes], until: Any = lambda: False
) -> None:
    """Consume and acknowledge until the queue is empty for a second, or *until()* holds."""
    for method, _properties, content in channel.consume(QUEUE, inactivity_timeout=1.0):
        if method is None:
            if channel.queue_declare(QUEUE, durable=True, passive=True).method.message_count == 0:
                break
        else:
            number = number_of(content, size)
            if number is None:
                corrupt.append(content[:16])
            else:
                received.add(number)
            channel.basic_ack(method.delivery_tag)
        if until():
            break
    channel.cancel()


class Watchdog(threading.Thread):
    """Gives each step of the run a deadline, and fails the run when one passes.

    When a step overruns, the watchdog notes why (:attr:`expired`), writes
    every thread's stack to stderr and kills the broker: whatever the run
    waits for on the broker (a pika call, a confirm, a delivery) then ends,
    and :meth:`step` turns that into a :class:`SystemExit` with the reason.

    :param broker: the broker to kill.
    :param timeout: seconds each step may take.
    :param describe: the state of the run, for the reason.
    :param log: the broker's log file, whose end the reason quotes.
    """

    def __init__(self, broker: Txamqp09Broker, timeout: float, describe: Callable[[], str], log: str) -> None:
        super().__init__(daemon=True)
        self.broker = broker
        self.timeout = timeout
        self.describe = describe
        self.log = log
        self.expired: Optional[str] = None
        self._what: Optional[str] = None
        self._deadline = 0.0
        self._changed = threading.Condition()

    @contextmanager
    def step(self, what: str) -> Iterator[None]:
        """Run the body as the step *what*, within :attr:`timeout` seconds."""
        with self._changed:
            self._what, self._deadline = what, time.monotonic() + self.timeout
            self._changed.notify()
        try:
            yield
        except Exception:
            if self.expired is None:
                raise
        finally:
            with self._changed:
                self._what = None
        if self.expired is not None:
            raise SystemExit(self.expired)

    def wait_for(self, condition: Callable[[], bool]) -> None:
        """Wait until *condition()* holds (looking every 50 ms) or the step expires."""
        while not condition() and self.expired is None:
            time.sleep(0.05)

    def run(self) -> None:
        with self._changed:
            while self._what is None or time.monotonic() < self._deadline:
                self._changed.wait(None if self._what is None else self._deadline - time.monotonic())
            what = self._what
        self.expired = (
            f"timed out after {self.timeout:g} s waiting for {what}: {self.describe()}\n"
            f"the broker's log ends:\n{tail(self.log)}"
        )
        faulthandler.dump_traceback(all_threads=True)
        self.broker.kill()


def tail(path: str, lines: int = 8, width: int = 240) -> str:
    """The last *lines* non-blank lines of the file at *path*, each cut to *width* characters."""
    try:
        with open(path, errors="replace") as log:
            last = [line.rstrip()[:width] for line in log if line.strip()][-lines:]
    except OSError as error:
        return f"(unreadable: {error})"
    return "\n".join(last)


def run(mount: Path, log: str, options: argparse.Namespace) -> dict[str, Any]:
    """The scenario on the file system mounted at *mount*; its figures."""
    data_dir = mount / "data"
    broker = Txamqp09Broker(str(data_dir), ("--disk-free-limit", str(options.limit)), log=log)
    publisher = Publisher(broker.port, options.body_size, data_dir)
    received: set[int] = set()
    corrupt: list[bytes] = []

    def describe() -> str:
        return (
            f"{len(publisher.confirmed):,} confirmed, {publisher.nacked} nacked,"
            f" blocked: {publisher.blocked_at is not None}, unblocked: {publisher.unblocked_at is not None},"
            f" {publisher.confirmed_after_resuming} confirmed after resuming, error: {publisher.error};"
            f" {len(received):,} drained; {free_bytes(data_dir) / MiB:.1f} MiB free on the file system"
        )

    watchdog = Watchdog(broker, options.timeout, describe, log)
    watchdog.start()
    try:
        with watchdog.step("connection.blocked (publishing until the disk alarm)"):
            publisher.start()
            watchdog.wait_for(lambda: publisher.blocked_at is not None or not publisher.is_alive())
        with watchdog.step("the drain to free the disk and the publisher to be unblocked"):
            consumer = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", broker.port, heartbeat=0))
            channel = consumer.channel()
            channel.basic_qos(prefetch_count=500)
            drain_started = time.monotonic()
            drain(channel, options.body_size, received, corrupt, lambda: publisher.unblocked_at is not None)
            drained_in = time.monotonic() - drain_started
            drained_before_resuming = len(received)
            free_after_drain = free_bytes(data_dir)
            watchdog.wait_for(lambda: publisher.unblocked_at is not None or not publisher.is_alive())
        with watchdog.step(f"{options.after} confirms after publishing resumed"):
            watchdog.wait_for(
                lambda: publisher.confirmed_after_resuming >= options.after or not publisher.is_alive()
            )
        with watchdog.step("the publisher to close and the queue to be drained"):
            publisher.finish()
            watchdog.wait_for(lambda: not publisher.is_alive())
            drain(channel, options.body_size, received, corrupt)
            consumer.close()
    finally:
        broker.stop()
    confirmed = set(publisher.confirmed)
    blocked_at = publisher.blocked_at
    return {
        "size": options.size,
        "limit": options.limit,
        "confirmed_before_alarm": publisher.confirmed_before_alarm,
        "seconds_to_alarm": round(blocked_at - publisher.started_at, 1) if blocked_at else None,
        "free_when_blocked": publisher.free_when_blocked,
        "blocked": blocked_at is not None,
        "nacked": publisher.nacked,
        "error": publisher.error,
        "drained_before_resuming": drained_before_resuming,
        "drain_seconds": round(drained_in, 1),
        "free_after_drain": free_after_drain,
        "seconds_blocked": (
            round(publisher.unblocked_at - blocked_at, 1) if blocked_at and publisher.unblocked_at else None
        ),
        "confirmed_after_resuming": publisher.confirmed_after_resuming,
        "confirmed": len(confirmed),
        "lost": len(confirmed - received),
        "corrupt": len(corrupt),
    }


def report(figures: dict[str, Any]) -> str:
    """The figures as lines for a person."""
    mib = lambda size: f"{size / MiB:.1f} MiB"  # noqa: E731
    return "\n".join([
        f"file system {mib(figures['size'])}, --disk-free-limit {mib(figures['limit'])}",
        f"confirmed before the alarm: {figures['confirmed_before_alarm']:,}"
        f" (in {figures['seconds_to_alarm']} s); free when blocked: {mib(figures['free_when_blocked'])}",
        f"blocked: {figures['blocked']}; nacked: {figures['nacked']}; errors: {figures['error'] or 'none'}",
        f"drained while blocked: {figures['drained_before_resuming']:,} in {figures['drain_seconds']} s"
        " (draining stops once publishing resumes);"
        f" free afterwards: {mib(figures['free_after_drain'])}",
        f"unblocked after {figures['seconds_blocked']} s blocked;"
        f" confirmed after resuming: {figures['confirmed_after_resuming']:,}",
        f"confirmed in all: {figures['confirmed']:,}; lost: {figures['lost']}; corrupt: {figures['corrupt']}",
    ])


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=parse_size, default=96 * MiB, help="the file system's size (96MiB)")
    parser.add_argument("--limit", type=parse_size, default=24 * MiB, help="--disk-free-limit (24MiB)")
    parser.add_argument("--body-size", type=int, default=1024, help="bytes per message body (1024)")
    parser.add_argument("--after", type=int, default=1000, help="confirms to wait for after resuming")
    parser.add_argument("--timeout", type=float, default=900, help="seconds each step may take (900)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="diskfull-") as scratch:
        mount = Path(scratch) / "fs"
        try:
            mount_small_file_system(mount, options.size)
        except MountFailed as error:
            raise SystemExit(f"cannot run: {error}") from None
        try:
            figures = run(mount, os.path.join(scratch, "broker.log"), options)
        finally:
            unmount(mount)
    print(json.dumps(figures) if options.json else report(figures))


if __name__ == "__main__":
    main()
