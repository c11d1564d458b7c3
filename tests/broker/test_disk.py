"""The disk alarm: free space watched on a clock, and a store whose writes fail."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, cast

from twisted.internet import reactor
from twisted.internet.interfaces import IReactorFromThreads
from twisted.internet.task import Clock
from twisted.logger import capturedLogs, formatEvent
from twisted.trial.unittest import SynchronousTestCase, TestCase

from tests.client.support import inline
from txamqp09.broker.alarms import ResourceAlarms
from txamqp09.broker.disk import MAX_INTERVAL, MIN_INTERVAL, DiskMonitor, StoreAlarm
from txamqp09.broker.model import Broker, Persistence
from txamqp09.client import MessageNacked, connect
from txamqp09.store import writer
from txamqp09.store.memory import MemoryStore
from txamqp09.store.sqlite import SQLiteStore
from txamqp09.testing.broker import LoopbackBroker
from txamqp09.testing.faults import DISK_FULL, faulty_store
from txamqp09.testing.waiting import eventually

MiB = 1024 * 1024
PERSISTENT = {"delivery_mode": 2}


class FailingStore(MemoryStore):
    """A memory store whose failure listeners the test calls."""

    def __init__(self) -> None:
        super().__init__()
        self.listeners: list[Any] = []

    def add_failure_listener(self, listener: Any) -> None:
        self.listeners.append(listener)

    def report(self, error: Optional[str]) -> None:
        for listener in self.listeners:
            listener(error)


class DiskMonitorTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.alarms = ResourceAlarms()
        self.changes: list[frozenset[str]] = []
        self.alarms.subscribe(self.changes.append)
        self.free = 100 * MiB
        self.looked: list[Path] = []
        self.monitor = DiskMonitor(Path("/data"), 50 * MiB, self.alarms, self.clock, self.read_free)
        self.monitor.startService()
        self.addCleanup(self.monitor.stopService)

    def read_free(self, directory: Path) -> int:
        self.looked.append(directory)
        return self.free

    def test_alarm_below_the_limit_cleared_above_it(self) -> None:
        self.assertEqual(self.changes, [])
        self.free = 50 * MiB - 1
        self.clock.advance(MAX_INTERVAL)
        self.assertEqual(self.changes, [frozenset({"disk"})])
        self.free = 50 * MiB
        self.clock.advance(MAX_INTERVAL)
        self.assertEqual(self.changes, [frozenset({"disk"}), frozenset()])
        self.assertEqual(set(self.looked), {Path("/data")})

    def test_looks_sooner_near_the_limit(self) -> None:
        self.assertEqual(self.monitor.interval(50 * MiB + 1), MIN_INTERVAL)
        self.assertEqual(self.monitor.interval(10_000 * MiB), MAX_INTERVAL)
        near = self.monitor.interval(200 * MiB)
        self.assertTrue(MIN_INTERVAL < near < MAX_INTERVAL, near)
        self.free = 200 * MiB
        self.clock.advance(MAX_INTERVAL)
        looks = len(self.looked)
        self.clock.advance(near)
        self.assertEqual(len(self.looked), looks + 1)

    def test_a_failing_store_keeps_the_alarm_up_until_it_writes_again(self) -> None:
        store = FailingStore()
        self.monitor.watch(store)
        with capturedLogs() as events:
            store.report(f"OperationalError: {DISK_FULL}")
            store.report(f"OperationalError: {DISK_FULL}")
            self.assertEqual(self.changes, [frozenset({"disk"})])
            self.clock.advance(MAX_INTERVAL)
            self.assertEqual(self.alarms.active(), frozenset({"disk"}))
            store.report(None)
        self.assertEqual(self.changes, [frozenset({"disk"}), frozenset()])
        lines = [formatEvent(event) for event in events]
        self.assertEqual(
            [line for line in lines if "message store" in line],
            [f"the message store cannot write: OperationalError: {DISK_FULL}; it tries again",
             "the message store writes again"],
        )

    def test_space_the_store_may_take_counts_as_used(self) -> None:
        reserved = 4 * MiB
        monitor = DiskMonitor(
            Path("/data"), 50 * MiB, self.alarms, self.clock, self.read_free, reserved=lambda: reserved
        )
        self.free = 52 * MiB
        monitor.check()
        self.assertEqual((monitor.free, self.alarms.active()), (48 * MiB, frozenset({"disk"})))
        reserved = 0
        monitor.check()
        self.assertEqual(self.alarms.active(), frozenset())

    def test_unreadable_free_space_keeps_the_last_state(self) -> None:
        self.free = 10 * MiB
        self.clock.advance(MAX_INTERVAL)

        def unreadable(_: Path) -> int:
            raise OSError("gone")

        self.monitor._read_free = unreadable
        self.clock.advance(MAX_INTERVAL)
        self.assertEqual(self.alarms.active(), frozenset({"disk"}))

    def test_stopping_ends_the_looks(self) -> None:
        self.monitor.stopService()
        looks = len(self.looked)
        self.clock.advance(10 * MAX_INTERVAL)
        self.assertEqual(len(self.looked), looks)
        self.assertEqual(self.clock.getDelayedCalls(), [])


class StoreAlarmTests(SynchronousTestCase):
    """A store whose disk is not this machine's: its failed writes alone raise the alarm."""

    def test_the_alarm_follows_the_stores_reports(self) -> None:
        alarms = ResourceAlarms()
        changes: list[frozenset[str]] = []
        alarms.subscribe(changes.append)
        store = FailingStore()
        alarm = StoreAlarm(alarms)
        alarm.watch(store)
        with capturedLogs() as events:
            store.report("OperationalError: server closed the connection unexpectedly")
            store.report("OperationalError: connection refused")
            store.report(None)
        self.assertEqual(changes, [frozenset({"disk"}), frozenset()])
        self.assertIsNone(alarm.store_error)
        said = [formatEvent(event) for event in events]
        self.assertEqual(len(said), 2, said)
        self.assertIn("server closed the connection unexpectedly", said[0])
        self.assertIn("writes again", said[1])


