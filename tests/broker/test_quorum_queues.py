"""Quorum queues' delivery limit set by a policy, through pika, against this
project's broker and, with the same cases, a private RabbitMQ 3.10 node.

The declaration rules and the ``x-delivery-count`` header are compared
with the node by the probes of ``tests/broker/dialects/``; these cases need
a policy, which each broker takes its own way.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any, Optional

import pika
from twisted.internet import reactor
from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.internet.threads import blockingCallFromThread, deferToThread
from twisted.trial.unittest import TestCase

from txamqp09.broker.model.policy import Policy
from txamqp09.testing.broker import LoopbackBroker
from txamqp09.testing.rabbitmq import CLI_USER, rabbitmq_missing, shared_rabbitmq

if TYPE_CHECKING:
    _Base = TestCase
else:
    _Base = object


class DeliveryLimitCases(_Base):
    """Cases that need a broker; subclasses provide :attr:`port` and :meth:`set_policy`."""

    timeout = 60
    port: int

    def set_policy(self, name: str, pattern: str, definition: dict[str, Any]) -> None:
        """Set policy *name* on vhost ``/`` for queues (called from the client's thread)."""
        raise NotImplementedError

    def rejected_until_gone(self, arguments: dict[str, Any], definition: Optional[dict[str, Any]]) -> Deferred[Any]:
        """Declare a quorum queue with *arguments* (under a policy with
        *definition*, if any) and a dead-letter queue, publish one message,
        reject it with requeue until it stops coming: the x-delivery-count
        of each delivery and the reason the dead-letter queue got it for."""
        token = uuid.uuid4().hex[:10]
        queue, dead, exchange = f"qq-{token}", f"dead-{token}", f"dlx-{token}"

        def scenario() -> Any:
            if definition is not None:
                self.set_policy(f"limit-{token}", f"^{queue}$", definition)
            connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", self.port))
            try:
                channel = connection.channel()
                channel.exchange_declare(exchange, "fanout", auto_delete=True)
                channel.queue_declare(dead, exclusive=True)
                channel.queue_bind(dead, exchange)
                channel.queue_declare(queue, durable=True, arguments={
                    "x-queue-type": "quorum", "x-dead-letter-exchange": exchange, **arguments,
                })
                channel.confirm_delivery()
                channel.basic_publish("", queue, b"poison")
                counts = []
                for got, properties, _ in channel.consume(queue, inactivity_timeout=1.0):
                    if got is None:
                        break
                    counts.append((properties.headers or {}).get("x-delivery-count"))
                    channel.basic_reject(got.delivery_tag, requeue=True)
                channel.cancel()
                _, properties, _ = channel.basic_get(dead, auto_ack=True)
                channel.queue_delete(queue)
                return counts, properties.headers["x-first-death-reason"]
            finally:
                connection.close()

        return deferToThread(scenario)

    @inlineCallbacks
    def test_the_delivery_limit_policy_key(self) -> Any:
        counts, reason = yield self.rejected_until_gone({}, {"delivery-limit": 1})
        self.assertEqual((counts, reason), ([None, 1], "delivery_limit"))

    @inlineCallbacks
    def test_the_lower_of_argument_and_policy_wins(self) -> Any:
        counts, reason = yield self.rejected_until_gone({"x-delivery-limit": 3}, {"delivery-limit": 1})
        self.assertEqual((counts, reason), ([None, 1], "delivery_limit"))
        counts, reason = yield self.rejected_until_gone({"x-delivery-limit": 1}, {"delivery-limit": 3})
        self.assertEqual((counts, reason), ([None, 1], "delivery_limit"))

    @inlineCallbacks
    def test_the_argument_alone(self) -> Any:
        counts, reason = yield self.rejected_until_gone({"x-delivery-limit": 2}, None)
        self.assertEqual((counts, reason), ([None, 1, 2], "delivery_limit"))


class OwnBrokerTests(DeliveryLimitCases, TestCase):
    """The cases against this project's broker."""

    def setUp(self) -> None:
        self.server = LoopbackBroker()
        self.port = self.server.start()
        self.addCleanup(self.server.stop)

    def set_policy(self, name: str, pattern: str, definition: dict[str, Any]) -> None:
        vhost = self.server.broker.vhosts["/"]
        policy = Policy.from_json("/", name, {"pattern": pattern, "definition": definition, "apply-to": "queues"})

        def put() -> None:
            vhost.policies.put(policy)
            vhost.apply_policies()

        blockingCallFromThread(reactor, put)


class RabbitMQTests(DeliveryLimitCases, TestCase):
    """The same cases against a private RabbitMQ node."""

    skip = rabbitmq_missing()

    def setUp(self) -> None:
        self.node = shared_rabbitmq()
        self.port = self.node.port

    def set_policy(self, name: str, pattern: str, definition: dict[str, Any]) -> None:
        self.node.call("rabbit_policy", "parse_set", "/", name, pattern, json.dumps(definition), 0, "queues", CLI_USER)
        self.addCleanup(deferToThread, self.node.call, "rabbit_policy", "delete", "/", name, CLI_USER)
