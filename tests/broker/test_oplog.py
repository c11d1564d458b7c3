"""The operator log: what the broker says about its start and its connections."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from twisted.internet import reactor
from twisted.internet.endpoints import TCP4ServerEndpoint
from twisted.internet.task import Clock
from twisted.logger import formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase, TestCase

from txamqp09.testing.scripted import ScriptedClient
from txamqp09.broker import oplog
from txamqp09.broker.alarms import ResourceAlarms
from txamqp09.broker.disk import DiskMonitor
from txamqp09.broker.server import ServerFactory
from txamqp09.broker.service import BrokerService, StartupError
from txamqp09.tap import Options, makeService


class LogCapture:
    """The operator log's lines, formatted, while a test runs."""

    def __init__(self, test: SynchronousTestCase) -> None:
        self.events: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(self.events.append)
        test.addCleanup(globalLogPublisher.removeObserver, self.events.append)
        test.addCleanup(oplog.set_level, "info")

    def lines(self) -> list[str]:
        """Every operator log line so far, as ``level: text``."""
        return [
            f"{event['log_level'].name}: {formatEvent(event)}"
            for event in self.events
            if event.get("log_namespace") == "txamqp09.broker"
        ]


class ConnectionLinesTests(SynchronousTestCase):
    """One line per connection opened, closed, refused or timed out."""

    def setUp(self) -> None:
        self.log = LogCapture(self)
        self.clock = Clock()
        self.factory = ServerFactory(self.clock)

    def test_opened_and_closed(self) -> None:
        peer = ScriptedClient(self.factory)
        self.clock.advance(2.5)
        peer.send(0, peer.spec.ConnectionClose(reply_code=200, reply_text="bye", class_id=0, method_id=0))
        peer.server.connectionLost(None)
        self.assertEqual(self.log.lines(), [
            "info: connection from 127.0.0.1:40000 opened: user 'guest', vhost '/', AMQP 0-9-1, client unnamed",
            "info: connection from 127.0.0.1:40000 closed after 2.5 s: user 'guest', 200 bye",
        ])

    def test_client_product_is_named(self) -> None:
        peer = ScriptedClient(self.factory, handshake=False)
        peer.feed(peer.version.header)
        peer.send(0, peer.spec.ConnectionStartOk(
            client_properties={"product": b"pika", "version": b"1.3.2"}, mechanism="PLAIN",
            response=b"\x00guest\x00guest", locale="en_US"))
        peer.send(0, peer.spec.ConnectionTuneOk(channel_max=0, frame_max=4096, heartbeat=0))
        peer.send(0, peer.spec.ConnectionOpen(virtual_host="/"))
        self.assertIn("client pika 1.3.2", self.log.lines()[-1])

    def test_unknown_vhost(self) -> None:
        peer = ScriptedClient(self.factory, handshake=False)
        peer.feed(peer.version.header)
        peer.send(0, peer.spec.ConnectionStartOk(
            client_properties={}, mechanism="PLAIN", response=b"\x00guest\x00guest", locale="en_US"))
        peer.send(0, peer.spec.ConnectionTuneOk(channel_max=0, frame_max=4096, heartbeat=0))
        peer.send(0, peer.spec.ConnectionOpen(virtual_host="billing"))
        peer.server.connectionLost(None)
        self.assertEqual(self.log.lines()[0], (
            "warn: connection from 127.0.0.1:40000 refused vhost 'billing' for user 'guest': "
            "virtual host 'billing' does not exist"
        ))
        self.assertRegex(self.log.lines()[1], r"^info: connection from 127\.0\.0\.1:40000 closed after 0\.0 s: "
                                              r"user 'guest', 530 ")

    def test_handshake_timeout(self) -> None:
        peer = ScriptedClient(self.factory, handshake=False)
        self.clock.advance(peer.server.handshake.timeout)
        peer.server.connectionLost(None)
        self.assertEqual(self.log.lines(), [
            "warn: connection from 127.0.0.1:40000 dropped: not opened within 10.0 s",
            "info: connection from 127.0.0.1:40000 closed after 10.0 s: user (none), "
            "320 connection not opened within 10.0 seconds",
        ])

    def test_log_level_quiets_lower_levels(self) -> None:
        oplog.set_level("warn")
        ScriptedClient(self.factory).server.connectionLost(None)
        self.clock.advance(10.0)
        ScriptedClient(self.factory, handshake=False)
        self.clock.advance(10.0)
        self.assertEqual(
            self.log.lines(), ["warn: connection from 127.0.0.1:40000 dropped: not opened within 10.0 s"]
        )

    def test_bad_level(self) -> None:
        error = self.assertRaises(ValueError, oplog.set_level, "loud")
        self.assertEqual(str(error), "'loud' is not a log level: use one of debug, info, warn, error, critical")


