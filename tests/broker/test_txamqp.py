"""txAMQP, a Twisted client, speaking AMQP 0-8 and 0-9 to the broker."""

from __future__ import annotations

import os
from typing import Any

import txamqp.spec
from twisted.internet import defer, reactor
from twisted.internet.protocol import ClientCreator
from txamqp.client import Closed, TwistedDelegate
from txamqp.content import Content
from txamqp.protocol import AMQClient

from tests.broker.support import LoopbackTestCase

_SPEC_DIR = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "spec")


class TxAMQPConnecting:
    """Connects txAMQP with the spec file of :attr:`spec_file`."""

    spec_file = ""
    #: The txAMQP delegate class the client uses.
    delegate: Any = TwistedDelegate
    #: The version the broker must see the client speak.
    version = ""
    port: int

    @defer.inlineCallbacks
    def connect(self) -> Any:
        spec = txamqp.spec.load(os.path.join(_SPEC_DIR, self.spec_file))
        client = yield ClientCreator(
            reactor, AMQClient, delegate=self.delegate(), vhost="/", spec=spec, heartbeat=0
        ).connectTCP("127.0.0.1", self.port)
        yield client.authenticate("guest", "guest")
        self.addCleanup(client.transport.loseConnection)  # type: ignore[attr-defined]
        channel = yield client.channel(1)
        yield channel.channel_open()
        versions = {connection.version.name for connection in self.server.factory.connections}  # type: ignore[attr-defined]
        self.assertEqual(versions, {self.version})  # type: ignore[attr-defined]
        return client, channel


class TxAMQPMixin(TxAMQPConnecting):
    """Cases txAMQP runs on 0-8 and 0-9."""

    @defer.inlineCallbacks
    def test_ticket_consume_and_ack(self) -> Any:
        client, channel = yield self.connect()
        ticket = (yield channel.access_request(realm="/data", active=True, read=True, write=True)).ticket
        self.assertEqual(ticket, 1)
        yield channel.exchange_declare(ticket=ticket, exchange="old", type="topic")
        queue_name = (yield channel.queue_declare(ticket=ticket, queue="", exclusive=True)).queue
        yield channel.queue_bind(ticket=ticket, queue=queue_name, exchange="old", routing_key="a.#")
        tag = (yield channel.basic_consume(ticket=ticket, queue=queue_name)).consumer_tag
        deliveries = yield client.queue(tag)
        for key in ("a.b", "b.a", "a"):
            channel.basic_publish(ticket=ticket, exchange="old", routing_key=key, content=Content(key))
        bodies = []
        for _ in range(2):
            message = yield deliveries.get(timeout=5)
            bodies.append(message.content.body)
            channel.basic_ack(delivery_tag=message.delivery_tag)
        self.assertEqual(bodies, ["a.b", "a"])
        queue = self.server.broker.vhosts["/"].queues[queue_name]  # type: ignore[attr-defined]
        self.assertEqual((queue.message_count, len(queue.consumers)), (0, 1))

    @defer.inlineCallbacks
    def test_immediate_and_mandatory_returns(self) -> Any:
        """immediate without a ready consumer returns 313; mandatory without a route 312."""
        client, channel = yield self.connect()
        yield channel.queue_declare(queue="idle")
        channel.basic_publish(exchange="", routing_key="idle", immediate=True, content=Content("now"))
        channel.basic_publish(exchange="", routing_key="none", mandatory=True, content=Content("lost"))
        returns = []
        for _ in range(2):
            returns.append((yield client.basic_return_queue.get(timeout=5)))
        self.assertEqual(
            [(message.reply_code, message.routing_key, message.content.body) for message in returns],
            [(313, "idle", "now"), (312, "none", "lost")],
        )
        declared = yield channel.queue_declare(queue="idle", passive=True)
        self.assertEqual(declared.message_count, 0)

    @defer.inlineCallbacks
    def test_transaction(self) -> Any:
        _client, channel = yield self.connect()
        yield channel.queue_declare(queue="txq")
        yield channel.tx_select()
        channel.basic_publish(exchange="", routing_key="txq", content=Content("held"))
        declared = yield channel.queue_declare(queue="txq", passive=True)
        self.assertEqual(declared.message_count, 0)
        yield channel.tx_commit()
        declared = yield channel.queue_declare(queue="txq", passive=True)
        self.assertEqual(declared.message_count, 1)

    @defer.inlineCallbacks
    def test_channel_error(self) -> Any:
        _client, channel = yield self.connect()
        with self.assertRaises(Closed) as caught:
            yield channel.queue_declare(queue="absent", passive=True)
        self.assertIn("404", str(caught.exception))


class AMQP08Tests(TxAMQPMixin, LoopbackTestCase):
    spec_file = "amqp0-8.xml"
    version = "0-8"


class AMQP09Tests(TxAMQPMixin, LoopbackTestCase):
    spec_file = "amqp0-9.xml"
    version = "0-9"
