"""A stream's log across restarts and kill -9 of a broker in a child process."""

from __future__ import annotations

import os
import random
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

from twisted.internet import reactor
from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.internet.interfaces import IReactorFromThreads
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial.unittest import TestCase

from tests.broker.model.support import MessageSink
from tests.broker.model.support import stream_message as model_message
from tests.broker.test_restart import BrokerProcessTestCase
from txamqp09.broker.model import Broker, Client, Persistence, Session
from txamqp09.broker.model import stream as stream_module
from txamqp09.client import Channel, ChannelClosed, ConnectionClosed, Message
from txamqp09.store.sqlite import SQLiteStore

STREAM = {"x-queue-type": "stream"}
#: Publishes in flight at any time in the kill -9 test.
WINDOW = 50
ROUNDS = 3


class StreamRestartTests(BrokerProcessTestCase):
    timeout = 60

    @inlineCallbacks
    def read_all(self, channel: Channel, name: str, count: int, start: Any = "first") -> Any:
        """*count* messages of stream *name* from offset *start* (the first), acked."""
        yield channel.basic_qos(100)
        received: list[Message] = []
        done: Deferred[None] = Deferred()

        def take(message: Message) -> None:
            received.append(message)
            message.ack()
            if len(received) == count:
                done.callback(None)

        if count:
            yield channel.basic_consume(name, take, arguments={"x-stream-offset": start})
            yield done
        return received

    @inlineCallbacks
    def test_the_log_survives_a_restart_and_its_deletion_too(self) -> Any:
        data_dir = self.mktemp()
        broker = yield self.started(data_dir)
        channel = yield self.channel(broker)
        yield channel.queue_declare("s", durable=True, arguments={**STREAM, "x-max-age": "7D"})
        yield channel.request("queue.bind", queue="s", exchange="amq.fanout", routing_key="")
        yield channel.confirm_select()
        for n in range(20):
            channel.basic_publish(b"m%d" % n, exchange="amq.fanout")
        confirmed = channel.basic_publish(b"m20", routing_key="s")
        yield confirmed
        yield broker.stop()

        broker = yield self.started(data_dir)
        channel = yield self.channel(broker)
        declared = yield channel.queue_declare("s", passive=True)
        self.assertEqual(declared.message_count, 21)
        messages = yield self.read_all(channel, "s", 21)
        self.assertEqual([m.body for m in messages], [b"m%d" % n for n in range(21)])
        self.assertEqual([m.headers["x-stream-offset"] for m in messages], list(range(21)))
        publisher = yield self.channel(broker)
        yield publisher.confirm_select()
        yield publisher.basic_publish(b"after", exchange="amq.fanout")
        declared = yield publisher.queue_declare("s", passive=True)
        self.assertEqual(declared.message_count, 22, "the binding and the offsets survived")
        yield publisher.queue_delete(queue="s")
        yield broker.stop()

        broker = yield self.started(data_dir)
        channel = yield self.channel(broker)
        declared = yield channel.queue_declare("s", durable=True, arguments=STREAM)
        self.assertEqual(declared.message_count, 0, "a deleted stream's log is gone")

    @inlineCallbacks
    def test_a_restarted_log_is_read_from_an_offset_inside_a_chunk(self) -> Any:
        data_dir = self.mktemp()
        broker = yield self.started(data_dir)
        channel = yield self.channel(broker)
        yield channel.queue_declare("s", durable=True, arguments=STREAM)
        yield channel.confirm_select()
        for round_ in range(6):
            sent = [channel.basic_publish(b"m%d" % (round_ * 500 + n), routing_key="s") for n in range(500)]
            yield sent[-1]
        yield broker.stop()
        with sqlite3.connect(Path(data_dir) / "store.db") as db:
            chunks = db.execute("SELECT first, count FROM stream_chunks ORDER BY first").fetchall()
        self.assertEqual(sum(count for _, count in chunks), 3000)
        self.assertGreater(len(chunks), 1)
        self.assertLess(len(chunks), 3000 // 10, "chunks of many messages")
        first, count = max(chunks, key=lambda chunk: chunk[1])
        inside = first + count // 2

        broker = yield self.started(data_dir)
        channel = yield self.channel(broker)
        received = yield self.read_all(channel, "s", 3000 - inside, inside)
        self.assertEqual([m.headers["x-stream-offset"] for m in received], list(range(inside, 3000)))
        self.assertEqual([m.body for m in received], [b"m%d" % n for n in range(inside, 3000)])
        declared = yield channel.queue_declare("s", passive=True)
        self.assertEqual(declared.message_count, 3000)

    @inlineCallbacks
    def test_kill_9_keeps_every_confirmed_message_and_every_offset_read(self) -> Any:
        seed = int.from_bytes(os.urandom(4), "big")
        generator = random.Random(seed)
        data_dir = self.mktemp()
        published = 0
        confirmed: set[int] = set()
        #: offset -> body, as tailing consumers saw them before each kill.
        seen: dict[int, bytes] = {}
        for _ in range(ROUNDS):
            broker = yield self.started(data_dir)
            publisher = yield self.channel(broker)
            yield publisher.queue_declare("s", durable=True, arguments=STREAM)
            yield publisher.confirm_select()
            reader = yield self.channel(broker)
            yield reader.basic_qos(generator.randint(1, 200))

            def take(message: Message) -> None:
                offset = message.headers["x-stream-offset"]
                self.assertEqual(seen.setdefault(offset, message.body), message.body)
                message.ack()

            yield reader.basic_consume("s", take, arguments={"x-stream-offset": "next"})
            kill_after = generator.randint(20, 800)
            state = {"confirms": 0, "killed": False}

            def publish() -> None:
                nonlocal published
                if state["killed"]:
                    return
                number = published
                published += 1
                sent = publisher.basic_publish(b"%d" % number, routing_key="s")
                assert sent is not None
                sent.addCallbacks(acked, _lost, callbackArgs=(number,))

            def acked(_: Any, number: int) -> None:
                confirmed.add(number)
                state["confirms"] += 1
                if state["confirms"] >= kill_after and not state["killed"]:
                    state["killed"] = True
                    broker.kill()
                publish()

            for _ in range(WINDOW):
                publish()
            yield publisher.connection.whenClosed()

        broker = yield self.started(data_dir)
        channel = yield self.channel(broker)
        declared = yield channel.queue_declare("s", passive=True)
        messages = yield self.read_all(channel, "s", declared.message_count)
        context = f"(seed {seed}, {published} published, {len(confirmed)} confirmed)"
        offsets = [m.headers["x-stream-offset"] for m in messages]
        numbers = [int(m.body) for m in messages]
        self.assertEqual(offsets, list(range(len(messages))), context)
        self.assertEqual(numbers, sorted(set(numbers)), f"duplicates or disorder {context}")
        self.assertEqual(confirmed - set(numbers), set(), f"confirmed and lost {context}")
        log = {m.headers["x-stream-offset"]: m.body for m in messages}
        self.assertEqual({o: log.get(o) for o in seen}, seen, f"an offset read changed {context}")
        self.assertGreater(len(confirmed), ROUNDS * 20, context)
        self.assertTrue(seen, f"the tailing consumers received nothing {context}")


def _lost(failure: Failure) -> None:
    """A confirm that never came: the broker died first."""
    failure.trap(ConnectionClosed, ChannelClosed)


class SQLiteReadingTests(TestCase):
    """The stream model on the SQLite store, with a small memory cache, so
    that readers page through the database."""

    @inlineCallbacks
    def test_ranges_beyond_the_cache_are_read_from_the_database(self) -> Any:
        self.patch(stream_module, "CACHE_BYTES", 2000)
        self.patch(stream_module, "CHUNK_BYTES", 1000)
        store = SQLiteStore(Path(self.mktemp()) / "store.db", cast(IReactorFromThreads, reactor))
        store.open()
        self.addCleanup(store.close)
        clock = Clock()
        clock.advance(1_700_000_000)
        broker = Broker(persistence=Persistence(store), clock=clock)
        vhost = broker.vhosts["/"]
        client = Client("c")
        stream = vhost.declare_queue("s", client, durable=True, arguments={"x-queue-type": b"stream"})
        publisher = Session(vhost, client, MessageSink())
        for n in range(2000):
            publisher.publish("", model_message(b"%010d" % n, publisher=client), False, False)
            clock.advance(0.001)
        yield store.when_durable(store.last_sequence)
        self.assertEqual(stream.message_count, 2000)
        read_log = store.read_log
        reads: list[int] = []

        def counted(vhost: str, queue: str, start: int) -> Any:
            reads.append(start)
            return read_log(vhost, queue, start)

        self.patch(store, "read_log", counted)
        sink = MessageSink()
        reader = Session(vhost, client, sink)
        reader.qos(0, 100, False)
        reader.consume(stream, "r", arguments={"x-stream-offset": 500}).start()
        while len(sink.deliveries) < 1500:
            before = len(sink.deliveries)
            reader.ack(sink.tags()[-1], multiple=True)
            self.assertGreater(len(sink.deliveries), before)
        self.assertEqual(sink.offsets(), list(range(500, 2000)))
        self.assertEqual(sink.bodies()[:2], [b"0000000500", b"0000000501"])
        self.assertEqual(reads[0], 500, "the first messages came from the database")
        moment = datetime.fromtimestamp(1_700_000_000.7005, timezone.utc)
        at = MessageSink()
        timed = Session(vhost, client, at)
        timed.qos(0, 1, False)
        timed.consume(stream, "t", arguments={"x-stream-offset": moment}).start()
        self.assertEqual(at.offsets(), [701])