class AlarmLinesTests(SynchronousTestCase):
    """Resource alarms set and cleared are operator log lines, under --log-level."""

    def setUp(self) -> None:
        self.log = LogCapture(self)
        self.clock = Clock()
        self.free = 10 * 2**20
        self.monitor = DiskMonitor(Path("/data"), 50 * 2**20, ResourceAlarms(), self.clock, lambda _: self.free)

    def test_disk_alarm_set_and_cleared(self) -> None:
        self.monitor.check()
        self.free = 60 * 2**20
        self.monitor.check()
        self.assertEqual(self.log.lines(), [
            "warn: disk alarm set: 10.0 MiB free on /data, limit 50.0 MiB; publishers are blocked",
            "info: disk alarm cleared: 60.0 MiB free on /data, limit 50.0 MiB",
        ])

    def test_log_level_quiets_the_cleared_line(self) -> None:
        oplog.set_level("warn")
        self.monitor.check()
        self.free = 60 * 2**20
        self.monitor.check()
        self.assertEqual(
            self.log.lines(), ["warn: disk alarm set: 10.0 MiB free on /data, limit 50.0 MiB; publishers are blocked"]
        )


class StartupLinesTests(TestCase):
    """What the broker says as it starts, in the order it does it."""

    def setUp(self) -> None:
        self.log = LogCapture(self)
        self.directory = Path(self.mktemp())
        self.directory.mkdir()

    def start(self, *argv: str) -> BrokerService:
        options = Options()
        options.parseOptions(list(argv))
        broker: BrokerService = makeService(options)  # type: ignore[assignment]
        broker.privilegedStartService()
        broker.startService()
        self.addCleanup(broker.stopService)
        return broker

    def test_startup_lines(self) -> None:
        definitions = self.directory / "definitions.json"
        definitions.write_text(json.dumps({
            "users": [{"name": "app", "password_hash": "", "tags": ""}],
            "vhosts": [{"name": "/"}, {"name": "billing"}],
            "permissions": [{"user": "app", "vhost": "billing", "configure": ".*", "write": ".*", "read": ".*"}],
            "federation_upstreams": [],
        }), encoding="utf-8")
        data = self.directory / "data"
        self.start("--listen", "tcp:0:interface=127.0.0.1", "--data-dir", str(data),
                   "--definitions", str(definitions))
        lines = self.log.lines()
        self.assertRegex(lines.pop(0), r"^info: memory high watermark [\d.]+ MiB: 0\.4 of the machine's [\d.]+ MiB$")
        self.assertRegex(lines[0], r"^info: listening for amqp on 127\.0\.0\.1 only, port \d+$")
        self.assertEqual(lines[1], f"info: data directory {data} (message store {data}/store.db)")
        self.assertRegex(lines[2], r"^info: message store restored: 0 durable queues, 0 durable exchanges, "
                                   r"0 persistent messages in [\d.]+ s \(0 bytes of bodies left on disk\)$")
        self.assertEqual(lines[3:], [
            f"info: definitions file {definitions} applied: 1 user, 2 vhosts, 1 permission, "
            "0 queues, 0 exchanges, 0 bindings, 0 policies",
            f"warn: definitions file {definitions}: not applied: top-level key 'federation_upstreams'",
            "info: users: 'app'; vhosts: '/', 'billing'",
            "info: accepting connections on 1 listener",
        ])

    def test_counts_agree_with_their_nouns(self) -> None:
        oplog.restored(1, 2, 1, 0.25, 1)
        oplog.restored(0, 1, 2, 0.25, 4096, followed=True)
        oplog.accepting(1)
        oplog.accepting(3)
        self.assertEqual(self.log.lines(), [
            "info: message store restored: 1 durable queue, 2 durable exchanges, 1 persistent message "
            "in 0.25 s (1 byte of bodies left on disk)",
            "info: message store restored: 0 durable queues, 1 durable exchange, 2 persistent messages "
            "in 0.25 s (4096 bytes of bodies left on disk; read what changed since the copy kept while "
            "standing by)",
            "info: accepting connections on 1 listener",
            "info: accepting connections on 3 listeners",
        ])

    def test_transient_broker_on_every_interface(self) -> None:
        self.start("--port", "0", "--transient", "--memory-high-watermark", "768MiB")
        lines = self.log.lines()
        self.assertEqual(lines[0], "info: memory high watermark 768.0 MiB")
        self.assertRegex(lines[1], r"^info: listening for amqp on every interface \(0\.0\.0\.0\), port \d+$")
        self.assertEqual(lines[2:], [
            "info: transient broker: nothing is kept on disk (no data directory)",
            "info: no definitions file",
            "info: users: 'guest'; vhosts: '/'",
            "info: accepting connections on 1 listener",
        ])

    def test_port_in_use_is_a_startup_error(self) -> None:
        """Outside twistd (no exit_on_startup_error) the error is raised, in one line."""
        taken = socket.socket()
        self.addCleanup(taken.close)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        broker = BrokerService(ServerFactory(Clock()), None)
        broker.add_listener(TCP4ServerEndpoint(reactor, taken.getsockname()[1], interface="127.0.0.1"),
                            broker.factory, "amqp")
        error = self.assertRaises(StartupError, broker.privilegedStartService)
        self.assertIn("Address already in use", str(error))
        self.assertNotIn("\n", str(error))
