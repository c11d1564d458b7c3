"""Direct reply-to through pika, as RPC code uses it, against this project's
broker and, with the same cases, a private RabbitMQ 3.10 node.

The refusals, texts and corner cases are compared with the node by the
``reply_to_*`` probes of ``tests/broker/dialects/``; these cases run whole
RPC exchanges.
"""

from __future__ import annotations

import threading
import uuid
from typing import TYPE_CHECKING, Any

import pika
from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from txamqp09.testing.broker import LoopbackBroker
from txamqp09.testing.rabbitmq import rabbitmq_missing, shared_rabbitmq

if TYPE_CHECKING:
    _Base = TestCase
else:
    _Base = object

#: The pseudo-queue RPC clients consume and name as reply-to.
REPLY_TO = "amq.rabbitmq.reply-to"
#: Calls each case makes.
CALLS = 200


class DirectReplyCases(_Base):
    """Cases that need a broker; subclasses provide :attr:`port`."""

    timeout = 60
    port: int

    def connect(self) -> pika.BlockingConnection:
        return pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", self.port))

    def in_thread(self, scenario: Any) -> Deferred[Any]:
        """Run *scenario* (a blocking function) in a thread; its result."""
        return deferToThread(scenario)

    @inlineCallbacks
    def test_pika_example_on_one_channel(self) -> Any:
        """pika's examples/direct_reply_to.py: server and client share a
        channel; the server answers each request to its reply-to."""
        queue = f"rpc.server.{uuid.uuid4().hex[:8]}"

        def scenario() -> Any:
            with self.connect() as connection:
                channel = connection.channel()
                channel.queue_declare(queue, exclusive=True, auto_delete=True)
                answers: dict[str, bytes] = {}

                def serve(channel: Any, method: Any, properties: Any, body: bytes) -> None:
                    channel.basic_publish("", properties.reply_to, b"Polo " + body,
                                          pika.BasicProperties(correlation_id=properties.correlation_id))
                    channel.basic_ack(method.delivery_tag)

                def replied(channel: Any, method: Any, properties: Any, body: bytes) -> None:
                    answers[properties.correlation_id] = body
                    if len(answers) == CALLS:
                        channel.stop_consuming()

                channel.basic_consume(queue, serve)
                channel.basic_consume(REPLY_TO, replied, auto_ack=True)
                for call in range(CALLS):
                    channel.basic_publish("", queue, b"Marco %d" % call, pika.BasicProperties(
                        reply_to=REPLY_TO, correlation_id=str(call)))
                channel.start_consuming()
                return answers

        answers = yield self.in_thread(scenario)
        self.assertEqual(answers, {str(call): b"Polo Marco %d" % call for call in range(CALLS)})

    @inlineCallbacks
    def test_server_and_client_on_their_own_connections(self) -> Any:
        """An RPC server on one connection; a client on another waits for
        each reply before the next call; every call is answered, and the
        server sees the channel's reply name, never the pseudo-queue."""
        queue = f"rpc.square.{uuid.uuid4().hex[:8]}"
        ready = threading.Event()
        seen: set[str] = set()

        def server() -> None:
            with self.connect() as connection:
                channel = connection.channel()
                channel.queue_declare(queue, auto_delete=True)
                channel.basic_qos(prefetch_count=10)
                ready.set()
                for method, properties, body in channel.consume(queue, inactivity_timeout=5):
                    if method is None:
                        break
                    seen.add(properties.reply_to)
                    channel.basic_publish("", properties.reply_to, str(int(body) ** 2).encode(),
                                          pika.BasicProperties(correlation_id=properties.correlation_id))
                    channel.basic_ack(method.delivery_tag)
                    if body == b"-1":
                        break

        def client() -> Any:
            ready.wait(10)
            with self.connect() as connection:
                channel = connection.channel()
                replies: list[tuple[str, bytes]] = []
                channel.basic_consume(
                    REPLY_TO, lambda _c, _m, properties, body: replies.append((properties.correlation_id, body)),
                    auto_ack=True,
                )
                results = []
                for number in [*range(CALLS - 1), -1]:
                    correlation_id = uuid.uuid4().hex
                    channel.basic_publish("", queue, str(number).encode(), pika.BasicProperties(
                        reply_to=REPLY_TO, correlation_id=correlation_id))
                    for _ in range(50):
                        if replies:
                            break
                        connection.process_data_events(time_limit=0.1)
                    answer_to, body = replies.pop()
                    self.assertEqual(answer_to, correlation_id)
                    results.append(int(body))
                return results

        serving = self.in_thread(server)
        results = yield self.in_thread(client)
        yield serving
        self.assertEqual(results, [number * number for number in [*range(CALLS - 1), -1]])
        self.assertEqual(len(seen), 1)
        (name,) = seen
        self.assertTrue(name.startswith(REPLY_TO + "."), name)


class OwnBrokerTests(DirectReplyCases, TestCase):
    """The cases against this project's broker."""

    def setUp(self) -> None:
        self.server = LoopbackBroker()
        self.port = self.server.start()
        self.addCleanup(self.server.stop)


class RabbitMQTests(DirectReplyCases, TestCase):
    """The same cases against a private RabbitMQ node."""

    skip = rabbitmq_missing()

    def setUp(self) -> None:
        self.port = shared_rabbitmq().port
