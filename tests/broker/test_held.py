"""Output held for the message store: confirms that nack exactly the writes that failed."""

from __future__ import annotations

from collections.abc import Sequence

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.broker.held import HeldOutput
from txamqp09.broker.model import Broker, Persistence
from txamqp09.broker.server import ServerFactory
from txamqp09.store.interface import StoredMessage
from txamqp09.store.memory import MemoryStore
from txamqp09.testing.scripted import ScriptedClient
from txamqp09.wire.frames import content_frames


class SettlingStore:
    """The part of a message store :class:`HeldOutput` asks: operations are
    settled when the test says, and the publishes of *failed* were dropped."""

    def __init__(self, failed: set[int]) -> None:
        self.failed = failed
        self.last_sequence = 0
        self.durable = 0
        self._waiting: list[tuple[int, Deferred[None]]] = []

    def when_durable(self, sequence: int) -> Deferred[None]:
        waiter: Deferred[None] = Deferred()
        if sequence <= self.durable:
            waiter.callback(None)
        else:
            self._waiting.append((sequence, waiter))
        return waiter

    def settle(self, sequence: int) -> None:
        """Operations up to *sequence* are settled."""
        self.durable = sequence
        ready = [waiter for upto, waiter in self._waiting if upto <= sequence]
        self._waiting = [(upto, waiter) for upto, waiter in self._waiting if upto > sequence]
        for waiter in ready:
            waiter.callback(None)

    def failed_between(self, after: int, upto: int) -> bool:
        return any(after < sequence <= upto for sequence in self.failed)


class ConfirmTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.store = SettlingStore(failed={12})
        self.written: list[bytes] = []
        self.failures: list[Failure] = []
        self.output = HeldOutput(
            self.store, self.written.append, lambda: False, self.failures.append  # type: ignore[arg-type]
        )

    def confirm(self, sequence: int, ack: bytes, written: list[tuple[int, int]]) -> list[list[int]]:
        """Hold *ack*; the tags the replacement was asked for, once settled."""
        asked: list[list[int]] = []

        def replacement(tags: list[int]) -> bytes:
            asked.append(tags)
            return b"nacks for " + b",".join(b"%d" % tag for tag in tags)

        self.output.confirm(sequence, ack, written, replacement)
        return asked

    def test_an_ack_whose_writes_all_succeeded_is_sent(self) -> None:
        """Even when another channel's write among the same operations failed."""
        asked = self.confirm(13, b"ack 1-2", [(1, 11), (2, 13)])
        self.assertEqual(self.written, [])
        self.store.settle(13)
        self.assertEqual((self.written, asked, self.failures), ([b"ack 1-2"], [], []))

    def test_only_the_failed_writes_are_replaced(self) -> None:
        asked = self.confirm(14, b"ack 1-4", [(1, 11), (2, 12), (4, 14)])
        self.store.settle(14)
        self.assertEqual((self.written, asked), ([b"nacks for 2"], [[2]]))

    def test_an_ack_without_writes_is_not_checked(self) -> None:
        self.store.failed = {1, 2, 3}
        asked = self.confirm(0, b"ack 5", [])
        self.assertEqual((self.written, asked), ([b"ack 5"], []))

    def test_confirms_go_out_in_order(self) -> None:
        first = self.confirm(12, b"ack 1", [(1, 12)])
        second = self.confirm(13, b"ack 2", [(2, 13)])
        self.store.settle(13)
        self.assertEqual((b"".join(self.written), first, second), (b"nacks for 1ack 2", [[1]], []))


class LosingStore(MemoryStore):
    """A memory store that reports the writes of messages whose body is
    ``lost`` as failed."""

    def __init__(self) -> None:
        super().__init__()
        self.lost: set[int] = set()

    def publish(self, message: StoredMessage, queues: Sequence[tuple[str, str]]) -> int:
        sequence = super().publish(message, queues)
        if message.body == b"lost":
            self.lost.add(sequence)
        return sequence

    def failed_between(self, after: int, upto: int) -> bool:
        return any(after < sequence <= upto for sequence in self.lost)


class ExactNackTests(SynchronousTestCase):
    """Persistent publishes confirmed together, some of whose writes failed:
    a basic.nack for each of those, one basic.ack for the others."""

    def setUp(self) -> None:
        self.peer = ScriptedClient(ServerFactory(Clock(), Broker(persistence=Persistence(LosingStore()))))
        spec = self.peer.spec
        self.peer.send(1, spec.QueueDeclare(queue="q", durable=True))
        self.peer.expect(1, "queue.declare-ok")
        self.peer.send(1, spec.ConfirmSelect())
        self.peer.expect(1, "confirm.select-ok")

    def confirms(self, *bodies: bytes) -> list[tuple[str, int, bool]]:
        """Publish *bodies* persistent in one read; the confirms they get."""
        spec = self.peer.spec
        self.peer.feed(b"".join(
            content_frames(1, spec.BasicPublish(routing_key="q"), spec.BasicProperties(delivery_mode=2), body, 4096)
            for body in bodies
        ))
        return [(method.NAME, method.delivery_tag, method.multiple) for _, method in self.peer.methods()]

    def test_a_failed_write_among_written_ones(self) -> None:
        self.assertEqual(
            self.confirms(b"a", b"lost", b"c"), [("basic.nack", 2, False), ("basic.ack", 3, True)]
        )

    def test_the_last_write_failed(self) -> None:
        self.assertEqual(
            self.confirms(b"a", b"b", b"lost"), [("basic.nack", 3, False), ("basic.ack", 2, True)]
        )

    def test_every_write_failed(self) -> None:
        self.assertEqual(self.confirms(b"lost", b"lost"), [("basic.nack", 1, False), ("basic.nack", 2, False)])

    def test_one_written_after_failed_ones(self) -> None:
        self.assertEqual(
            self.confirms(b"lost", b"a"), [("basic.nack", 1, False), ("basic.ack", 2, False)]
        )