class FullDiskTests(TestCase):
    """A broker whose store cannot write: the client's view."""

    timeout = 60

    def setUp(self) -> None:
        self.patch(writer, "RETRY_SECONDS", 0.05)
        self.store, self.faults = faulty_store(Path(self.mktemp()) / "store.db", cast(IReactorFromThreads, reactor))
        self.store.open()
        self.addCleanup(self.store.close)
        self.server = LoopbackBroker(broker=Broker(persistence=Persistence(self.store)))
        self.server.start()
        self.addCleanup(self.server.stop)
        self.monitor = DiskMonitor(
            self.store.path.parent, 50 * MiB, self.server.factory.alarms, reactor, lambda _: 100 * MiB
        )
        self.monitor.watch(self.store)
        self.monitor.startService()
        self.addCleanup(self.monitor.stopService)

    @inline
    async def test_nacked_blocked_drained_then_resumed_and_nothing_confirmed_lost(self) -> None:
        publisher = await connect(reactor, self.server.url)
        self.addCleanup(publisher.disconnect)
        changes: list[Any] = []
        publisher.addBlockedListener(changes.append)
        channel = await publisher.channel()
        await channel.queue_declare("q", durable=True)
        await channel.confirm_select()
        for number in range(20):
            await channel.basic_publish(b"%d" % number, routing_key="q", properties=PERSISTENT)
        self.faults.arm("INSERT INTO messages", DISK_FULL)
        failed = channel.basic_publish(b"lost", routing_key="q", properties=PERSISTENT)
        with self.assertRaises(MessageNacked):
            await failed
        self.assertEqual(self.server.factory.alarms.active(), frozenset({"disk"}))

        consumer = await connect(reactor, self.server.url)
        self.addCleanup(consumer.disconnect)
        reader = await consumer.channel()
        drained = []
        while True:
            got = await reader.basic_get("q")
            if got is None:
                break
            drained.append(got.body)
            got.ack()
        self.assertEqual(drained, [b"%d" % n for n in range(20)] + [b"lost"])

        await eventually(lambda: not self.server.factory.alarms.active(), reactor)
        await channel.basic_publish(b"after", routing_key="q", properties=PERSISTENT)
        self.assertEqual(changes, ["low on disk", None])
        await publisher.disconnect()
        await consumer.disconnect()
        await self.store.when_durable(self.store.last_sequence)
        await self.store.close()
        reopened = SQLiteStore(self.store.path, cast(IReactorFromThreads, reactor))
        recovered = reopened.open()
        await reopened.close()
        self.assertEqual([m.body for m in recovered.messages[("/", "q")]], [b"after"])

    @inline
    async def test_another_channels_failed_write_nacks_nothing_here(self) -> None:
        """A publish written after another channel's publish failed is
        acked: each confirm covers its own channel's writes only."""
        connection = await connect(reactor, self.server.url)
        self.addCleanup(connection.disconnect)
        here, there = await connection.channel(), await connection.channel()
        await here.queue_declare("q", durable=True)
        for channel in (here, there):
            await channel.confirm_select()
        await here.basic_publish(b"before", routing_key="q", properties=PERSISTENT)
        self.faults.arm("INSERT INTO messages", DISK_FULL)
        with self.assertRaises(MessageNacked):
            await there.basic_publish(b"lost", routing_key="q", properties=PERSISTENT)
        await eventually(lambda: not self.server.factory.alarms.active(), reactor)
        await here.basic_publish(b"after", routing_key="q", properties=PERSISTENT)
        await connection.disconnect()
        await self.store.close()
        reopened = SQLiteStore(self.store.path, cast(IReactorFromThreads, reactor))
        recovered = reopened.open()
        await reopened.close()
        self.assertEqual([m.body for m in recovered.messages[("/", "q")]], [b"before", b"after"])
