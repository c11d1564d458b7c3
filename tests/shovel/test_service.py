"""The shovel service in the test's process, between brokers on loopback."""

from __future__ import annotations

from typing import Any, Optional

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.logger import globalLogPublisher
from twisted.trial.unittest import TestCase

from txamqp09.broker.runtime import RuntimeConfig
from txamqp09.client import connect
from txamqp09.links.uri import LocalAddress
from txamqp09.shovel.service import ShovelService
from txamqp09.shovel.worker import RUNNING, TERMINATED
from txamqp09.testing.broker import LoopbackBroker
from txamqp09.testing.waiting import acknowledged_messages, eventually


class ShovelServiceTestCase(TestCase):
    """Two brokers (``self.source``, ``self.destination``) and a shovel
    service whose runtime configuration is the source broker's."""

    #: Options of the destination broker's connections.
    destination_options: dict[str, Any] = {}

    @inlineCallbacks
    def setUp(self) -> Any:
        self.source = LoopbackBroker()
        self.source.start()
        self.addCleanup(self.source.stop)
        self.destination = LoopbackBroker(**self.destination_options)
        self.destination.start()
        self.addCleanup(self.destination.stop)
        self.config: RuntimeConfig = self.source.factory.config
        self.service = ShovelService(self.config, reactor, self.local, "test@node")
        self.service.startService()
        self.addCleanup(self.service.stopService)
        self.clients: list[Any] = []
        self.addCleanup(self._disconnect)
        yield None

    def local(self) -> Optional[LocalAddress]:
        return LocalAddress("127.0.0.1", self.source.port)

    async def _disconnect_all(self) -> None:
        for client in self.clients:
            await client.disconnect()

    def _disconnect(self) -> Any:
        from twisted.internet.defer import ensureDeferred

        return ensureDeferred(self._disconnect_all())

    async def channel(self, broker: LoopbackBroker) -> Any:
        connection = await connect(reactor, broker.url)
        self.clients.append(connection)
        return await connection.channel()

    def shovel(self, name: str = "s", **value: Any) -> None:
        definition = {
            "src-uri": "amqp://", "src-queue": "from", "dest-uri": self.destination.url, "dest-queue": "to",
            "reconnect-delay": 0.1, **{key.replace("_", "-"): item for key, item in value.items()},
        }
        self.config.set_parameter("shovel", "/", name, definition)

    def running(self, name: str = "s") -> Any:
        return eventually(lambda: self.service.shovels[("/", name)].state == RUNNING, reactor,
                          what=f"shovel {name} running")

    async def drain(self, channel: Any, queue: str, count: int) -> list[Any]:
        """*count* messages of *queue* (waiting for them), acknowledged."""
        return await acknowledged_messages(channel, queue, count, reactor)


