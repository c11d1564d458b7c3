"""The stream model on a Clock: offsets, starts, credit, commits, retention, paging, refusals."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from tests.broker.model.support import LaggingStore, MessageSink, headers_of
from tests.broker.model.support import stream_message as message
from txamqp09.broker.model import Broker, Client, Persistence, Session
from txamqp09.broker.model import stream as stream_module
from txamqp09.broker.model.stream import (
    StreamQueue,
    parse_interval,
    parse_offset,
)
from txamqp09.store.memory import MemoryStore
from txamqp09.wire.errors import AMQPNotImplemented, PreconditionFailed

STREAM = {"x-queue-type": b"stream"}


class ParsingTests(SynchronousTestCase):
    def test_intervals(self) -> None:
        self.assertEqual(parse_interval("7D"), 7 * 86_400_000)
        self.assertEqual(parse_interval("1h"), 3_600_000)
        self.assertEqual(parse_interval("30s"), 30_000)
        self.assertEqual(parse_interval("2M"), 60 * 86_400_000)
        self.assertEqual(parse_interval("1Y"), 365 * 86_400_000)
        for bad in ("", "7", "D", "7d", "1.5h", "-1h", "1h "):
            self.assertIsNone(parse_interval(bad), bad)

    def test_offsets(self) -> None:
        now = 1_000_000
        self.assertEqual(parse_offset(None, now), ("next", 0))
        for word in ("first", "last", "next"):
            self.assertEqual(parse_offset(word.encode(), now), (word, 0))
        self.assertEqual(parse_offset(0, now), ("offset", 0))
        self.assertEqual(parse_offset(2**40, now), ("offset", 2**40))
        self.assertEqual(parse_offset(b"10s", now), ("timestamp", now - 10_000))
        moment = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
        self.assertEqual(parse_offset(moment, now), ("timestamp", int(moment.timestamp()) * 1000))

    def test_bad_offsets_are_406(self) -> None:
        for bad in (-1, True, 1.5, b"bogus", b"", {"a": 1}):
            error = self.assertRaises(PreconditionFailed, parse_offset, bad, 0)
            self.assertIn("invalid x-stream-offset", str(error))
            self.assertIn("'first', 'last', 'next'", str(error))


class StreamCase(SynchronousTestCase):
    """A broker with a memory store (or *store*) on a Clock, and helpers."""

    store: Optional[MemoryStore] = None

    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(1_700_000_000)
        if self.store is None:
            self.store = MemoryStore()
        self.broker = Broker(persistence=Persistence(self.store), clock=self.clock)
        self.vhost = self.broker.vhosts["/"]
        self.client = Client("c")

    def declare(self, **arguments: Any) -> StreamQueue:
        queue = self.vhost.declare_queue("s", self.client, durable=True, arguments={**STREAM, **arguments})
        assert isinstance(queue, StreamQueue)
        return queue

    def publish(self, *bodies: bytes, session: Optional[Session] = None) -> None:
        publisher = session or self.session()[0]
        for body in bodies:
            publisher.publish("", message(body, publisher=publisher.client), False, False)

    def session(self, prefetch: int = 100) -> tuple[Session, MessageSink]:
        sink = MessageSink()
        session = Session(self.vhost, self.client, sink)
        if prefetch:
            session.qos(0, prefetch, False)
        return session, sink

    def consume(self, offset: Any = None, prefetch: int = 100, name: str = "s") -> tuple[Session, MessageSink]:
        session, sink = self.session(prefetch)
        arguments = {} if offset is None else {"x-stream-offset": offset}
        session.consume(self.vhost.queues[name], "c", arguments=arguments).start()
        return session, sink


class DeclarationTests(StreamCase):
    def refused(self, **options: Any) -> str:
        arguments = options.pop("arguments", {})
        error = self.assertRaises(
            PreconditionFailed, self.vhost.declare_queue, "s", self.client,
            **{"durable": True, **options, "arguments": {**STREAM, **arguments}},
        )
        return str(error)

    def test_streams_are_durable_not_exclusive_not_auto_delete(self) -> None:
        self.assertIn("invalid property 'non-durable' for queue 's'", self.refused(durable=False))
        self.assertIn("invalid property 'exclusive-owner'", self.refused(exclusive=True))
        self.assertIn("invalid property 'auto-delete'", self.refused(auto_delete=True))
        self.assertNotIn("s", self.vhost.queues)
        self.assertEqual(self.client.exclusive_queues, {})

    def test_arguments_of_other_queue_types_are_refused(self) -> None:
        for argument in ("x-max-length", "x-message-ttl", "x-max-priority", "x-overflow"):
            text = self.refused(arguments={argument: 1})
            self.assertIn(f"invalid arg {argument!r} for queue 's' in vhost '/' of queue type rabbit_stream_queue", text)

    def test_bad_retention_values(self) -> None:
        self.assertIn("invalid arg 'x-max-age'", self.refused(arguments={"x-max-age": b"7X"}))
        self.assertIn("such as '7D'", self.refused(arguments={"x-max-age": 7}))
        self.assertIn("'x-max-length-bytes'", self.refused(arguments={"x-max-length-bytes": -1}))
        self.assertIn(
            "'x-stream-max-segment-size-bytes'", self.refused(arguments={"x-stream-max-segment-size-bytes": 0})
        )

    def test_unknown_queue_type(self) -> None:
        error = self.assertRaises(
            PreconditionFailed, self.vhost.declare_queue, "q", self.client, durable=True,
            arguments={"x-queue-type": b"mirrored"},
        )
        self.assertIn("mirrored", str(error))

    def test_redeclaring_needs_the_same_type_and_retention(self) -> None:
        stream = self.declare(**{"x-max-age": b"1h"})
        self.assertIs(self.declare(**{"x-max-age": b"1h"}), stream)
        error = self.assertRaises(
            PreconditionFailed, self.vhost.declare_queue, "s", self.client, durable=True
        )
        self.assertIn("inequivalent arg 'x-queue-type'", str(error))
        error = self.assertRaises(PreconditionFailed, self.declare, **{"x-max-age": b"2h"})
        self.assertIn("inequivalent arg 'x-max-age'", str(error))
        self.vhost.declare_queue("c", self.client, durable=True)
        self.assertIsNotNone(
            self.vhost.declare_queue("c", self.client, durable=True, arguments={"x-queue-type": b"classic"})
        )

    def test_the_definition_is_stored_but_no_message_goes_to_the_message_store(self) -> None:
        self.declare()
        session = self.session()[0]
        session.publish("", message(b"persistent", mode=2), False, False)
        assert self.store is not None
        self.assertIn(("/", "s"), self.store.queues)
        self.assertEqual(self.store.messages[("/", "s")], {})
        self.assertEqual(
            [chunk.message(index)[2] for chunk in self.store.logs[("/", "s")] for index in range(chunk.count)],
            [b"persistent"],
        )


class MemoryBudgetTests(StreamCase):
    """The log keeps its own copy: published messages do not stay counted."""

    def test_a_stream_does_not_hold_messages_against_the_budget(self) -> None:
        assert self.store is not None
        self.broker = Broker(persistence=Persistence(self.store, memory_budget=0), clock=self.clock)
        self.vhost = self.broker.vhosts["/"]
        persistence = self.broker.persistence
        assert persistence is not None
        self.declare()
        self.vhost.declare_queue("classic", self.client, durable=True)
        self.vhost.bind_queue("s", "amq.fanout", "", {}, self.client)
        self.vhost.bind_queue("classic", "amq.fanout", "", {}, self.client)
        session = self.session()[0]
        session.publish("", message(b"transient"), False, False)
        session.publish("", message(b"persistent", mode=2), False, False)
        self.assertEqual((persistence.resident_bytes, persistence.paged_bytes), (0, 0))
        fanned = message(b"both", mode=2)
        session.publish("amq.fanout", fanned, False, False)
        assert fanned.tracking is not None
        self.assertEqual(fanned.tracking.holders, 1, "the classic queue still holds it")
        self.assertEqual(self.consume(b"first")[1].bodies(), [b"transient", b"persistent", b"both"])


class ReadingTests(StreamCase):
    def setUp(self) -> None:
        super().setUp()
        self.stream = self.declare()
        for n in range(5):
            self.publish(b"m%d" % n)
            self.clock.advance(10)

    def test_every_message_is_kept_and_read_from_first_with_its_offset(self) -> None:
        _, sink = self.consume(b"first")
        self.assertEqual(sink.bodies(), [b"m0", b"m1", b"m2", b"m3", b"m4"])
        self.assertEqual(sink.offsets(), [0, 1, 2, 3, 4])
        _, again = self.consume(b"first")
        self.assertEqual(again.offsets(), [0, 1, 2, 3, 4])

    def test_starts(self) -> None:
        cases: list[tuple[Any, list[int]]] = [
            (b"last", [4]),
            (b"next", []),
            (None, []),
            (2, [2, 3, 4]),
            (0, [0, 1, 2, 3, 4]),
            (5, []),
            (99, []),
            (b"25s", [3, 4]),
            (datetime.fromtimestamp(self.clock.seconds() - 30, timezone.utc), [2, 3, 4]),
            (datetime.fromtimestamp(self.clock.seconds() + 30, timezone.utc), []),
        ]
        for offset, expected in cases:
            _, sink = self.consume(offset)
            self.assertEqual(sink.offsets(), expected, offset)

    def test_a_consumer_past_the_end_starts_at_next(self) -> None:
        _, sink = self.consume(99)
        self.publish(b"m5")
        self.assertEqual(sink.offsets(), [5])

    def test_tailing_consumers_receive_appended_messages(self) -> None:
        _, first = self.consume(b"next")
        _, second = self.consume(b"last")
        self.publish(b"m5", b"m6")
        self.assertEqual(first.offsets(), [5, 6])
        self.assertEqual(second.offsets(), [4, 5, 6])
        self.assertEqual(self.stream.message_count, 7)

    def test_acks_give_credit_back_and_remove_nothing(self) -> None:
        session, sink = self.consume(b"first", prefetch=2)
        self.assertEqual(sink.offsets(), [0, 1])
        session.ack(sink.tags()[0])
        self.assertEqual(sink.offsets(), [0, 1, 2])
        session.ack(sink.tags()[-1], multiple=True)
        self.assertEqual(sink.offsets(), [0, 1, 2, 3, 4])
        self.assertEqual(self.stream.message_count, 5)
        self.assertEqual(self.consume(b"first")[1].offsets(), [0, 1, 2, 3, 4])

    def test_a_window_shared_by_two_streams_is_refilled(self) -> None:
        other = self.vhost.declare_queue("t", self.client, durable=True, arguments=STREAM)
        other.publish(message(b"t0"))
        session, sink = self.session(prefetch=0)
        session.qos(0, 2, True)
        session.consume(self.stream, "a", arguments={"x-stream-offset": b"last"}).start()
        session.consume(other, "b", arguments={"x-stream-offset": b"first"}).start()
        other.publish(message(b"t1"))
        self.assertEqual(sink.bodies(), [b"m4", b"t0"], "the window holds two")
        session.ack(sink.tags()[0])
        self.assertEqual(sink.bodies(), [b"m4", b"t0", b"t1"], "room made by a's ack goes to b")

    def test_flow_pauses_and_resumes_a_stream_consumer(self) -> None:
        session, sink = self.consume(b"next", prefetch=10)
        session.flow(False)
        self.publish(b"m5")
        self.assertEqual(sink.offsets(), [])
        session.flow(True)
        self.assertEqual(sink.offsets(), [5])

    def test_a_full_transport_does_not_hold_back_what_acks_make_room_for(self) -> None:
        session, sink = self.consume(b"first", prefetch=2)
        self.client.set_writable(False)
        session.ack(sink.tags()[0])
        self.assertEqual(sink.offsets(), [0, 1, 2], "the room an ack made is used at once")
        session.ack(sink.tags()[-1], multiple=True)
        self.assertEqual(sink.offsets(), [0, 1, 2, 3, 4])
        self.assertEqual(len(session.unacked), 2, "the prefetch count still bounds what is unsettled")

    def test_flow_holds_a_stream_consumer_whose_transport_is_full(self) -> None:
        session, sink = self.consume(b"first", prefetch=2)
        self.client.set_writable(False)
        session.flow(False)
        session.ack(sink.tags()[0])
        self.assertEqual(sink.offsets(), [0, 1])
        session.flow(True)
        self.client.set_writable(True)
        self.assertEqual(sink.offsets(), [0, 1, 2])

    def test_a_closed_channel_forgets_its_deliveries(self) -> None:
        session, sink = self.consume(b"first", prefetch=2)
        session.close()
        self.assertEqual(self.stream.consumers, type(self.stream.consumers)())
        self.assertEqual(self.consume(b"first")[1].offsets(), [0, 1, 2, 3, 4])


class RefusalTests(StreamCase):
    def setUp(self) -> None:
        super().setUp()
        self.stream = self.declare()
        self.publish(b"m0", b"m1")

    def test_consumers_need_a_prefetch_count(self) -> None:
        session, _ = self.session(prefetch=0)
        error = self.assertRaises(PreconditionFailed, session.consume, self.stream, "c")
        self.assertIn("consumer prefetch count is not set", str(error))

    def test_no_ack_consumers_are_not_implemented(self) -> None:
        session, _ = self.session()
        error = self.assertRaises(AMQPNotImplemented, session.consume, self.stream, "c", no_ack=True)
        self.assertIn("automatic acknowledgement", str(error))

    def test_get_and_purge_are_not_implemented(self) -> None:
        session, _ = self.session()
        self.assertIn("basic.get", str(self.assertRaises(AMQPNotImplemented, session.get, self.stream, False)))
        error = self.assertRaises(AMQPNotImplemented, self.vhost.purge_queue, "s", self.client)
        self.assertIn("queue.purge", str(error))

    def test_reject_and_nack_are_not_implemented(self) -> None:
        session, sink = self.consume(b"first")
        for settle in (
            lambda: session.reject(sink.tags()[0], True),
            lambda: session.reject(sink.tags()[0], False),
            lambda: session.nack(sink.tags()[1], True, False),
        ):
            error = self.assertRaises(AMQPNotImplemented, settle)
            self.assertIn("basic.nack and basic.reject", str(error))
        self.assertEqual(len(session.unacked), 2)

    def test_deleting_the_stream_deletes_its_log_and_cancels_consumers(self) -> None:
        _, sink = self.consume(b"first")
        self.assertEqual(self.vhost.delete_queue_named("s", self.client), 0)
        self.assertEqual(sink.cancels, ["c"])
        assert self.store is not None
        self.assertNotIn(("/", "s"), self.store.logs)
        self.assertEqual(self.declare().message_count, 0)


class CommitTests(StreamCase):
    """With a store, consumers see a message once it is on disk."""

    def setUp(self) -> None:
        self.store = self.lagging = LaggingStore()
        super().setUp()
        self.stream = self.declare()

    def test_messages_are_readable_once_durable(self) -> None:
        _, sink = self.consume(b"first")
        self.publish(b"m0", b"m1")
        self.assertEqual((sink.offsets(), self.stream.message_count), ([], 0))
        self.lagging.flush()
        self.assertEqual((sink.offsets(), self.stream.message_count), ([0, 1], 2))

    def test_last_and_timestamps_see_only_committed_messages(self) -> None:
        self.publish(b"m0")
        self.lagging.flush()
        self.publish(b"m1")
        _, last = self.consume(b"last")
        self.assertEqual(last.offsets(), [0])
        self.lagging.flush()
        self.assertEqual(last.offsets(), [0, 1])

    def test_publisher_confirms_wait_for_the_append(self) -> None:
        session, _ = self.session()
        self.publish(b"m0", session=session)
        self.assertEqual(self.client.log_sequence, self.lagging.last_sequence)


class RetentionTests(StreamCase):
    def test_by_bytes_whole_segments_oldest_first(self) -> None:
        stream = self.declare(**{"x-max-length-bytes": 250, "x-stream-max-segment-size-bytes": 100})
        _, reader = self.consume(b"first", prefetch=1)
        for n in range(10):
            self.publish(b"%02d" % n * 25)
        assert self.store is not None
        kept = [offset for chunk in self.store.logs[("/", "s")] for offset in range(chunk.first, chunk.end)]
        self.assertEqual((stream.first_offset, kept[0], kept[-1]), (kept[0], kept[0], 9))
        self.assertLessEqual(stream.log_bytes, 250 + 100)
        self.assertEqual(kept[0] % 2, 0, "segments of two 50-byte messages go whole")
        self.assertEqual(self.consume(b"first")[1].offsets(), kept)
        self.assertEqual(reader.offsets(), [0])
        reader_session = stream.consumers[0].session
        reader_session.ack(reader.tags()[0])
        self.assertEqual(reader.offsets(), [0, kept[0]])

    def test_by_age(self) -> None:
        stream = self.declare(**{"x-max-age": b"30s", "x-stream-max-segment-size-bytes": 10})
        for n in range(5):
            self.publish(b"0123456789")
            self.clock.advance(10)
        self.publish(b"new")
        self.assertEqual(stream.first_offset, 2)
        self.assertEqual(self.consume(b"first")[1].offsets(), [2, 3, 4, 5])

    def test_the_segment_being_written_is_kept(self) -> None:
        stream = self.declare(**{"x-max-age": b"1s"})
        self.publish(b"a")
        self.clock.advance(60)
        self.publish(b"b")
        self.assertEqual((stream.first_offset, stream.message_count), (0, 2))

    def test_without_a_store_the_log_is_in_memory(self) -> None:
        self.broker = Broker(clock=self.clock)
        self.vhost = self.broker.vhosts["/"]
        stream = self.declare(**{"x-max-length-bytes": 20, "x-stream-max-segment-size-bytes": 10})
        for n in range(6):
            self.publish(b"%010d" % n)
        self.assertEqual(self.consume(b"first")[1].offsets(), [4, 5])
        self.assertEqual(stream.message_count, 6)


class ChunkTests(StreamCase):
    """The log in chunks: a chunk closes when the store takes it, when it is
    full and at a segment's end; offsets run on across chunks."""

    def setUp(self) -> None:
        self.store = self.lagging = LaggingStore()
        super().setUp()
        # Records of 10-byte bodies take more than 33 bytes: three fill a chunk.
        self.patch(stream_module, "CHUNK_BYTES", 100)

    def chunks(self) -> list[tuple[int, int, int]]:
        """(first offset, end, segment) of each chunk the store holds."""
        return [(chunk.first, chunk.end, chunk.segment) for chunk in self.lagging.logs[("/", "s")]]

    def test_a_chunk_takes_messages_until_the_store_takes_it_or_it_is_full(self) -> None:
        self.declare()
        self.publish(*[b"%010d" % n for n in range(6)])
        self.lagging.flush()
        self.publish(b"%010d" % 6)
        self.assertEqual(self.chunks(), [(0, 3, 0), (3, 6, 0), (6, 7, 0)])
        self.lagging.flush()
        _, sink = self.consume(b"first")
        self.assertEqual(sink.offsets(), list(range(7)))
        self.assertEqual(sink.bodies(), [b"%010d" % n for n in range(7)])

    def test_a_consumer_attaches_at_an_offset_inside_a_chunk(self) -> None:
        self.patch(stream_module, "CACHE_BYTES", 20)
        self.declare()
        self.publish(*[b"%010d" % n for n in range(20)])
        self.lagging.flush()
        for start in (0, 5, 6, 13, 19):
            _, sink = self.consume(start)
            self.assertEqual(sink.offsets(), list(range(start, 20)), start)
            self.assertEqual(sink.bodies(), [b"%010d" % n for n in range(start, 20)], start)
        self.assertIn(5, self.lagging.reads, "offset 5 was read from the store, inside a chunk")

    def test_chunks_end_with_their_segment_and_retention_removes_whole_chunks(self) -> None:
        stream = self.declare(**{"x-stream-max-segment-size-bytes": 30, "x-max-length-bytes": 60})
        for n in range(12):
            self.publish(b"%010d" % n)
            if n % 2:
                self.lagging.flush()
        segments = {segment for _, _, segment in self.chunks()}
        self.assertEqual(segments, {first for first, _, _ in self.chunks() if first % 3 == 0})
        for first, end, segment in self.chunks():
            self.assertEqual(segment, first - first % 3, "a chunk never spans two segments")
        self.assertEqual(self.chunks()[0][0], stream.first_offset, "the log starts at a chunk")
        self.assertEqual(self.consume(b"first")[1].offsets(), list(range(stream.first_offset, 12)))

    def test_timestamps_inside_chunks(self) -> None:
        self.declare()
        for n in range(8):
            self.publish(b"%010d" % n)
            self.clock.advance(1)
        self.lagging.flush()
        moment = datetime.fromtimestamp(self.clock.seconds() - 5, timezone.utc)
        self.assertEqual(self.consume(moment)[1].offsets(), [3, 4, 5, 6, 7])


