"""Publisher confirms and tx.commit-ok wait for the store, frame by frame."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, fail
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.testing.scripted import ScriptedClient, server_factory
from txamqp09.broker.model import Broker, Persistence
from txamqp09.store.memory import MemoryStore
from txamqp09.wire.frames import content_frames


class HeldStore(MemoryStore):
    """A memory store whose operations become durable only when the test says."""

    def __init__(self) -> None:
        super().__init__()
        self.durable = 0
        self.waiting: list[tuple[int, Deferred[None]]] = []
        self.failure: Exception | None = None
        #: Ranges (after, upto] of operations that failed to be written.
        self.failed: list[tuple[int, int]] = []

    def when_durable(self, sequence: int) -> Deferred[None]:
        if self.failure is not None:
            return fail(self.failure)
        waiter: Deferred[None] = Deferred()
        if sequence <= self.durable:
            waiter.callback(None)
        else:
            self.waiting.append((sequence, waiter))
        return waiter

    def make_durable(self) -> None:
        """Everything written so far is on disk now."""
        self.settle(self.last_sequence)

    def fail_writes(self, after: int, upto: int) -> None:
        """The operations numbered in (*after*, *upto*] were dropped: a full
        disk; everything up to *upto* is settled."""
        self.failed.append((after, upto))
        self.settle(upto)

    def failed_between(self, after: int, upto: int) -> bool:
        return any(first < upto and after < last for first, last in self.failed)

    def settle(self, upto: int) -> None:
        """The operations up to *upto* are settled."""
        self.durable = upto
        ready = [waiter for sequence, waiter in self.waiting if sequence <= self.durable]
        self.waiting = [(s, w) for s, w in self.waiting if s > self.durable]
        for waiter in ready:
            waiter.callback(None)


class DurableConfirmTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.store = HeldStore()
        self.factory = server_factory(Clock(), broker=Broker(persistence=Persistence(self.store)))
        self.peer = ScriptedClient(self.factory)
        self.spec = self.peer.spec
        self.peer.send(1, self.spec.QueueDeclare(queue="q", durable=True))
        self.store.make_durable()
        self.peer.expect(1, "queue.declare-ok")
        self.peer.send(1, self.spec.QueueDeclare(queue="temp"))
        self.peer.expect(1, "queue.declare-ok")

    def publish(self, *messages: tuple[str, int], channel: int = 1) -> None:
        """Publish (routing key, delivery mode) pairs in one read."""
        self.peer.feed(b"".join(
            content_frames(
                channel, self.spec.BasicPublish(exchange="", routing_key=key),
                self.spec.BasicProperties(delivery_mode=mode), b"body", 4096,
            )
            for key, mode in messages
        ))

    def confirm_mode(self) -> None:
        self.peer.send(1, self.spec.ConfirmSelect())
        self.peer.expect(1, "confirm.select-ok")

    def confirms(self) -> list[tuple[str, int, bool]]:
        return [(m.NAME, m.delivery_tag, m.multiple) for _, m in self.peer.methods()]

    def test_persistent_messages_are_acked_once_durable(self) -> None:
        self.confirm_mode()
        self.publish(("q", 2), ("q", 2), ("temp", 2))
        self.assertEqual(self.confirms(), [])
        self.store.make_durable()
        self.assertEqual(self.confirms(), [("basic.ack", 3, True)])

    def test_later_confirms_wait_behind_earlier_ones(self) -> None:
        self.confirm_mode()
        self.publish(("q", 2))
        self.publish(("temp", 1), ("q", 1))
        self.assertEqual(self.confirms(), [])
        self.store.make_durable()
        self.assertEqual(self.confirms(), [("basic.ack", 1, False), ("basic.ack", 3, True)])
        self.publish(("q", 1))
        self.assertEqual(self.confirms(), [("basic.ack", 4, False)])

    def test_unconfirmed_counts_what_waits_for_the_store(self) -> None:
        publisher = self.peer.server.channels[1].publisher
        self.confirm_mode()
        self.publish(("q", 2), ("q", 2), ("temp", 2))
        self.assertEqual(publisher.unconfirmed, 3)
        self.publish(("q", 1), ("q", 2))
        self.assertEqual(publisher.unconfirmed, 5)
        self.store.make_durable()
        self.assertEqual(self.confirms(), [("basic.ack", 3, True), ("basic.ack", 5, True)])
        self.assertEqual(publisher.unconfirmed, 0)
        self.publish(("temp", 1))
        self.assertEqual((self.confirms(), publisher.unconfirmed), ([("basic.ack", 6, False)], 0))

    def test_transient_messages_are_acked_at_once(self) -> None:
        self.confirm_mode()
        self.publish(("q", 1), ("temp", 2), ("q", 0))
        self.assertEqual(self.confirms(), [("basic.ack", 3, True)])
        self.assertEqual(self.store.messages[("/", "q")], {})

    def test_a_nack_keeps_its_place_behind_held_acks(self) -> None:
        self.peer.send(1, self.spec.QueueDeclare(
            queue="one", arguments={"x-max-length": 0, "x-overflow": "reject-publish"}))
        self.peer.expect(1, "queue.declare-ok")
        self.confirm_mode()
        self.publish(("q", 2), ("one", 2))
        self.assertEqual(self.confirms(), [])
        self.store.make_durable()
        self.assertEqual(self.confirms(), [("basic.ack", 1, False), ("basic.nack", 2, False)])

    def test_answers_to_durable_changes_wait_for_the_disk(self) -> None:
        self.peer.send(1, self.spec.ExchangeDeclare(exchange="x", type="direct", durable=True))
        self.peer.send(1, self.spec.QueueBind(queue="q", exchange="x", routing_key="k"))
        self.peer.send(1, self.spec.QueueBind(queue="temp", exchange="x", routing_key="k"))
        self.assertEqual(self.peer.names(), [])
        self.store.make_durable()
        self.assertEqual(self.peer.names(), ["exchange.declare-ok", "queue.bind-ok", "queue.bind-ok"])
        self.peer.send(1, self.spec.QueueBind(queue="temp", exchange="x", routing_key="j"))
        self.assertEqual(self.peer.names(), ["queue.bind-ok"])

    def test_tx_commit_ok_waits_for_what_the_commit_wrote(self) -> None:
        self.peer.send(1, self.spec.TxSelect())
        self.peer.expect(1, "tx.select-ok")
        self.publish(("temp", 2))
        self.peer.send(1, self.spec.TxCommit())
        self.assertEqual(self.peer.names(), ["tx.commit-ok"])
        self.publish(("q", 2))
        self.peer.send(1, self.spec.TxCommit())
        self.assertEqual(self.peer.names(), [])
        self.store.make_durable()
        self.assertEqual(self.peer.names(), ["tx.commit-ok"])
        self.peer.send(1, self.spec.BasicGet(queue="q"))
        self.peer.frames()
        self.peer.send(1, self.spec.BasicAck(delivery_tag=1))
        self.peer.send(1, self.spec.TxCommit())
        self.assertEqual(self.peer.names(), [])
        self.store.make_durable()
        self.assertEqual(self.peer.names(), ["tx.commit-ok"])
        self.assertEqual(self.store.messages[("/", "q")], {})

    def test_nothing_is_sent_for_a_channel_closed_meanwhile(self) -> None:
        self.confirm_mode()
        self.publish(("q", 2))
        self.peer.send(1, self.spec.ChannelClose(reply_code=200, reply_text="", class_id=0, method_id=0))
        self.peer.expect(1, "channel.close-ok")
        self.peer.open(1)
        self.store.make_durable()
        self.assertEqual(self.peer.frames(), [])

    def test_a_failed_store_closes_the_connection(self) -> None:
        self.confirm_mode()
        self.store.failure = OSError("disk full")
        self.publish(("q", 2))
        close: Any = self.peer.expect(0, "connection.close")
        self.assertEqual(close.reply_code, 541)
        self.assertIn("disk full", close.reply_text)

    def test_publishes_the_store_failed_to_write_are_nacked(self) -> None:
        """Exactly those: a transient message confirmed with a lost one is acked."""
        self.confirm_mode()
        self.publish(("q", 2), ("q", 2))
        written = self.store.last_sequence
        self.publish(("q", 2), ("temp", 1))
        self.publish(("q", 2))
        self.store.fail_writes(written, self.store.last_sequence - 1)
        self.assertEqual(
            self.confirms(), [("basic.ack", 2, True), ("basic.nack", 3, False), ("basic.ack", 4, False)]
        )
        self.store.make_durable()
        self.assertEqual(self.confirms(), [("basic.ack", 5, False)])
        self.store.fail_writes(self.store.last_sequence, self.store.last_sequence + 1)
        self.publish(("q", 2))
        self.assertEqual(self.confirms(), [("basic.nack", 6, False)])
        self.publish(("temp", 2))
        self.assertEqual(self.confirms(), [("basic.ack", 7, False)])

    def test_a_tx_commit_the_store_failed_to_write_closes_the_connection_with_506(self) -> None:
        self.peer.send(1, self.spec.TxSelect())
        self.peer.expect(1, "tx.select-ok")
        self.publish(("q", 2))
        before = self.store.last_sequence
        self.peer.send(1, self.spec.TxCommit())
        self.store.fail_writes(before, self.store.last_sequence)
        close: Any = self.peer.expect(0, "connection.close")
        self.assertEqual(close.reply_code, 506)
        self.assertIn("could not write", close.reply_text)

    def test_answers_wait_for_operations_written_again_after_a_failure(self) -> None:
        self.peer.send(1, self.spec.ExchangeDeclare(exchange="x", type="direct", durable=True))
        self.store.fail_writes(0, 0)
        self.assertEqual(self.peer.names(), [])
        self.store.make_durable()
        self.assertEqual(self.peer.names(), ["exchange.declare-ok"])

    def test_deliveries_and_get_answers_keep_their_place_behind_held_answers(self) -> None:
        self.confirm_mode()
        self.publish(("q", 2))
        self.peer.send(1, self.spec.BasicConsume(queue="temp", consumer_tag="c"))
        self.publish(("temp", 1))
        self.peer.send(1, self.spec.BasicGet(queue="temp"))
        self.peer.send(1, self.spec.BasicGet(queue="q"))
        self.assertEqual(self.peer.names(), [])
        self.store.make_durable()
        self.assertEqual(
            self.peer.names(),
            ["basic.ack", "basic.consume-ok", "basic.deliver", "basic.ack", "basic.get-empty", "basic.get-ok"],
        )
        self.publish(("temp", 1))
        self.assertEqual(self.peer.names(), ["basic.deliver", "basic.ack"])

    def test_a_return_comes_before_its_confirm_behind_held_answers(self) -> None:
        self.confirm_mode()
        self.publish(("q", 2))
        self.peer.feed(content_frames(
            1, self.spec.BasicPublish(exchange="", routing_key="nowhere", mandatory=True),
            self.spec.BasicProperties(), b"lost", 4096,
        ))
        self.assertEqual(self.peer.names(), [])
        self.store.make_durable()
        self.assertEqual(self.peer.names(), ["basic.ack", "basic.return", "basic.ack"])

    def test_a_store_that_refuses_writes_closes_the_connection_with_541(self) -> None:
        def refuse(*_: Any) -> int:
            raise RuntimeError("store /data/store.db is closed")

        self.store.publish = refuse  # type: ignore[method-assign]
        self.publish(("q", 2))
        close: Any = self.peer.expect(0, "connection.close")
        self.assertEqual(close.reply_code, 541)
        self.assertIn("store /data/store.db is closed", close.reply_text)
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
