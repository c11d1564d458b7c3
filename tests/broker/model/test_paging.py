"""Persistent message bodies above the memory budget live on disk only."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from tests.broker.model.support import message_for_store as message
from tests.broker.support import session
from txamqp09.broker.flow import ready_bytes
from txamqp09.broker.model import Broker, Client, Persistence, VirtualHost
from txamqp09.broker.model.message import PAGED_OUT, RESIDENT, UNTRACKED
from txamqp09.broker.model.queue import PAGE_IN_BATCH
from txamqp09.broker.model.ready import ReadyMessages
from txamqp09.store.memory import MemoryStore

#: Bytes of each test message's body.
SIZE = 100


def body(n: int) -> bytes:
    return b"%0100d" % n


class PagingTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.store = MemoryStore()
        self.persistence = Persistence(self.store, memory_budget=10 * SIZE)
        self.broker = Broker(persistence=self.persistence)
        self.vhost: VirtualHost = self.broker.vhosts["/"]
        self.client = Client("c")
        self.vhost.declare_queue("q", self.client, durable=True)
        self.publisher, _ = session(self.vhost, self.client)

    def publish(self, numbers: range, routing_key: str = "q", mode: int = 2) -> None:
        for n in numbers:
            self.publisher.publish("", message(body(n), routing_key, mode=mode), False, False)

    def bodies_in_memory(self, queue: str = "q") -> list[bool]:
        return [m.body is not None for _, m, *_ in self.vhost.queues[queue].messages]

    def test_messages_above_the_budget_are_paged_out_and_read_back_in_order(self) -> None:
        self.publish(range(1000))
        self.assertEqual(self.bodies_in_memory(), [True] * 10 + [False] * 990)
        self.assertEqual((self.persistence.resident_bytes, self.persistence.paged_bytes), (10 * SIZE, 990 * SIZE))
        self.assertEqual(self.vhost.queues["q"].ready_bytes, 1000 * SIZE)
        self.assertEqual(ready_bytes(self.broker), 10 * SIZE)
        consumer, sink = session(self.vhost, Client("consumer"))
        consumer.qos(0, 20, False)
        consumer.consume(self.vhost.queues["q"], "c").start()
        self.assertEqual(sink.bodies(), [body(n) for n in range(20)])
        self.assertEqual(self.bodies_in_memory()[: PAGE_IN_BATCH - 10], [True] * (PAGE_IN_BATCH - 10))
        self.assertFalse(self.bodies_in_memory()[PAGE_IN_BATCH])
        while consumer.unacked:
            consumer.ack(0, multiple=True)
        self.assertEqual(sink.bodies(), [body(n) for n in range(1000)])
        self.assertEqual((self.persistence.resident_bytes, self.persistence.paged_bytes), (0, 0))

    def test_get_reads_a_paged_head_back(self) -> None:
        self.publish(range(20))
        queue = self.vhost.queues["q"]
        entries = list(queue.messages)
        queue.messages = ReadyMessages(entries[10:] + entries[:10])  # the paged-out messages first
        consumer, _ = session(self.vhost, self.client)
        got = consumer.get(queue, no_ack=True)
        assert got is not None
        self.assertEqual(got[2].body, body(10))
        self.assertEqual(self.bodies_in_memory(), [True] * 19)

    def consume_all(self, queue: str) -> list[bytes]:
        """Every body a consumer of *queue* receives, acknowledging as it goes."""
        consumer, sink = session(self.vhost, Client(f"consumer of {queue}"))
        consumer.qos(0, 20, False)
        consumer.consume(self.vhost.queues[queue], "c").start()
        while consumer.unacked:
            consumer.ack(0, multiple=True)
        return sink.bodies()

    def test_transient_messages_within_the_budget_are_not_tracked(self) -> None:
        self.publish(range(5), mode=1)
        self.persistence.sample(ready_bytes(self.broker))
        self.publish(range(5, 10), mode=1)
        self.assertEqual({m.paging for _, m, *_ in self.vhost.queues["q"].messages}, {UNTRACKED})
        self.assertEqual((self.persistence.resident_bytes, self.store.spilled), (0, {}))

    def test_transient_messages_above_the_budget_are_spilled_and_read_back(self) -> None:
        self.vhost.declare_queue("memory", self.client)
        self.publish(range(20), "memory", mode=1)
        self.persistence.sample(ready_bytes(self.broker))
        self.publish(range(20, 30), "memory", mode=1)
        self.assertEqual(self.bodies_in_memory("memory"), [True] * 20 + [False] * 10)
        self.assertEqual(sorted(self.store.spilled.values()), [body(n) for n in range(20, 30)])
        self.assertEqual(ready_bytes(self.broker), 20 * SIZE)
        self.assertEqual(self.consume_all("memory"), [body(n) for n in range(30)])
        self.assertEqual((self.persistence.resident_bytes, self.persistence.paged_bytes), (0, 0))
        self.assertEqual(self.store.spilled, {})

    def test_messages_on_several_durable_queues_are_paged_out_once(self) -> None:
        self.vhost.declare_queue("also", self.client, durable=True)
        self.vhost.bind_queue("q", "amq.fanout", "", {}, self.client)
        self.vhost.bind_queue("also", "amq.fanout", "", {}, self.client)
        for n in range(20):
            self.publisher.publish("amq.fanout", message(body(n), "", "amq.fanout"), False, False)
        self.assertEqual(self.bodies_in_memory("q"), [True] * 10 + [False] * 10)
        self.assertEqual(self.bodies_in_memory("also"), [True] * 10 + [False] * 10)
        self.assertEqual((self.persistence.resident_bytes, self.persistence.paged_bytes), (10 * SIZE, 10 * SIZE))
        self.assertEqual(self.consume_all("q"), [body(n) for n in range(20)])
        self.assertEqual(self.bodies_in_memory("also"), [True] * 20)
        self.assertEqual(self.consume_all("also"), [body(n) for n in range(20)])
        self.assertEqual((self.persistence.resident_bytes, self.persistence.paged_bytes), (0, 0))
        self.assertEqual(self.store.messages[("/", "q")], {})

    def test_a_message_also_on_a_transient_queue_is_spilled(self) -> None:
        self.vhost.declare_queue("memory", self.client)
        self.vhost.bind_queue("q", "amq.fanout", "", {}, self.client)
        self.vhost.bind_queue("memory", "amq.fanout", "", {}, self.client)
        for n in range(15):
            self.publisher.publish("amq.fanout", message(body(n), "", "amq.fanout"), False, False)
        self.assertEqual(self.bodies_in_memory("memory"), [True] * 10 + [False] * 5)
        self.assertEqual(len(self.store.spilled), 5)
        self.vhost.purge_queue("q", self.client)
        self.assertEqual(self.store.messages[("/", "q")], {})
        self.assertEqual(self.consume_all("memory"), [body(n) for n in range(15)])
        self.assertEqual((self.persistence.resident_bytes, self.persistence.paged_bytes, self.store.spilled), (0, 0, {}))

    def test_redelivery_to_the_same_consumer_reads_a_paged_body_back(self) -> None:
        consumer, sink = session(self.vhost, Client("consumer"))
        consumer.consume(self.vhost.queues["q"], "c").start()
        self.publish(range(20))
        delivered = [consumer.unacked[tag].message for tag in sorted(consumer.unacked)]
        self.assertEqual([m.paging for m in delivered], [RESIDENT] * 10 + [PAGED_OUT] * 10)
        consumer.recover(requeue=False)
        self.assertEqual(sink.bodies()[20:], [body(n) for n in range(20)])

    def test_purge_and_delete_settle_the_accounts(self) -> None:
        self.publish(range(30))
        consumer, _ = session(self.vhost, Client("consumer"))
        consumer.get(self.vhost.queues["q"], no_ack=False)
        self.vhost.purge_queue("q", self.client)
        self.assertEqual((self.persistence.resident_bytes, self.persistence.paged_bytes), (SIZE, 0))
        self.publish(range(30))
        self.vhost.delete_queue_named("q", self.client)
        consumer.close()
        self.assertEqual((self.persistence.resident_bytes, self.persistence.paged_bytes), (0, 0))

    def test_recovery_leaves_bodies_beyond_the_budget_on_disk(self) -> None:
        self.publish(range(30))
        broker = Broker(persistence=Persistence(self.store, memory_budget=5 * SIZE))
        broker.restore(self.store.open(body_budget=5 * SIZE))
        queue = broker.vhosts["/"].queues["q"]
        self.assertEqual([m.body is not None for _, m, *_ in queue.messages], [True] * 5 + [False] * 25)
        assert broker.persistence is not None
        self.assertEqual(broker.persistence.paged_bytes, 25 * SIZE)
        consumer, sink = session(broker.vhosts["/"], Client("consumer"))
        consumer.consume(queue, "c", no_ack=True).start()
        self.assertEqual(sink.bodies(), [body(n) for n in range(30)])
        self.assertEqual((broker.persistence.resident_bytes, broker.persistence.paged_bytes), (0, 0))
