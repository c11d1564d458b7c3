"""The message counters the model keeps (read by the management API), and
settlement outcomes: an acknowledged message is never dead-lettered."""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.broker.model import Broker, Client
from tests.broker.support import message, session


class CounterTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.vhost = Broker(clock=self.clock).vhosts["/"]
        self.client = Client()
        self.vhost.declare_exchange("dlx", "fanout")
        self.dead = self.vhost.declare_queue("dead", self.client)
        self.vhost.bind_queue("dead", "dlx", "", {}, self.client)
        self.queue = self.vhost.declare_queue("q", self.client, arguments={"x-dead-letter-exchange": "dlx"})
        self.session, self.sink = session(self.vhost, self.client)

    def publish(self, count: int, routing_key: str = "q", mandatory: bool = False) -> None:
        for number in range(count):
            self.session.publish("", message(b"m%d" % number, routing_key=routing_key), mandatory, False)

    def test_multiple_ack_does_not_dead_letter(self) -> None:
        self.session.consume(self.queue, "c").start()
        self.publish(3)
        self.session.ack(2, multiple=True)
        self.session.ack(3)
        self.assertEqual(self.dead.message_count, 0)
        self.assertEqual((self.session.stats.ack, self.queue.stats.ack), (3, 3))

    def test_ack_in_a_transaction_does_not_dead_letter(self) -> None:
        self.session.consume(self.queue, "c").start()
        self.publish(2)
        self.session.tx_select()
        self.session.ack(1)
        self.session.reject(2, False)
        self.session.tx_commit()
        self.assertEqual(self.dead.message_count, 1)
        self.assertEqual((self.session.stats.ack, self.session.stats.reject), (1, 1))
        self.assertEqual(self.queue.stats.dead_lettered, 1)

    def test_publish_route_and_deliver(self) -> None:
        self.session.confirm_select()
        self.publish(2)
        self.publish(1, routing_key="nowhere")
        self.publish(1, routing_key="nowhere", mandatory=True)
        stats = self.session.stats
        self.assertEqual(
            (stats.publish, stats.confirm, stats.drop_unroutable, stats.return_unroutable), (4, 4, 1, 1)
        )
        default = self.vhost.exchanges[""].stats.as_dict()
        self.assertEqual((default["publish_in"], default["publish_out"]), (4, 2))
        self.assertEqual(self.queue.stats.as_dict()["publish"], 2)
        self.session.consume(self.queue, "c").start()
        self.session.recover(True)
        self.session.recover(False)
        self.assertEqual((stats.deliver, stats.redeliver), (6, 4))
        self.assertEqual((self.queue.stats.deliver, self.queue.stats.redeliver), (6, 4))

    def test_no_ack_deliveries_and_gets(self) -> None:
        self.publish(3)
        self.assertIsNone(self.session.get(self.dead, no_ack=True))
        self.session.get(self.queue, no_ack=True)
        self.session.get(self.queue, no_ack=False)
        self.session.consume(self.queue, "c", no_ack=True).start()
        stats = self.session.stats
        self.assertEqual(
            (stats.get_empty, stats.get_no_ack, stats.get, stats.deliver_no_ack, stats.deliver), (1, 1, 1, 1, 0)
        )
        self.assertEqual((self.dead.stats.get_empty, self.queue.stats.get, self.queue.stats.deliver_no_ack), (1, 1, 1))

    def test_expired_and_dead_lettered(self) -> None:
        queue = self.vhost.declare_queue(
            "ttl", self.client, arguments={"x-message-ttl": 1000, "x-dead-letter-exchange": "dlx"})
        self.publish(2, routing_key="ttl")
        self.clock.advance(2)
        self.assertEqual((queue.stats.expired, queue.stats.dead_lettered), (2, 2))
        self.assertEqual(self.dead.message_count, 2)

    def test_a_closed_session_leaves_its_counts_to_the_vhost(self) -> None:
        self.publish(5)
        self.session.close()
        self.assertEqual(self.vhost.retired.publish, 5)
