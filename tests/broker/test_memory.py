"""The memory alarm, unfinished messages and the memory they hold."""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.testing.scripted import ScriptedClient, server_factory
from tests.broker import test_alarms
from tests.test_tap import build
from txamqp09.broker.alarms import ResourceAlarms
from txamqp09.broker.memory import (
    LOOK_AGAIN_AFTER,
    RELEASE_THRESHOLD,
    allocator_free,
    tune_allocator,
    MemoryMonitor,
    parse_watermark,
    release_memory,
    resident_memory,
    total_memory,
)
from txamqp09.broker.server import PAUSED_PROBE_INTERVAL
from txamqp09.wire.bodies import MAPPED_BODY_SIZE, BodyBuffer
from txamqp09.wire.errors import PreconditionFailed
from txamqp09.wire.frames import FRAME_OVERHEAD, HEARTBEAT_FRAME

MiB = 1024 * 1024


class Probe:
    """An injectable memory probe: says what :attr:`used` holds."""

    def __init__(self, used: int = 0) -> None:
        self.used = used
        self.looks = 0

    def __call__(self) -> int:
        self.looks += 1
        return self.used


class WatermarkTests(SynchronousTestCase):
    def test_fraction_or_size(self) -> None:
        self.assertEqual(parse_watermark("0.4"), 0.4)
        self.assertEqual(parse_watermark("1"), 1.0)
        self.assertEqual(parse_watermark("768MiB"), 768 * MiB)
        self.assertEqual(parse_watermark("2000000"), 2000000)
        for bad in ("-0.5", "lots", "12M", "1.5", "1e9", "nan"):
            self.assertRaises(ValueError, parse_watermark, bad)

    def test_option(self) -> None:
        (service,) = build("--port", "5999", "--memory-high-watermark", "768MiB")
        self.assertEqual(service.factory.memory.watermark, 768 * MiB)
        (service,) = build("--port", "5999")
        self.assertEqual(service.factory.memory.watermark, int(0.4 * total_memory()))

    def test_resident_memory_is_read(self) -> None:
        used = resident_memory()
        if used is None:
            raise self.skipTest("this system has no /proc/self/statm")
        self.assertGreater(used, 1 * MiB)
        self.assertLess(used, total_memory())


class MemoryMonitorTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.alarms = ResourceAlarms()
        self.probe = Probe(100 * MiB)
        self.monitor = MemoryMonitor(self.alarms, self.clock, 200 * MiB, self.probe, interval=1.0)
        self.monitor.start()
        self.addCleanup(self.monitor.stop)

    def test_raised_above_and_cleared_below(self) -> None:
        self.assertEqual(self.alarms.active(), frozenset())
        self.probe.used = 200 * MiB
        self.clock.advance(1.0)
        self.assertEqual(self.alarms.active(), frozenset({"memory"}))
        self.probe.used = 199 * MiB
        self.clock.advance(1.0)
        self.assertEqual(self.alarms.active(), frozenset())

    def test_buffered_bytes_make_it_look_at_once(self) -> None:
        looks = self.probe.looks
        self.probe.used = 300 * MiB
        self.monitor.buffered(LOOK_AGAIN_AFTER - 1)
        self.assertEqual((self.probe.looks, self.alarms.active()), (looks, frozenset()))
        self.monitor.buffered(1)
        self.assertEqual((self.probe.looks, self.alarms.active()), (looks + 1, frozenset({"memory"})))

    def test_released_memory_is_trimmed_once_then_looked_at(self) -> None:
        self.alarms.raise_alarm("memory")
        looks = self.probe.looks
        self.monitor.released()
        self.monitor.released()
        self.clock.advance(0)
        self.assertEqual((self.probe.looks, self.alarms.active()), (looks + 1, frozenset()))

    def test_release_memory_runs(self) -> None:
        self.assertIsInstance(release_memory(), bool)

    def test_allocator_free_memory_is_trimmed_once_it_grew(self) -> None:
        """Once a second the monitor asks the allocator what it holds free,
        and trims when that grew by the threshold since the last trim and
        stopped growing."""
        free = [10 * MiB]
        trims: list[int] = []

        def trim() -> None:
            trims.append(free[0])
            free[0] = 2 * MiB

        monitor = MemoryMonitor(
            self.alarms, self.clock, 200 * MiB, self.probe, interval=0.25,
            free_probe=lambda: free[0], release=trim,
        )
        monitor.start()
        self.addCleanup(monitor.stop)
        free[0] = RELEASE_THRESHOLD + 10 * MiB
        self.clock.advance(1.0)
        self.assertEqual(trims, [])  # still growing
        self.clock.advance(0.25)
        self.assertEqual(trims, [])  # the allocator is asked once a second
        self.clock.advance(0.75)
        self.assertEqual(trims, [RELEASE_THRESHOLD + 10 * MiB])
        free[0] = RELEASE_THRESHOLD + 1 * MiB  # grew by less than the threshold since
        self.clock.advance(1.0)
        self.assertEqual(len(trims), 1)
        free[0] = RELEASE_THRESHOLD + 3 * MiB
        self.clock.advance(1.0)
        self.assertEqual(len(trims), 1)  # grew
        self.clock.advance(1.0)
        self.assertEqual(trims[1:], [RELEASE_THRESHOLD + 3 * MiB])

    def test_allocator_tuned_where_it_reports_its_free_memory(self) -> None:
        """glibc 2.33+ (which has mallinfo2) takes both mallopt settings."""
        if allocator_free() is None:
            raise self.skipTest("the C library does not report its free memory (glibc 2.33+ does)")
        self.assertTrue(tune_allocator())

    def test_allocator_free_counts_freed_bodies(self) -> None:
        before = allocator_free()
        if before is None:
            raise self.skipTest("the C library does not report its free memory (glibc 2.33+ does)")
        release_memory()
        bodies = [bytes(1024) + bytes([index % 256]) for index in range(40000)]
        pin = bytes(1024) + b"after"  # above the bodies: the allocator cannot shrink its heap by itself
        held = allocator_free()
        del bodies
        freed = allocator_free()
        del pin
        assert held is not None and freed is not None
        self.assertGreater(freed - held, 32 * MiB)
        release_memory()
        trimmed = allocator_free()
        assert trimmed is not None
        self.assertLess(trimmed, freed)


