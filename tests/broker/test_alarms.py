"""Resource alarms: the registry, and publishers blocked as RabbitMQ blocks them."""

from __future__ import annotations

from typing import Any

import pika
from twisted.internet import defer, reactor
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.testing.scripted import ScriptedClient, server_factory
from tests.broker.support import LoopbackTestCase
from tests.client.support import inline
from txamqp09.broker.alarms import ResourceAlarms, blocked_reason
from txamqp09.client import connect
from txamqp09.testing.waiting import eventually
from txamqp09.wire.frames import HEARTBEAT_FRAME
from txamqp09.wire.versions import AMQP0_9

BLOCKED = {"connection.blocked": True}


class ResourceAlarmsTests(SynchronousTestCase):
    def test_idempotent_changes_notify_once(self) -> None:
        alarms = ResourceAlarms()
        seen: list[frozenset[str]] = []
        alarms.subscribe(seen.append)
        alarms.raise_alarm("memory")
        alarms.raise_alarm("memory")
        alarms.raise_alarm("disk")
        alarms.clear_alarm("memory")
        alarms.clear_alarm("memory")
        alarms.clear_alarm("disk")
        self.assertEqual(
            seen,
            [frozenset({"memory"}), frozenset({"memory", "disk"}), frozenset({"disk"}), frozenset()],
        )
        self.assertEqual(alarms.active(), frozenset())

    def test_reasons_in_rabbitmqs_words(self) -> None:
        self.assertEqual(blocked_reason({"memory"}), "low on memory")
        self.assertEqual(blocked_reason({"disk"}), "low on disk")
        self.assertEqual(blocked_reason({"disk", "memory"}), "low on memory & disk")


class BlockingTests(SynchronousTestCase):
    """Publishers are blocked while an alarm is up; consumers go on."""

    def setUp(self) -> None:
        self.clock = Clock()
        self.alarms = ResourceAlarms()
        self.factory = server_factory(self.clock, alarms=self.alarms)
        self.queues = self.factory.broker.vhosts["/"].queues

    def peer(self, **options: object) -> ScriptedClient:
        peer = ScriptedClient(self.factory, capabilities=BLOCKED, **options)  # type: ignore[arg-type]
        peer.send(1, peer.spec.QueueDeclare(queue="q"))
        peer.expect(1, "queue.declare-ok")
        return peer

    def test_blocked_at_next_publish_then_unblocked(self) -> None:
        """A connection that has not published is blocked by its next content
        frame; what it sent after that frame waits until the alarm clears."""
        peer = self.peer()
        self.alarms.raise_alarm("memory")
        self.assertEqual((peer.frames(), peer.transport.producerState), ([], "producing"))
        peer.publish(1, "q", b"x" * 5000)  # method, header, two body frames
        self.assertEqual(peer.expect(0, "connection.blocked").reason, "low on memory")
        self.assertEqual(peer.transport.producerState, "paused")
        self.assertEqual(self.queues["q"].message_count, 0)
        self.alarms.clear_alarm("memory")
        peer.expect(0, "connection.unblocked")
        self.assertEqual(peer.transport.producerState, "producing")
        self.assertEqual(self.queues["q"].message_count, 1)

    def test_publisher_blocked_when_the_alarm_goes_up(self) -> None:
        peer = self.peer()
        peer.publish(1, "q", b"before")
        self.alarms.raise_alarm("disk")
        self.assertEqual(peer.expect(0, "connection.blocked").reason, "low on disk")
        self.assertEqual(peer.transport.producerState, "paused")

    def test_blocked_mid_message(self) -> None:
        """A body frame of a message under way blocks its connection."""
        peer = self.peer()
        frames = peer.publish_bytes(1, "q", b"y" * 9000)
        peer.feed(frames[:4200])
        self.alarms.raise_alarm("memory")
        peer.expect(0, "connection.blocked")
        self.assertEqual(peer.transport.producerState, "paused")

    def test_consumers_acks_and_gets_go_on(self) -> None:
        publisher = self.peer()
        consumer = self.peer()
        for body in (b"1", b"2", b"3"):
            publisher.publish(1, "q", body)
        self.alarms.raise_alarm("memory")
        publisher.expect(0, "connection.blocked")
        consumer.send(1, consumer.spec.BasicGet(queue="q", no_ack=True))
        consumer.expect(1, "basic.get-ok")
        consumer.send(1, consumer.spec.BasicConsume(queue="q", consumer_tag="c"))
        self.assertEqual(
            consumer.names(), ["basic.consume-ok", "basic.deliver", "basic.deliver"]
        )
        consumer.send(1, consumer.spec.BasicAck(delivery_tag=0, multiple=True))
        self.assertEqual(
            (consumer.frames(), consumer.transport.producerState), ([], "producing")
        )
        self.assertEqual(self.queues["q"].message_count, 0)
        self.assertEqual(consumer.server.channels[1].session.unacked, {})

    def test_both_alarms_until_both_clear(self) -> None:
        peer = self.peer()
        self.alarms.raise_alarm("memory")
        self.alarms.raise_alarm("disk")
        peer.publish(1, "q", b"x")
        self.assertEqual(peer.expect(0, "connection.blocked").reason, "low on memory & disk")
        self.alarms.clear_alarm("disk")
        self.assertEqual((peer.frames(), peer.transport.producerState), ([], "paused"))
        self.alarms.clear_alarm("memory")
        peer.expect(0, "connection.unblocked")

    def test_not_blocked_again_until_it_publishes_again(self) -> None:
        peer = self.peer()
        self.alarms.raise_alarm("memory")
        peer.publish(1, "q", b"x")
        peer.expect(0, "connection.blocked")
        self.alarms.clear_alarm("memory")
        peer.expect(0, "connection.unblocked")
        self.alarms.raise_alarm("memory")
        self.assertEqual((peer.frames(), peer.transport.producerState), ([], "producing"))
        peer.publish(1, "q", b"x")
        peer.expect(0, "connection.blocked")

    def test_clients_without_the_capability_are_only_paused(self) -> None:
        for version_peer in (ScriptedClient(self.factory), ScriptedClient(self.factory, AMQP0_9, capabilities=BLOCKED)):
            version_peer.send(1, version_peer.spec.QueueDeclare(queue="q"))
            version_peer.frames()
        self.alarms.raise_alarm("memory")
        for version_peer in (ScriptedClient(self.factory), ScriptedClient(self.factory, AMQP0_9, capabilities=BLOCKED)):
            version_peer.publish(1, "q", b"x")
            self.assertEqual(
                (version_peer.frames(), version_peer.transport.producerState), ([], "paused")
            )

    def test_connection_opened_during_the_alarm(self) -> None:
        self.alarms.raise_alarm("memory")
        peer = self.peer()
        peer.publish(1, "q", b"x")
        peer.expect(0, "connection.blocked")

    def test_silence_while_blocked_is_not_a_missed_heartbeat(self) -> None:
        """The broker does not read a blocked client, its heartbeats included."""
        peer = self.peer(heartbeat=2)
        self.alarms.raise_alarm("memory")
        peer.publish(1, "q", b"x")
        self.clock.advance(10)
        self.assertFalse(peer.disconnected)
        self.alarms.clear_alarm("memory")
        peer.feed(HEARTBEAT_FRAME)
        self.clock.advance(3)
        self.assertFalse(peer.disconnected)
        self.clock.advance(2)
        self.assertTrue(peer.disconnected)

    def test_the_watermark_and_an_alarm_both_hold_reading(self) -> None:
        """Reading resumes only when neither the ready bytes throttle nor an alarm holds it."""
        peer = self.peer()
        peer.publish(1, "q", b"x")
        self.alarms.raise_alarm("memory")
        peer.server.blockPublishing("ready bytes")
        self.alarms.clear_alarm("memory")
        self.assertEqual(peer.transport.producerState, "paused")
        peer.server.unblockPublishing()
        self.assertEqual(peer.transport.producerState, "producing")


