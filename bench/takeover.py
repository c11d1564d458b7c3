"""Time a group's takeover: kill -9 of the active broker with a backlog queued.

Starts a PostgreSQL primary with a synchronous standby on loopback
(:mod:`txamqp09.testing.postgresql`; run as root, it runs PostgreSQL as the
``postgres`` user), two brokers of one group on it, fills a durable queue of
the active with N persistent messages (publisher confirms), kills the
active with SIGKILL, and reports how long after the kill the standby's AMQP
port accepted a connection and its first publisher confirm came, and the
restore time the new active logged::

    python bench/takeover.py                          # 100,000 messages of 1 KiB
    python bench/takeover.py --messages 10000 --body-size 16 --json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from twisted.internet import reactor, task
from twisted.internet.defer import Deferred, gatherResults, inlineCallbacks
from twisted.internet.protocol import ProcessProtocol
from twisted.python.failure import Failure

from txamqp09.client import connect
from txamqp09.group.records import Address
from txamqp09.group.probe import Listening, listening
from txamqp09.testing.postgresql import PostgreSQL, group_url
from txamqp09.testing.rabbitmq import free_port

ROOT = str(Path(__file__).resolve().parents[1])
#: Confirms in flight while the backlog is published.
WINDOW = 2000
_RESTORED = re.compile(rb"restored: .*? (\d+) persistent messages in ([\d.]+) s")


class Member(ProcessProtocol):
    """``twistd amqp09`` of one group on a port of 127.0.0.1 chosen now."""

    def __init__(self, url: str, node: str) -> None:
        self.url = url
        self.node = node
        self.port = free_port()
        self.output = b""
        self.ended: Deferred[None] = Deferred()
        self._waiting: list[tuple[bytes, Deferred[None]]] = []

    def start(self, until: bytes) -> Deferred[None]:
        """Spawn the broker; fires once its output holds *until*."""
        argv = [
            sys.executable, "-m", "twisted", "--log-format", "text", "amqp09",
            "--listen", f"tcp:{self.port}:interface=127.0.0.1", "--data-dir", tempfile.mkdtemp(),
            "--store", self.url, "--node-name", self.node,
        ]
        reactor.spawnProcess(self, sys.executable, argv, env={**os.environ, "PYTHONPATH": ROOT}, path=ROOT)
        return self.logged(until)

    def logged(self, text: bytes) -> Deferred[None]:
        waiter: Deferred[None] = Deferred()
        self._waiting.append((text, waiter))
        self.outReceived(b"")
        return waiter

    def outReceived(self, data: bytes) -> None:
        self.output += data
        for entry in [entry for entry in self._waiting if entry[0] in self.output]:
            self._waiting.remove(entry)
            entry[1].callback(None)

    errReceived = outReceived

    def processEnded(self, reason: Failure) -> None:
        self.ended.callback(None)

    @property
    def amqp_url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/"

    def kill(self) -> Deferred[None]:
        """SIGKILL; fires once the process ended."""
        if self.transport is not None and not self.ended.called:
            self.transport.signalProcess("KILL")
        return self.ended


@inlineCallbacks
def measure(url: str, messages: int, body_size: int) -> Any:
    """Fill, kill, time the takeover; the figures."""
    active, standby = Member(url, "active"), Member(url, "standby")
    try:
        yield active.start(b"accepting connections")
        yield standby.start(b"group role standby")
        connection = yield connect(reactor, active.amqp_url, heartbeat=0)
        channel = yield connection.channel()
        yield channel.queue_declare("backlog", durable=True)
        yield channel.confirm_select()
        body, persistent = b"x" * body_size, {"delivery_mode": 2}
        started = time.monotonic()
        for first in range(0, messages, WINDOW):
            yield gatherResults([
                channel.basic_publish(body, routing_key="backlog", properties=persistent)
                for _ in range(min(WINDOW, messages - first))
            ])
        filled = time.monotonic() - started
        killed = time.monotonic()
        yield active.kill()
        while listening([Address("amqp", "127.0.0.1", standby.port)], timeout=1.0) is not Listening.YES:
            yield task.deferLater(reactor, 0.002)
        opened = time.monotonic() - killed
        after = yield connect(reactor, standby.amqp_url, heartbeat=0)
        channel = yield after.channel()
        yield channel.confirm_select()
        yield channel.basic_publish(b"after", routing_key="backlog", properties=persistent)
        confirmed = time.monotonic() - killed
        declared = yield channel.queue_declare("backlog", durable=True, passive=True)
        restored = _RESTORED.search(standby.output)
        return {
            "messages": messages,
            "body_size": body_size,
            "fill_seconds": round(filled, 3),
            "listening_seconds": round(opened, 3),
            "first_confirm_seconds": round(confirmed, 3),
            "restore_seconds": float(restored.group(2)) if restored else None,
            "queued_after": declared.message_count,
            "load_average": os.getloadavg()[0],
        }
    finally:
        yield gatherResults([active.kill(), standby.kill()])


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000, help="the backlog (default 100,000)")
    parser.add_argument("--body-size", type=int, default=1024, help="bytes per message (default 1024)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    options = parser.parse_args(argv)
    primary = PostgreSQL(tempfile.mkdtemp(prefix="bench-takeover-"))
    standby: Optional[PostgreSQL] = None
    figures: dict[str, Any] = {}
    try:
        primary.start()
        standby = primary.add_standby(tempfile.mkdtemp(prefix="bench-takeover-"))
        primary.make_synchronous()
        url = group_url([primary, standby], primary.new_database().rsplit("/", 1)[1])

        def run() -> Deferred[None]:
            return measure(url, options.messages, options.body_size).addCallback(figures.update)

        task.react(lambda _: run())
    except SystemExit as exit:
        if exit.code:
            raise
    finally:
        for server in (standby, primary):
            if server is not None:
                server.remove()
    if options.json:
        print(json.dumps(figures))
    else:
        print(
            f"{figures['messages']:,} messages of {figures['body_size']} B queued in {figures['fill_seconds']:.1f} s; "
            f"after kill -9 of the active: standby listening in {figures['listening_seconds']:.3f} s, "
            f"first confirm in {figures['first_confirm_seconds']:.3f} s (restore {figures['restore_seconds']} s); "
            f"load average {figures['load_average']:.1f}"
        )


if __name__ == "__main__":
    main()