class BodyBufferTests(SynchronousTestCase):
    def test_small_and_mapped_bodies(self) -> None:
        for size in (10000, MAPPED_BODY_SIZE + 10):
            data = bytes(range(256)) * (size // 256) + b"z" * (size % 256)
            buffer = BodyBuffer(size)
            source = bytearray(b"--" + data + b"--")
            for start in range(2, size + 2, 4000):
                buffer.add(source, start, min(start + 4000, size + 2))
            self.assertEqual(buffer.held, size)
            self.assertEqual(buffer.take(), data)
            self.assertEqual(buffer.held, 0)

    def test_discard(self) -> None:
        buffer = BodyBuffer(MAPPED_BODY_SIZE)
        buffer.add(b"abc", 0, 3)
        buffer.discard()
        self.assertEqual(buffer.held, 0)


class UnfinishedMessagesTests(SynchronousTestCase):
    """Bodies gathered over many frames, and what a connection may hold."""

    def setUp(self) -> None:
        self.clock = Clock()
        self.probe = Probe()
        self.factory = server_factory(self.clock, memory_probe=self.probe, memory_high_watermark=200 * MiB)

    def unfinished(self, peer: ScriptedClient, channel: int, size: int, body_frames: int) -> int:
        """Publish a message of *size* bytes on *channel* but send only its
        first *body_frames* body frames (of 4088 bytes); the bytes sent."""
        frames = peer.publish_bytes(channel, "q", b"u" * size)
        head = len(frames) - size - FRAME_OVERHEAD * -(-size // 4088)
        peer.feed(frames[: head + body_frames * 4096])
        return body_frames * 4088

    def test_large_body_over_many_frames(self) -> None:
        peer = ScriptedClient(self.factory)
        peer.send(1, peer.spec.QueueDeclare(queue="q"))
        peer.send(1, peer.spec.BasicConsume(queue="q", no_ack=True))
        peer.frames()
        body = bytes(range(256)) * (3 * MiB // 256)
        peer.publish(1, "q", body)
        self.assertEqual(peer.deliveries(), [body])
        self.assertEqual(peer.server.partial_bytes, 0)

    def test_partial_bytes_counted_and_released(self) -> None:
        peer = ScriptedClient(self.factory)
        peer.open(2)
        first = self.unfinished(peer, 1, 2 * MiB, 30)
        second = self.unfinished(peer, 2, 2 * MiB, 20)
        self.assertEqual(peer.server.partial_bytes, first + second)
        peer.server.channelError(2, PreconditionFailed("closed by the test"))
        self.assertEqual(peer.server.partial_bytes, first)
        peer.server.connectionLost(None)
        self.assertEqual(peer.server.partial_bytes, 0)

    def test_connection_limit_across_channels(self) -> None:
        self.factory.options["partial_content_max"] = 3 * MiB
        peer = ScriptedClient(self.factory)
        peer.open(2)
        self.unfinished(peer, 1, 4 * MiB, 500)
        self.unfinished(peer, 2, 4 * MiB, 500)
        close = peer.expect(0, "connection.close")
        self.assertEqual(close.reply_code, 506)
        self.assertIn("unfinished messages on this connection", close.reply_text)

    def test_buffered_bodies_raise_the_alarm_without_waiting(self) -> None:
        peer = ScriptedClient(self.factory, capabilities={"connection.blocked": True})
        self.probe.used = 250 * MiB
        self.unfinished(peer, 1, 16 * MiB, 2000)
        self.assertEqual(self.factory.alarms.active(), frozenset({"memory"}))
        peer.expect(0, "connection.blocked")
        self.assertEqual(peer.transport.producerState, "paused")

    def test_a_client_not_read_is_sent_heartbeats(self) -> None:
        """The heartbeats make a client that went away show as gone, and
        what it held is freed."""
        peer = ScriptedClient(self.factory)
        self.factory.alarms.raise_alarm("memory")
        self.unfinished(peer, 1, 4 * MiB, 10)
        peer.frames()
        self.clock.advance(PAUSED_PROBE_INTERVAL)
        self.assertEqual(peer.transport.value(), HEARTBEAT_FRAME)
        self.factory.alarms.clear_alarm("memory")
        peer.transport.clear()
        self.clock.advance(PAUSED_PROBE_INTERVAL * 3)
        self.assertEqual(peer.transport.value(), b"")


class MemoryBlockedClientTests(test_alarms.BlockedClientTests):
    """pika and this package's client blocked by the memory alarm (an
    injected probe crosses the watermark), then released."""

    reason = "low on memory"

    def setUp(self) -> None:
        self.probe = Probe(0)
        self.broker_options = {"memory_probe": self.probe, "memory_high_watermark": 100 * MiB}
        super().setUp()

    def block(self) -> None:
        self.probe.used = 100 * MiB

    def release(self) -> None:
        self.probe.used = 0
