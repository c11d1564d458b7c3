"""ReconnectingClient and its recovering channels against brokers in this process.

Brokers here are :class:`~txamqp09.testing.broker.LoopbackBroker` objects:
"stopping" one drops its connections and closes its port, as a dead broker
would look to the client; starting it again on the same port with the same
model is a restart that kept everything. The same client against broker
processes killed with SIGKILL, and against RabbitMQ, is in
``tests/client/test_failover.py``.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import CancelledError, Deferred, gatherResults
from twisted.internet.protocol import Factory, Protocol
from twisted.trial.unittest import SynchronousTestCase, TestCase

from tests.client.support import declare_orders, fails, inline
from txamqp09.client import (
    AttemptFailed, ChannelClosed, Connected, ConnectionLost, LinkState, Message, QueueRenamed,
    ReconnectingClient, RecoveringChannel, RecoveryEvent, RecoveryFailed, connect,
)
from txamqp09.client.params import parse_url
from txamqp09.client.topology import BindingRecord, ExchangeRecord, QueueRecord, Topology
from txamqp09.testing.broker import LoopbackBroker
from txamqp09.testing.rabbitmq import free_port
from txamqp09.testing.waiting import eventually
from txamqp09.wire.errors import NotFound


def _no_wait(failures: int) -> float:
    """A retry policy for tests: the next round at once."""
    return 0.01


class _HangUp(Protocol):
    """Accepts a TCP connection and closes it at once, as a server that
    refuses to serve AMQP does."""

    def connectionMade(self) -> None:
        assert self.transport is not None
        self.transport.loseConnection()


class RecoveryTestCase(TestCase):
    """Brokers and clients that are stopped at the end of the test."""

    timeout = 30

    def broker(self) -> LoopbackBroker:
        """A started broker, stopped at the end of the test."""
        broker = LoopbackBroker()
        broker.start()
        self.addCleanup(broker.stop)
        return broker

    def client(self, *urls: Any, **options: Any) -> tuple[ReconnectingClient, list[RecoveryEvent]]:
        """A started client of *urls* (retrying at once) and the events it reports."""
        options.setdefault("retry_policy", _no_wait)
        client = ReconnectingClient(reactor, list(urls), **options)
        events: list[RecoveryEvent] = []
        client.addListener(events.append)
        client.startService()
        self.addCleanup(client.stopService)
        return client, events

    def connected_to(self, client: ReconnectingClient, broker: LoopbackBroker) -> Deferred[bool]:
        """Fires once *client* has a recovered connection to *broker*."""
        return eventually(lambda: client.address == f"127.0.0.1:{broker.port}", reactor)

    def drop(self, broker: LoopbackBroker) -> None:
        """Make *broker* drop every client connection (it goes on listening)."""
        for connection in list(broker.factory.connections):
            connection.dropConnection()

    async def passive(self, broker: LoopbackBroker, kind: str, name: str) -> bool:
        """Whether *broker* has the exchange or queue *name* (a passive declare)."""
        connection = await connect(reactor, broker.url)
        try:
            channel = await connection.channel()
            await getattr(channel, f"{kind}_declare")(name, passive=True)
            return True
        except ChannelClosed as error:
            self.assertIsInstance(error.error, NotFound)
            return False
        finally:
            await connection.disconnect()


class AddressTests(RecoveryTestCase):
    """Which address the client connects to, and when."""

    @inline
    async def test_addresses_are_tried_in_order(self) -> None:
        nothing = f"amqp://guest:guest@127.0.0.1:{free_port()}/"
        first, second = self.broker(), self.broker()
        client, events = self.client(nothing, second.url, first.url)
        connection = await client.whenConnected()
        self.assertEqual(connection.transport.getPeer().port, second.port)  # type: ignore[union-attr]
        self.assertEqual(client.address, f"127.0.0.1:{second.port}")
        self.assertEqual(
            [type(event) for event in events], [AttemptFailed, Connected],
        )
        self.assertEqual(events[0].address, f"127.0.0.1:{parse_url(nothing).port}")
        self.assertFalse(events[1].recovered)  # type: ignore[union-attr]

    @inline
    async def test_a_broker_that_refuses_to_serve_is_passed_over(self) -> None:
        hang_up = reactor.listenTCP(0, Factory.forProtocol(_HangUp), interface="127.0.0.1")  # type: ignore[attr-defined]
        self.addCleanup(hang_up.stopListening)
        serving = self.broker()
        refusing_login = parse_url(serving.url).replace(password="wrong")
        client, events = self.client(
            f"amqp://guest:guest@127.0.0.1:{hang_up.getHost().port}/", refusing_login, serving.url
        )
        await client.whenConnected()
        self.assertEqual(client.address, f"127.0.0.1:{serving.port}")
        failures = [event for event in events if isinstance(event, AttemptFailed)]
        self.assertEqual(len(failures), 2)
        self.assertIn("while waiting for connection.start", str(failures[0].reason))
        self.assertIn("ACCESS_REFUSED", str(failures[1].reason))

    @inline
    async def test_after_a_loss_the_next_address_comes_first(self) -> None:
        first, second = self.broker(), self.broker()
        client, events = self.client(first.url, second.url)
        await client.whenConnected()
        self.drop(first)
        await eventually(lambda: len(events) == 3, reactor)
        self.assertEqual([type(event) for event in events], [Connected, ConnectionLost, Connected])
        self.assertEqual(events[1].address, f"127.0.0.1:{first.port}")
        self.assertEqual(events[2].address, f"127.0.0.1:{second.port}")
        self.assertTrue(events[2].recovered)  # type: ignore[union-attr]
        self.assertEqual(client.connections_made, 2)

    @inline
    async def test_rounds_that_all_fail_back_off_until_a_broker_answers(self) -> None:
        port = free_port()
        waits: list[int] = []
        answered: Deferred[None] = Deferred()
        broker = LoopbackBroker()
        self.addCleanup(broker.stop)

        def policy(failures: int) -> float:
            waits.append(failures)
            if failures == 3:
                broker.start(port)
            return 0.01

        client, events = self.client(f"amqp://guest:guest@127.0.0.1:{port}/", retry_policy=policy)
        client.whenConnected().chainDeferred(answered)
        await answered
        self.assertEqual(waits, [1, 2, 3])
        self.assertEqual([type(event) for event in events], [AttemptFailed] * 3 + [Connected])

    @inline
    async def test_stopping_while_waiting_ends_everything(self) -> None:
        client = ReconnectingClient(reactor, f"amqp://guest:guest@127.0.0.1:{free_port()}/", retry_policy=lambda n: 60)
        client.startService()
        waiting = client.whenConnected()
        publishing = client.publish(b"never", routing_key="q")
        await eventually(lambda: client.state is LinkState.WAITING, reactor)
        await client.stopService()
        self.assertIs(client.state, LinkState.STOPPED)
        await fails(waiting, CancelledError)
        closed = await fails(publishing, Exception)
        self.assertIn("the client stopped", str(closed))

    def test_an_endpoint_goes_with_one_url_only(self) -> None:
        with self.assertRaises(ValueError):
            ReconnectingClient(reactor, ["amqp://a/", "amqp://b/"], endpoint=object())  # type: ignore[arg-type]
        with self.assertRaises(ValueError):
            ReconnectingClient(reactor, [])


class RecoveryTests(RecoveryTestCase):
    """What a recovering channel brings to the next broker."""

    @inline
    async def test_topology_consumers_and_unconfirmed_messages_move_to_the_next_broker(self) -> None:
        first, second = self.broker(), self.broker()
        client, events = self.client(first.url, second.url)
        channel = await client.channel()
        private = await declare_orders(channel)
        await channel.queue_declare("scratch")
        await channel.queue_delete("scratch")
        await channel.basic_qos(7)
        received: list[bytes] = []
        consumer = await channel.basic_consume("orders.eu", lambda message: (received.append(message.body), message.ack()))
        await channel.confirm_select()
        confirmed = [channel.basic_publish(b"%d" % n, "orders", "eu.fr") for n in range(10)]
        self.assertEqual(channel.unconfirmed, 10)
        await first.stop()  # before any confirm came back
        sequence_numbers = await gatherResults(confirmed)

        self.assertEqual(sequence_numbers, list(range(1, 11)))
        await eventually(lambda: len(received) == 10, reactor)
        self.assertEqual(sorted(received), sorted(b"%d" % n for n in range(10)))
        self.assertEqual(client.address, f"127.0.0.1:{second.port}")
        renamed = [event for event in events if isinstance(event, QueueRenamed)]
        self.assertEqual([event.old for event in renamed], [private])
        new_private = renamed[0].new
        self.assertNotEqual(new_private, private)
        self.assertEqual(client.topology.name(private), new_private)
        self.assertTrue(await self.passive(second, "exchange", "orders"))
        self.assertFalse(await self.passive(second, "queue", "scratch"))
        # The bindings route on the second broker, the private queue's under its new name.
        channel.basic_publish(b"late", "orders", "eu.de")
        await eventually(lambda: b"late" in received, reactor)
        self.assertEqual((await channel.basic_get(private, no_ack=True)).body, b"0")  # type: ignore[union-attr]
        self.assertEqual([each.tag for each in second.broker.vhosts["/"].queues["orders.eu"].consumers], [consumer.tag])
        prefetch = [
            server_channel.session.consumer_prefetch_count
            for connection in second.factory.connections
            for server_channel in connection.channels.values()
        ]
        self.assertIn(7, prefetch)

    @inline
    async def test_acks_of_a_lost_channel_are_dropped_and_the_broker_redelivers(self) -> None:
        broker = self.broker()
        client, events = self.client(broker.url)
        channel = await client.channel()
        await channel.queue_declare("work", durable=True)
        deliveries: list[Message] = []
        await channel.basic_consume("work", deliveries.append)
        channel.basic_publish(b"job", routing_key="work")
        for delivered in (1, 2):
            await eventually(lambda: len(deliveries) == delivered, reactor)
            self.drop(broker)
        await eventually(lambda: len(deliveries) == 3, reactor)
        first, second, third = deliveries
        self.assertEqual([first.delivery_tag, second.delivery_tag, third.delivery_tag], [1, 1, 1])
        self.assertTrue(second.redelivered and third.redelivered)
        # Sent on the third channel, either ack would settle the third delivery.
        first.ack()
        second.ack()
        await channel.queue_declare("work", passive=True)  # a round trip on the third channel
        self.drop(broker)
        await eventually(lambda: len(deliveries) == 4, reactor)
        deliveries[3].ack()
        await channel.queue_declare("work", passive=True)
        self.assertIs(channel.current, deliveries[3].channel)
        self.assertEqual(broker.broker.vhosts["/"].queues["work"].message_count, 0)
        self.assertEqual(client.connections_made, 4)

    @inline
    async def test_iteration_goes_on_across_connections(self) -> None:
        broker = self.broker()
        client, _ = self.client(broker.url)
        channel = await client.channel()
        await channel.queue_declare("tasks")
        consumer = await channel.basic_consume("tasks", no_ack=True)
        channel.basic_publish(b"before", routing_key="tasks")
        bodies = []
        async for message in consumer:
            bodies.append(message.body)
            if message.body == b"before":
                self.drop(broker)
                await eventually(lambda: client.connections_made == 2, reactor)
                channel.basic_publish(b"after", routing_key="tasks")
            else:
                await consumer.cancel()
        self.assertEqual(bodies, [b"before", b"after"])
        self.assertFalse(consumer.active)

    @inline
    async def test_calls_made_between_connections_wait_in_order(self) -> None:
        broker = self.broker()
        port = broker.port
        client, _ = self.client(broker.url)
        channel = await client.channel()
        await channel.confirm_select()
        await broker.stop()
        await eventually(lambda: client.state is not LinkState.CONNECTED, reactor)
        declared = channel.queue_declare("later")
        confirmed = channel.basic_publish(b"waited", routing_key="later")
        self.assertIsNone(channel.current)
        broker.start(port)
        self.assertEqual((await declared).queue, "later")
        self.assertEqual(await confirmed, 1)
        message = await channel.basic_get("later", no_ack=True)
        self.assertEqual(message.body, b"waited")  # type: ignore[union-attr]

    @inline
    async def test_a_channel_the_broker_closes_is_replaced_with_its_consumers(self) -> None:
        broker = self.broker()
        client, events = self.client(broker.url)
        channel = await client.channel()
        await channel.queue_declare("kept")
        received: list[bytes] = []
        await channel.basic_consume("kept", lambda message: received.append(message.body), no_ack=True)
        await channel.confirm_select()
        first = channel.current
        refused = await fails(channel.basic_publish(b"lost", "no-such-exchange"), ChannelClosed)
        self.assertEqual(refused.reply_code, 404)
        # The first message on the replacing channel, in confirm mode too.
        self.assertEqual(await channel.basic_publish(b"kept", routing_key="kept"), 1)
        self.assertIsNot(channel.current, first)
        await eventually(lambda: received == [b"kept"], reactor)
        self.assertEqual(client.connections_made, 1)

    @inline
    async def test_a_consumer_the_next_broker_refuses_is_reported_and_ended(self) -> None:
        first, second = self.broker(), self.broker()
        client, events = self.client(first.url, second.url)
        channel = await client.channel()
        await channel.queue_declare("only-here")
        client.topology.forget_queue("only-here")  # as if declared by someone else
        consumer = await channel.basic_consume("only-here", no_ack=True)
        await first.stop()
        failed = await eventually(lambda: [e for e in events if isinstance(e, RecoveryFailed)], reactor)
        self.assertIn("consumer", failed[0].what)
        self.assertFalse(consumer.active)
        with self.assertRaises(ChannelClosed):
            await consumer.__anext__()
        self.assertEqual(await channel.basic_publish(b"still", routing_key="nowhere"), None)

    @inline
    async def test_the_registration_methods_declare_before_consuming(self) -> None:
        first, second = self.broker(), self.broker()
        client = ReconnectingClient(reactor, [first.url, second.url], retry_policy=_no_wait, confirms=True)
        received: list[bytes] = []
        arrived: Deferred[None] = Deferred()

        def archive(message: Message) -> None:
            received.append(message.body)
            message.ack()
            if len(received) == 2:
                arrived.callback(None)

        client.declare_exchange("logs", "fanout")
        client.declare_queue("archive", durable=True)
        client.bind_queue("archive", "logs")
        client.declare(lambda channel: channel.queue_declare("by-a-function"))
        client.consume("archive", archive, prefetch_count=10)
        client.startService()
        self.addCleanup(client.stopService)
        self.assertEqual(await client.publish(b"one", exchange="logs"), 1)
        await eventually(lambda: received == [b"one"], reactor)
        await first.stop()
        self.assertEqual(await client.publish(b"two", exchange="logs"), 1)  # the new channel's first
        await arrived
        self.assertEqual(received, [b"one", b"two"])
        self.assertTrue(await self.passive(second, "queue", "by-a-function"))

    @inline
    async def test_transactions_and_other_methods_on_the_next_connection(self) -> None:
        broker = self.broker()
        client, _ = self.client(broker.url)
        channel = await client.channel()
        await channel.queue_declare("ledger")
        await channel.tx_select()
        self.drop(broker)
        await eventually(lambda: client.connections_made == 2, reactor)
        channel.basic_publish(b"committed", routing_key="ledger")
        await channel.tx_commit()  # refused (406) were the new channel not transactional
        self.assertEqual((await channel.basic_get("ledger", no_ack=True)).body, b"committed")  # type: ignore[union-attr]
        # Methods without a wrapper go to the current channel as they are.
        purged = await channel.queue_purge("ledger")
        self.assertEqual(purged.message_count, 0)
        await channel.basic_recover(requeue=True)
        with self.assertRaises(AttributeError):
            channel.no_such_method

    @inline
    async def test_stopping_ends_iteration_and_closes_channels(self) -> None:
        broker = self.broker()
        client, _ = self.client(broker.url)
        channel = await client.channel()
        await channel.queue_declare("q")
        consumer = await channel.basic_consume("q")
        iteration = Deferred.fromCoroutine(consumer.__anext__())
        await client.stopService()
        await fails(iteration, StopAsyncIteration)
        await fails(channel.queue_declare("q"), Exception)
        self.assertIsNotNone(channel.closed_by)

    @inline
    async def test_a_closed_channel_is_not_recovered(self) -> None:
        first, second = self.broker(), self.broker()
        client, _ = self.client(first.url, second.url)
        kept: RecoveringChannel = await client.channel()
        closed: RecoveringChannel = await client.channel()
        await closed.close()
        await first.stop()
        await self.connected_to(client, second)
        self.assertIsNotNone(kept.current)
        self.assertIsNone(closed.current)
        self.assertEqual(len(second.factory.connections), 1)
        (connection,) = second.factory.connections
        self.assertEqual(len(connection.channels), 1)



class TopologyTests(SynchronousTestCase):
    """What the topology remembers, forgets and renames."""

    def setUp(self) -> None:
        self.events: list[RecoveryEvent] = []
        self.topology = Topology(self.events.append)

    def described(self) -> list[str]:
        return [str(record) for record in self.topology.records]

    def test_declaring_again_replaces_in_place(self) -> None:
        self.topology.add(ExchangeRecord("x", "direct", {}))
        self.topology.add(QueueRecord("q", False, {}))
        self.topology.add(ExchangeRecord("x", "topic", {}))
        self.assertEqual(self.described(), ["exchange 'x'", "queue 'q'"])
        self.assertEqual(self.topology.records[0].type, "topic")  # type: ignore[union-attr]

    def test_deleting_forgets_the_bindings_too(self) -> None:
        for record in (
            ExchangeRecord("x", "topic", {}), ExchangeRecord("y", "fanout", {}), QueueRecord("q", False, {}),
            BindingRecord("queue", "q", "x", "a"), BindingRecord("queue", "q", "y", "b"),
            BindingRecord("exchange", "y", "x", "c"),
        ):
            self.topology.add(record)
        self.topology.forget_binding(BindingRecord("queue", "q", "y", "b"))
        self.assertNotIn("binding of queue 'q' to 'y' ('b')", self.described())
        self.topology.forget_exchange("y")
        self.assertEqual(
            self.described(), ["exchange 'x'", "queue 'q'", "binding of queue 'q' to 'x' ('a')"]
        )
        self.topology.forget_queue("q")
        self.assertEqual(self.described(), ["exchange 'x'"])

    def test_every_earlier_name_of_a_server_named_queue_means_its_name_now(self) -> None:
        self.topology.add(QueueRecord("amq.gen-1", True, {}))
        self.topology.add(BindingRecord("queue", "amq.gen-1", "x", ""))
        self.topology.rename("amq.gen-1", "amq.gen-2")
        self.topology.rename("amq.gen-2", "amq.gen-3")
        self.assertEqual(self.topology.name("amq.gen-1"), "amq.gen-3")
        self.assertEqual(self.topology.name("amq.gen-2"), "amq.gen-3")
        self.assertEqual(self.topology.name("other"), "other")
        self.assertEqual(
            self.events, [QueueRenamed("amq.gen-1", "amq.gen-2"), QueueRenamed("amq.gen-2", "amq.gen-3")]
        )
        self.topology.forget_queue("amq.gen-3")
        self.assertEqual(self.topology.records, [])