class MovingTests(ShovelServiceTestCase):
    """Messages move, as the definition says."""

    async def test_queue_to_queue_on_confirm(self) -> None:
        publisher = await self.channel(self.source)
        await publisher.queue_declare("from", durable=True)
        for number in range(50):
            publisher.basic_publish(b"m%d" % number, routing_key="from", properties={
                "delivery_mode": 2, "content_type": "text/plain", "message_id": f"id{number}",
                "headers": {"n": number}})
        self.shovel()
        await self.running()
        consumer = await self.channel(self.destination)
        got = await self.drain(consumer, "to", 50)
        self.assertEqual([message.body for message in got], [b"m%d" % number for number in range(50)])
        self.assertEqual(
            [(m.properties.delivery_mode, m.properties.content_type, m.properties.message_id, m.headers) for m in got],
            [(2, "text/plain", f"id{number}", {"n": number}) for number in range(50)],
        )
        await eventually(lambda: self.source.broker.vhosts["/"].queues["from"].message_count == 0, reactor)

    async def test_exchange_source_and_destination_with_headers(self) -> None:
        receiver = await self.channel(self.destination)
        await receiver.exchange_declare("out", "topic")
        await receiver.queue_declare("seen")
        await receiver.queue_bind(queue="seen", exchange="out", routing_key="new.#")
        sender = await self.channel(self.source)
        await sender.exchange_declare("in", "direct")
        self.config.set_parameter("shovel", "/", "s", {
            "src-uri": "amqp://", "src-exchange": "in", "src-exchange-key": "k",
            "dest-uri": [self.destination.url], "dest-exchange": "out", "dest-exchange-key": "new.k",
            "dest-add-forward-headers": True, "dest-add-timestamp-header": True,
            "dest-publish-properties": {"app_id": "shovelled"}, "reconnect-delay": 0.1,
        })
        await self.running()
        sender.basic_publish(b"hello", "in", "k", properties={"headers": {"mine": 1}})
        (message,) = await self.drain(receiver, "seen", 1)
        self.assertEqual((message.body, message.routing_key, message.properties.app_id), (b"hello", "new.k", "shovelled"))
        headers = message.headers
        self.assertEqual(headers["mine"], 1)
        self.assertIsInstance(headers["x-shovelled-timestamp"], int)
        (table,) = headers["x-shovelled"]
        self.assertEqual({key: table[key] for key in ("shovelled-by", "shovel-type", "shovel-name", "shovel-vhost",
                                                       "src-exchange", "src-exchange-key", "dest-exchange")},
                         {"shovelled-by": b"test@node", "shovel-type": b"dynamic", "shovel-name": b"s",
                          "shovel-vhost": b"/", "src-exchange": b"in", "src-exchange-key": b"k",
                          "dest-exchange": b"out"})
        self.assertEqual(table["dest-uri"], f"amqp://127.0.0.1:{self.destination.port}/%2F".encode())

    async def test_delete_after_queue_length(self) -> None:
        publisher = await self.channel(self.source)
        await publisher.queue_declare("from", durable=True)
        for number in range(5):
            publisher.basic_publish(b"%d" % number, routing_key="from")
        await eventually(lambda: self.source.broker.vhosts["/"].queues["from"].message_count == 5, reactor)
        self.shovel(src_delete_after="queue-length")
        await eventually(lambda: ("shovel", "/", "s") not in self.config.parameters, reactor,
                         what="the shovel removed itself")
        self.assertEqual(self.service.status(), [])
        consumer = await self.channel(self.destination)
        self.assertEqual(len(await self.drain(consumer, "to", 5)), 5)

    async def test_delete_after_a_number_leaves_the_rest(self) -> None:
        publisher = await self.channel(self.source)
        await publisher.queue_declare("from", durable=True)
        for number in range(10):
            publisher.basic_publish(b"%d" % number, routing_key="from")
        self.shovel(src_delete_after=3, ack_mode="on-publish")
        await eventually(lambda: ("shovel", "/", "s") not in self.config.parameters, reactor)
        consumer = await self.channel(self.destination)
        self.assertEqual([m.body for m in await self.drain(consumer, "to", 3)], [b"0", b"1", b"2"])
        await eventually(lambda: self.source.broker.vhosts["/"].queues["from"].message_count == 7, reactor)

    async def test_no_ack(self) -> None:
        publisher = await self.channel(self.source)
        await publisher.queue_declare("from", durable=True)
        self.shovel(ack_mode="no-ack")
        await self.running()
        for number in range(20):
            publisher.basic_publish(b"%d" % number, routing_key="from")
        consumer = await self.channel(self.destination)
        self.assertEqual(len(await self.drain(consumer, "to", 20)), 20)

    async def test_nacked_messages_stay_at_the_source(self) -> None:
        """A destination queue that refuses (reject-publish overflow) holds
        the messages back at the source; they move once there is room."""
        receiver = await self.channel(self.destination)
        await receiver.queue_declare("to", durable=True, arguments={"x-max-length": 2, "x-overflow": "reject-publish"})
        publisher = await self.channel(self.source)
        await publisher.queue_declare("from", durable=True)
        for number in range(6):
            publisher.basic_publish(b"%d" % number, routing_key="from")
        self.shovel(src_prefetch_count=1)
        await self.running()
        got = []
        for _ in range(3):
            got += await self.drain(receiver, "to", 2)
        self.assertEqual(sorted(message.body for message in got), [b"%d" % n for n in range(6)])


class StatusTests(ShovelServiceTestCase):
    """Status as RabbitMQ reports it; restart; reconnection."""

    async def test_running_status_hides_credentials(self) -> None:
        self.shovel()
        await self.running()
        (row,) = self.service.status()
        self.assertEqual(row, {
            "timestamp": row["timestamp"], "name": "s", "vhost": "/", "type": "dynamic", "state": "running",
            "src_uri": "amqp://", "src_protocol": "amqp091", "dest_protocol": "amqp091",
            "dest_uri": f"amqp://127.0.0.1:{self.destination.port}/%2F", "src_queue": "from", "dest_queue": "to",
        })

    async def test_destination_down_then_back(self) -> None:
        logged: list[str] = []

        def observe(event: dict[str, Any]) -> None:
            logged.append(repr(event))

        globalLogPublisher.addObserver(observe)
        self.addCleanup(globalLogPublisher.removeObserver, observe)
        port = self.destination.port
        self.shovel()
        await self.running()
        await self.destination.stop()
        await eventually(lambda: self.service.shovels[("/", "s")].state == TERMINATED, reactor)
        (row,) = self.service.status()
        self.assertIn("destination connection failed", row["reason"])
        self.assertTrue(row["reason"].startswith('"'))
        self.destination.factory.connections.clear()
        self.destination._port = reactor.listenTCP(port, self.destination.factory, interface="127.0.0.1")
        await self.running()
        self.assertFalse([line for line in logged if "guest:guest" in line])

    async def test_restart_and_clear(self) -> None:
        self.shovel()
        await self.running()
        first = self.service.shovels[("/", "s")]
        self.assertTrue(self.service.restart("/", "s"))
        self.assertIsNot(self.service.shovels[("/", "s")], first)
        await self.running()
        self.assertFalse(self.service.restart("/", "nope"))
        self.config.clear_parameter("shovel", "/", "s")
        self.assertEqual(self.service.status(), [])
        await eventually(lambda: len(self.source.factory.connections) == 0, reactor,
                         what="the shovel's connections closed")


