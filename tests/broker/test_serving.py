"""The serving window (:mod:`txamqp09.broker.serving`) and the factory's stop_serving."""

from __future__ import annotations

import time
from typing import Any, Callable

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.broker.serving import ServingWindow
from txamqp09.testing.scripted import ScriptedClient, server_factory
from txamqp09.wire.errors import ConnectionForced


class ThreadCalls:
    """A reactor's callFromThread that keeps the calls until :meth:`run`."""

    def __init__(self) -> None:
        self.calls: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []

    def callFromThread(self, callable: Callable[..., Any], *args: Any) -> None:
        self.calls.append((callable, args))

    def run(self) -> None:
        calls, self.calls = self.calls, []
        for callable, args in calls:
            callable(*args)


class ServingWindowTests(SynchronousTestCase):
    def test_open_until_the_deadline_then_lapsed_once(self) -> None:
        """Before its deadline the window is open; the first look after it
        tells the listeners, once; opening it again clears the lapse."""
        window = ServingWindow()
        lapses: list[bool] = []
        window.when_lapsed(lambda: lapses.append(True))
        self.assertTrue(window.is_open())
        window.open_until(time.monotonic() + 60)
        self.assertTrue(window.is_open())
        window.open_until(time.monotonic() - 1)
        self.assertFalse(window.is_open())
        self.assertFalse(window.is_open())
        self.assertEqual(lapses, [True])
        window.open_until(time.monotonic() + 60)
        self.assertTrue(window.is_open())

    def test_gated_calls_from_threads_look_first(self) -> None:
        """A call from a thread through the gated reactor runs after a look
        at the window: past the deadline, the listeners hear of it before
        the call runs."""
        window = ServingWindow()
        seen: list[Any] = []
        window.when_lapsed(lambda: seen.append("lapsed"))
        calls = ThreadCalls()
        gated = window.gate(calls)
        gated.callFromThread(seen.append, "first")
        calls.run()
        window.open_until(time.monotonic() - 1)
        gated.callFromThread(seen.append, "second")
        calls.run()
        self.assertEqual(seen, ["first", "lapsed", "second"])


class FactoryServingTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.factory = server_factory(Clock())
        self.lapses: list[bool] = []
        self.factory.window.when_lapsed(lambda: self.lapses.append(True))

    def test_input_past_the_deadline_is_not_handled(self) -> None:
        """A client's input that arrives after the deadline is not handled
        (no answer), and the window's listeners hear of the lapse."""
        peer = ScriptedClient(self.factory)
        peer.send(1, peer.spec.QueueDeclare(queue="q"))
        peer.expect(1, "queue.declare-ok")
        self.factory.window.open_until(time.monotonic() - 1)
        peer.send(1, peer.spec.QueueDeclare(queue="r"))
        self.assertEqual(peer.frames(), [])
        self.assertEqual(self.lapses, [True])
        self.assertNotIn("r", self.factory.broker.add_vhost("/").queues)

    def consume(self, peer: ScriptedClient, queue: str) -> int:
        """Consume *queue* (acknowledging nothing); how many deliveries came."""
        peer.send(1, peer.spec.BasicConsume(queue=queue, consumer_tag=queue))
        peer.expect(1, "basic.consume-ok")
        return len(peer.deliveries())

    def test_stop_serving_closes_every_connection_and_delivers_nothing(self) -> None:
        """stop_serving closes each connection with 320 and its reason;
        what closing one requeues is delivered to no other (each also
        consumes the queue the other holds messages of); new connections
        are refused."""
        first, second = ScriptedClient(self.factory), ScriptedClient(self.factory)
        for queue in ("q1", "q2"):
            first.send(1, first.spec.QueueDeclare(queue=queue))
            first.expect(1, "queue.declare-ok")
            for body in (b"1", b"2"):
                first.publish(1, queue, body)
        self.assertEqual(self.consume(first, "q1"), 2)
        self.assertEqual(self.consume(second, "q2"), 2)
        self.assertEqual(self.consume(first, "q2"), 0)
        self.assertEqual(self.consume(second, "q1"), 0)
        self.factory.stop_serving(ConnectionForced("lease lost"))
        for peer in (first, second):
            close = peer.expect(0, "connection.close")
            self.assertEqual((close.reply_code, close.reply_text), (320, "CONNECTION_FORCED - lease lost"))
            self.assertEqual(peer.frames(), [])
        self.assertIsNone(self.factory.buildProtocol(None))
