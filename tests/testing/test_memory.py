"""MemoryBroker: clients of this package and the broker joined in memory."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.client import ChannelClosed, ClientConnection, ConnectionClosed
from txamqp09.testing.memory import MemoryBroker, Stalled


class MemoryBrokerTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.house = MemoryBroker()

    def test_open_runs_the_handshake(self) -> None:
        connection = self.house.open(virtual_host="/")
        self.assertIsInstance(connection, ClientConnection)
        self.assertTrue(connection.whenOpened().called)
        self.assertEqual(len(self.house.factory.connections), 1)

    def test_a_message_goes_through_the_broker(self) -> None:
        connection = self.house.open()

        async def scenario() -> Any:
            channel = await connection.channel()
            await channel.queue_declare("q")
            channel.basic_publish(b"through", routing_key="q")
            return await channel.basic_get("q", no_ack=True)

        self.assertEqual(self.house.run(scenario()).body, b"through")
        self.assertEqual(self.house.broker.vhosts["/"].queues["q"].message_count, 0)

    def test_clients_see_each_other_through_the_broker(self) -> None:
        first, second = self.house.open(), self.house.open()

        async def publish() -> None:
            channel = await first.channel()
            await channel.queue_declare("shared")
            await channel.confirm_select()
            await channel.basic_publish(b"from the first", routing_key="shared")

        async def get() -> Any:
            channel = await second.channel()
            return await channel.basic_get("shared", no_ack=True)

        self.house.run(publish())
        self.assertEqual(self.house.run(get()).body, b"from the first")

    def test_the_broker_s_error_is_raised_by_run(self) -> None:
        connection = self.house.open()

        async def declare_missing() -> Any:
            channel = await connection.channel()
            return await channel.queue_declare("missing", passive=True)

        error = self.assertRaises(ChannelClosed, self.house.run, declare_missing())
        self.assertEqual(error.reply_code, 404)

    def test_waiting_on_nothing_is_stalled_and_can_resume(self) -> None:
        waiting: Deferred[str] = Deferred()
        self.assertRaises(Stalled, self.house.run, waiting)
        waiting.callback("resumed")
        self.assertEqual(self.house.run(waiting), "resumed")

    def test_the_clock_is_shared_with_the_broker(self) -> None:
        connection = self.house.open()

        async def declare() -> Any:
            channel = await connection.channel()
            await channel.queue_declare("ttl", arguments={"x-message-ttl": 500})
            channel.basic_publish(b"brief", routing_key="ttl")
            await channel.queue_declare("ttl", passive=True)
            return channel

        channel = self.house.run(declare())
        queue = self.house.broker.vhosts["/"].queues["ttl"]
        self.assertEqual(queue.message_count, 1)
        self.house.clock.advance(1)
        self.assertIsNone(self.house.run(channel.basic_get("ttl")))

    def test_disconnecting_closes_both_sides(self) -> None:
        connection = self.house.open()
        self.assertIsInstance(self.house.run(connection.disconnect()), ConnectionClosed)
        self.assertTrue(self.house.connections[0].closed)
        self.assertEqual(self.house.factory.connections, set())
