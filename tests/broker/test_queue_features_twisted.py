"""The queue features through Twisted clients: this project's client
(0-9-1, against this broker and RabbitMQ) and txAMQP (0-8 and 0-9, whose
queue.declare and content properties carry the same arguments and
properties)."""

from __future__ import annotations

import os
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Optional

import txamqp.spec
from twisted.internet import reactor
from twisted.internet.defer import Deferred, inlineCallbacks, succeed
from twisted.internet.protocol import ClientCreator
from twisted.internet.task import Clock
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase
from txamqp.client import TwistedDelegate
from txamqp.content import Content
from txamqp.protocol import AMQClient

from tests.broker.support import wait_on_node_clock
from tests.client.support import inline
from txamqp09.broker.model import Broker
from txamqp09.client import Channel, Message, connect
from txamqp09.testing.broker import LoopbackBroker
from txamqp09.testing.rabbitmq import rabbitmq_missing, shared_rabbitmq
from txamqp09.testing.waiting import eventually

if TYPE_CHECKING:
    _Base = TestCase
else:
    _Base = object

_SPEC_DIR = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "spec")
#: How long a real broker gets to do what the test waits for.
_PATIENCE = 10.0


class OwnClientCases(_Base):
    """Cases for this project's client; subclasses provide :attr:`url` and :meth:`elapse`."""

    timeout = 60
    url: str

    def elapse(self, seconds: float) -> Deferred[None]:
        """Let *seconds* pass for the broker."""
        raise NotImplementedError

    def until(self, attempt: Callable[[], Deferred[Optional[Message]]]) -> Deferred[Message]:
        """The first message *attempt* gets (a real broker may take a moment)."""
        return eventually(attempt, reactor, _PATIENCE, what="a message")  # type: ignore[arg-type]

    @inline
    async def test_ttl_priorities_and_dead_letters(self) -> None:
        connection = await connect(reactor, self.url)
        self.addCleanup(connection.disconnect)
        channel: Channel = await connection.channel()
        dlx = f"dlx-{uuid.uuid4().hex[:10]}"
        await channel.exchange_declare(dlx, "fanout", auto_delete=True)
        dead = (await channel.queue_declare("", exclusive=True)).queue
        await channel.queue_bind(queue=dead, exchange=dlx)
        queue = (await channel.queue_declare("", exclusive=True, arguments={
            "x-max-priority": 5, "x-dead-letter-exchange": dlx})).queue
        channel.basic_publish(b"low", routing_key=queue, properties={"priority": 1})
        channel.basic_publish(b"high", routing_key=queue, properties={"priority": 5})
        channel.basic_publish(b"brief", routing_key=queue, properties={"priority": 5, "expiration": "50"})
        await channel.queue_declare(queue, passive=True)
        await self.elapse(0.1)
        first = await self.until(lambda: channel.basic_get(queue))
        second = await self.until(lambda: channel.basic_get(queue))
        self.assertEqual((first.body, second.body), (b"high", b"low"))
        first.reject(requeue=False)
        second.ack()
        expired = await self.until(lambda: channel.basic_get(dead, no_ack=True))
        rejected = await self.until(lambda: channel.basic_get(dead, no_ack=True))
        self.assertEqual((expired.body, rejected.body), (b"brief", b"high"))
        self.assertEqual(expired.properties.headers["x-death"][0]["reason"], b"expired")
        self.assertEqual(rejected.properties.headers["x-death"][0]["reason"], b"rejected")


class OwnClientOwnBrokerTests(OwnClientCases, TestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(time.time())
        self.server = LoopbackBroker(broker=Broker(clock=self.clock))
        self.server.start()
        self.url = self.server.url
        self.addCleanup(self.server.stop)

    def elapse(self, seconds: float) -> Deferred[None]:
        self.clock.advance(seconds)
        return succeed(None)


class OwnClientRabbitMQTests(OwnClientCases, TestCase):
    skip = rabbitmq_missing()

    def setUp(self) -> None:
        self.url = f"amqp://guest:guest@127.0.0.1:{shared_rabbitmq().port}/"

    def elapse(self, seconds: float) -> Deferred[None]:
        return deferToThread(wait_on_node_clock, shared_rabbitmq().port, seconds, _PATIENCE)


class TxAMQPTests(TestCase):
    """txAMQP on 0-8 and 0-9: the same arguments and properties work there."""

    timeout = 30

    def setUp(self) -> None:
        self.clock = Clock()
        self.server = LoopbackBroker(broker=Broker(clock=self.clock))
        self.port = self.server.start()
        self.addCleanup(self.server.stop)

    @inlineCallbacks
    def scenario(self, spec_file: str) -> Any:
        spec = txamqp.spec.load(os.path.join(_SPEC_DIR, spec_file))
        client = yield ClientCreator(
            reactor, AMQClient, delegate=TwistedDelegate(), vhost="/", spec=spec, heartbeat=0
        ).connectTCP("127.0.0.1", self.port)
        yield client.authenticate("guest", "guest")
        self.addCleanup(client.transport.loseConnection)
        channel = yield client.channel(1)
        yield channel.channel_open()
        # txAMQP cannot decode field arrays, so it cannot read an x-death header.
        yield channel.queue_declare(queue="work", exclusive=True, arguments={
            "x-max-priority": 3, "x-message-ttl": 1000})
        for body, priority in (("later", 0), ("first", 3)):
            channel.basic_publish(routing_key="work", content=Content(body, properties={"priority": priority}))
        yield channel.queue_declare(queue="work", passive=True)
        got = yield channel.basic_get(queue="work", no_ack=True)
        self.clock.advance(1)
        after_ttl = yield channel.basic_get(queue="work", no_ack=True)
        return got.content.body, after_ttl.method.name

    @inlineCallbacks
    def test_0_8(self) -> Any:
        self.assertEqual((yield self.scenario("amqp0-8.xml")), ("first", "get-empty"))

    @inlineCallbacks
    def test_0_9(self) -> Any:
        self.assertEqual((yield self.scenario("amqp0-9.xml")), ("first", "get-empty"))