class BlockedDestinationTests(ShovelServiceTestCase):
    """A destination that blocks its publishers (a resource alarm) holds
    the source back: at most the prefetch count is in flight."""

    async def test_blocked_destination_bounds_what_is_in_flight(self) -> None:
        total, prefetch = 200, 10
        publisher = await self.channel(self.source)
        await publisher.queue_declare("from", durable=True)
        for number in range(total):
            publisher.basic_publish(b"%04d" % number + b"x" * 1020, routing_key="from")
        source_queue = self.source.broker.vhosts["/"].queues["from"]
        await eventually(lambda: source_queue.message_count == total, reactor)
        alarms = self.destination.factory.alarms
        alarms.raise_alarm("memory")
        self.shovel(src_prefetch_count=prefetch)
        await eventually(lambda: any(c.gate.blocked for c in self.destination.factory.connections), reactor,
                         what="the destination blocked the shovel")
        shovel = self.service.shovels[("/", "s")]
        await eventually(lambda: shovel.in_flight == prefetch, reactor, what="a full prefetch window in flight")
        self.assertEqual(source_queue.message_count, total - prefetch)
        self.assertEqual(self.destination.broker.vhosts["/"].queues["to"].message_count, 0)
        alarms.clear_alarm("memory")
        consumer = await self.channel(self.destination)
        got = await self.drain(consumer, "to", total)
        self.assertEqual(sorted(message.body[:4] for message in got), [b"%04d" % n for n in range(total)])


class LocalLoginTests(TestCase):
    """``amqp://`` shovels on a broker without guest: they log in as its
    direct logins say (RabbitMQ's direct connections), not as guest."""

    def setUp(self) -> None:
        self.broker = LoopbackBroker()
        self.broker.start()
        self.addCleanup(self.broker.stop)
        self.config: RuntimeConfig = self.broker.factory.config
        self.config.put_user("admin", password="s3cret")
        self.config.set_permissions("admin", "/", ".*", ".*", ".*")
        self.config.put_user("ann")  # no password at all
        self.config.set_permissions("ann", "/", ".*", ".*", ".*")
        self.config.delete_user("guest")
        self.service = ShovelService(self.config, reactor, self.local, "test@node")
        self.service.startService()
        self.addCleanup(self.service.stopService)

    def local(self) -> Optional[LocalAddress]:
        return LocalAddress("127.0.0.1", self.broker.port, self.broker.factory.security.direct_login)

    async def moved_as(self, uri: str) -> list[str]:
        """Move three messages from ``from`` to ``to`` with a shovel at both
        ends on *uri*; the users the broker's connections are logged in as."""
        connection = await connect(reactor, f"amqp://admin:s3cret@127.0.0.1:{self.broker.port}/")
        self.addCleanup(connection.disconnect)
        channel = await connection.channel()
        for queue in ("from", "to"):
            await channel.queue_declare(queue, durable=True)
        for number in range(3):
            channel.basic_publish(b"%d" % number, routing_key="from")
        self.config.set_parameter("shovel", "/", "s", {
            "src-uri": uri, "src-queue": "from", "dest-uri": uri, "dest-queue": "to", "reconnect-delay": 0.1})
        moved = await acknowledged_messages(channel, "to", 3, reactor)
        self.assertEqual([message.body for message in moved], [b"0", b"1", b"2"])
        return sorted(c.user.name for c in self.broker.factory.connections if c.user is not None)

    async def test_no_user_is_none(self) -> None:
        self.assertEqual(await self.moved_as("amqp://"), ["admin", "none", "none"])

    async def test_a_user_without_a_password(self) -> None:
        self.assertEqual(await self.moved_as("amqp://ann@/%2F"), ["admin", "ann", "ann"])