class CacheBudgetTests(StreamCase):
    """The chunks a stream holds for its readers count in the memory budget."""

    def budget(self, memory_budget: int) -> Persistence:
        assert self.store is not None
        self.broker = Broker(persistence=Persistence(self.store, memory_budget=memory_budget), clock=self.clock)
        self.vhost = self.broker.vhosts["/"]
        persistence = self.broker.persistence
        assert persistence is not None
        return persistence

    def test_cached_bodies_are_counted_and_given_back_when_the_stream_goes(self) -> None:
        persistence = self.budget(10_000)
        self.patch(stream_module, "CHUNK_BYTES", 100)
        self.declare()
        self.publish(*[b"%010d" % n for n in range(20)])
        self.assertEqual(persistence.stream_bytes, 200)
        self.assertFalse(persistence.over_budget)
        self.vhost.delete_queue(self.vhost.queues["s"])
        self.assertEqual(persistence.stream_bytes, 0)

    def test_above_the_budget_a_stream_keeps_only_its_newest_chunk(self) -> None:
        persistence = self.budget(150)
        self.patch(stream_module, "CHUNK_BYTES", 100)
        stream = self.declare()
        held = []
        for n in range(40):
            self.publish(b"%010d" % n)
            held.append(persistence.stream_bytes)
            self.assertLessEqual(held[-1], 150, n)
        self.assertIn(10, held[16:], "once over the budget, only the chunk being filled stayed")
        self.assertEqual(stream.message_count, 40)
        self.assertEqual(self.consume(b"first")[1].offsets(), list(range(40)), "the rest is read from the store")