class BlockedClientTests(LoopbackTestCase):
    """pika and this package's client see connection.blocked and connection.unblocked.

    A subclass says how the alarm is raised and cleared (:meth:`block` and
    :meth:`release`, called from any thread) and the reason clients see.
    """

    reason = "low on disk"

    def block(self) -> None:
        reactor.callFromThread(self.server.factory.alarms.raise_alarm, "disk")

    def release(self) -> None:
        reactor.callFromThread(self.server.factory.alarms.clear_alarm, "disk")

    @defer.inlineCallbacks
    def test_pika(self) -> Any:
        def scenario() -> Any:
            parameters = pika.ConnectionParameters("127.0.0.1", self.port)
            publisher = pika.BlockingConnection(parameters)
            try:
                events: list[Any] = []
                publisher.add_on_connection_blocked_callback(
                    lambda _connection, frame: events.append(frame.method.reason)
                )
                publisher.add_on_connection_unblocked_callback(
                    lambda _connection, frame: events.append("unblocked")
                )
                channel = publisher.channel()
                channel.queue_declare("alarmed")
                self.block()
                channel.basic_publish("", "alarmed", b"held")
                while not events:
                    publisher.process_data_events(time_limit=0.1)
                self.release()
                while len(events) < 2:
                    publisher.process_data_events(time_limit=0.1)
                channel.confirm_delivery()
                channel.basic_publish("", "alarmed", b"after")
                return events
            finally:
                publisher.close()

        self.assertEqual((yield self.in_thread(scenario)), [self.reason, "unblocked"])
        self.assertEqual(self.queue("alarmed").message_count, 2)

    @inline
    async def test_this_package_s_client(self) -> None:
        connection = await connect(reactor, self.server.url)
        self.addCleanup(connection.disconnect)
        changes: list[Any] = []
        connection.addBlockedListener(changes.append)
        channel = await connection.channel()
        await channel.queue_declare("alarmed")
        self.block()
        channel.basic_publish(b"held", routing_key="alarmed")
        await eventually(lambda: changes, reactor)
        self.assertEqual((changes, connection.blocked), ([self.reason], self.reason))
        self.release()
        await eventually(lambda: len(changes) >= 2, reactor)
        await channel.confirm_select()
        await channel.basic_publish(b"after", routing_key="alarmed")
        self.assertEqual((changes, connection.blocked), ([self.reason, None], None))
        self.assertEqual(self.queue("alarmed").message_count, 2)