class PagingTests(StreamCase):
    """Readers behind the memory cache read chunks from the store."""

    def setUp(self) -> None:
        self.store = self.lagging = LaggingStore()
        super().setUp()
        self.stream = self.declare()
        self.patch(stream_module, "CACHE_BYTES", 100)
        self.patch(stream_module, "CHUNK_BYTES", 100)
        for n in range(30):
            self.publish(b"%010d" % n)
        self.lagging.flush()

    def test_a_reader_from_first_pages_through_the_store(self) -> None:
        session, sink = self.consume(b"first", prefetch=3)
        while len(sink.deliveries) < 30:
            before = len(sink.deliveries)
            session.ack(sink.tags()[-1], multiple=True)
            self.assertGreater(len(sink.deliveries), before)
        self.assertEqual(sink.offsets(), list(range(30)))
        self.assertEqual(sink.bodies(), [b"%010d" % n for n in range(30)])
        self.assertTrue(self.lagging.reads)
        self.assertLessEqual(max(self.lagging.reads), 30 - 100 // 10)

    def test_timestamps_are_found_in_the_store(self) -> None:
        self.clock.advance(5)
        self.publish(b"later")
        self.lagging.flush()
        moment = datetime.fromtimestamp(self.clock.seconds(), timezone.utc)
        self.assertEqual(self.consume(moment)[1].offsets(), [30])
        self.assertEqual(self.consume(b"1h")[1].offsets()[:3], [0, 1, 2])


class RestoreTests(StreamCase):
    def test_offsets_continue_after_a_restart(self) -> None:
        stream = self.declare(**{"x-stream-max-segment-size-bytes": 4})
        self.publish(b"m0", b"m1", b"m2")
        assert self.store is not None
        restarted = Broker(persistence=Persistence(self.store), clock=self.clock)
        restarted.restore(self.store.open())
        self.broker, self.vhost = restarted, restarted.vhosts["/"]
        again = self.vhost.queues["s"]
        assert isinstance(again, StreamQueue)
        self.assertEqual((again.first_offset, again.message_count), (0, 3))
        self.publish(b"m3")
        _, sink = self.consume(b"first")
        self.assertEqual(sink.offsets(), [0, 1, 2, 3])
        self.assertEqual(sink.bodies(), [b"m0", b"m1", b"m2", b"m3"])
        self.assertEqual(headers_of(sink.deliveries[0][2]), {"x-stream-offset": 0})
        self.assertIsNot(again, stream)
