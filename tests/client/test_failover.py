"""Failing over between broker processes killed with SIGKILL, and a RabbitMQ node.

Each test runs a confirming publisher (a window of messages in flight) and
an acknowledging consumer through one :class:`ReconnectingClient`, numbers
every message, and counts what was confirmed, received, lost and received
twice:

- two brokers that share nothing: the first is killed; what it had not
  confirmed is published again on the second and confirmed there, the
  consumer resumes there, the declarations exist there;
- one broker killed and started again on the same port with its store: no
  confirmed message is lost;
- a RabbitMQ node that closes the client's connection (as
  ``rabbitmqctl close_all_connections`` does);
- the failover examples for pika, kombu and aio-pika of docs/client.rst,
  run with a dead broker first in their list.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import uuid
from unittest import SkipTest
from typing import Any, Optional

from twisted.internet import reactor
from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.internet.threads import deferToThread
from twisted.logger import Logger
from twisted.python.failure import Failure

from tests.broker.process import BrokerProcess
from tests.broker.test_restart import BrokerProcessTestCase
from tests.client.support import declare_orders, inline
from tests.docs.guides import DOCS, Block, blocks
from txamqp09.client import (
    Connected,
    ConnectionLost,
    Message,
    QueueRenamed,
    ReconnectingClient,
    RecoveringChannel,
    RecoveryEvent,
    connect,
)
from txamqp09.testing.rabbitmq import rabbitmq_missing, shared_rabbitmq
from txamqp09.testing.waiting import eventually

_log = Logger()

PERSISTENT = {"delivery_mode": 2}
#: Messages in flight (published, not confirmed) at any time.
WINDOW = 100
PREFETCH = 50
#: Seconds for the steps that wait on brokers (starts take seconds of CPU
#: time, which is much more wall time when the machine is busy).
PATIENCE = 60


def _fast(failures: int) -> float:
    """Retry every 0.2 s: the tests wait for a broker to come back."""
    return 0.2


class Traffic:
    """A publisher keeping :data:`WINDOW` numbered messages in flight until
    *total* are confirmed, and a consumer acknowledging each delivery.

    It listens to its client's events: when the connection is first lost it
    notes what was confirmed then and what was not.

    :ivar confirmed: the numbers confirmed.
    :ivar received: ``(number, broker port)`` of every delivery, in order.
    :ivar confirmed_at_loss: the numbers confirmed when the connection was lost.
    :ivar unconfirmed_at_loss: those published and not confirmed then.
    :ivar recovered_after: seconds from that loss to the next connection
        with everything recovered.
    """

    def __init__(self, publisher: RecoveringChannel, total: int, exchange: str, routing_key: str) -> None:
        self.publisher = publisher
        self.total = total
        self.exchange = exchange
        self.routing_key = routing_key
        self.published = 0
        self.confirmed: set[int] = set()
        self.received: list[tuple[int, int]] = []
        self.done: Deferred[None] = Deferred()
        self.confirmed_at_loss: Optional[set[int]] = None
        self.unconfirmed_at_loss: set[int] = set()
        self.recovered_after: Optional[float] = None
        self._lost_at = 0.0
        self._milestones: list[tuple[int, Deferred[None]]] = []

    def __call__(self, event: RecoveryEvent) -> None:
        """The client's listener."""
        if isinstance(event, ConnectionLost) and self.confirmed_at_loss is None:
            self.confirmed_at_loss = set(self.confirmed)
            self.unconfirmed_at_loss = self.unconfirmed()
            self._lost_at = reactor.seconds()
        elif isinstance(event, Connected) and event.recovered and self.recovered_after is None:
            self.recovered_after = reactor.seconds() - self._lost_at

    def start(self) -> None:
        """Publish the first window."""
        for _ in range(WINDOW):
            self._publish()

    def confirmations(self, count: int) -> Deferred[None]:
        """Fires once *count* messages are confirmed."""
        reached: Deferred[None] = Deferred()
        self._milestones.append((count, reached))
        return reached

    def unconfirmed(self) -> set[int]:
        """The numbers published and not confirmed yet."""
        return set(range(self.published)) - self.confirmed

    def numbers(self, port: Optional[int] = None) -> set[int]:
        """The numbers received (from the broker on *port* only, when given)."""
        return {number for number, source in self.received if port is None or source == port}

    def duplicates(self) -> int:
        """Deliveries of a number received before."""
        return len(self.received) - len(self.numbers())

    def consume(self, message: Message) -> None:
        """The consumer's callback."""
        peer = message.channel.connection.transport.getPeer()  # type: ignore[union-attr]
        self.received.append((int(message.body), peer.port))
        message.ack()

    def _publish(self) -> None:
        if self.published == self.total:
            return
        number = self.published
        self.published += 1
        confirmed = self.publisher.basic_publish(
            b"%d" % number, self.exchange, self.routing_key, PERSISTENT
        )
        confirmed.addCallbacks(self._confirmed, self._failed, callbackArgs=(number,))

    def _confirmed(self, _: object, number: int) -> None:
        self.confirmed.add(number)
        for count, reached in list(self._milestones):
            if len(self.confirmed) >= count:
                self._milestones.remove((count, reached))
                reached.callback(None)
        if len(self.confirmed) == self.total:
            self.done.callback(None)
        self._publish()

    def _failed(self, failure: Failure) -> None:
        if not self.done.called:
            self.done.errback(failure)


class FailoverTestCase(BrokerProcessTestCase):
    timeout = 4 * PATIENCE

    def client(self, urls: Any) -> tuple[ReconnectingClient, list[RecoveryEvent]]:
        """A started client and the events it reports."""
        client = ReconnectingClient(reactor, urls, retry_policy=_fast)
        events: list[RecoveryEvent] = []
        client.addListener(events.append)
        client.startService()
        self.addCleanup(client.stopService)
        return client, events

    async def traffic(
        self, client: ReconnectingClient, total: int, confirmations: int, exchange: str, routing_key: str,
        queue: str,
    ) -> Traffic:
        """Traffic through *client* (its publisher in confirm mode, its consumer
        on *queue*), started, once *confirmations* messages are confirmed."""
        publisher = await client.channel()
        await publisher.confirm_select()
        traffic = Traffic(publisher, total, exchange, routing_key)
        client.addListener(traffic)
        consuming = await client.channel()
        await consuming.basic_qos(PREFETCH)
        await consuming.basic_consume(queue, traffic.consume)
        traffic.start()
        await traffic.confirmations(confirmations)
        return traffic

    async def message_count(self, url: str, queue: str) -> int:
        """The messages ready in *queue* of the broker at *url* (a passive declare)."""
        connection = await connect(reactor, url)
        try:
            channel = await connection.channel()
            return int((await channel.queue_declare(queue, passive=True)).message_count)
        finally:
            await connection.disconnect()


class BrokerProcessFailoverTests(FailoverTestCase):
    @inline
    async def test_kill_9_moves_traffic_to_a_broker_that_shares_nothing(self) -> None:
        first = await self.started(self.mktemp())
        second = await self.started(self.mktemp())
        client, events = self.client([first.url, second.url])
        setup = await client.channel()
        audit = await declare_orders(setup)
        traffic = await self.traffic(client, 2000, 500, "orders", "eu.fr", "orders.eu")
        await first.kill()
        await traffic.done

        assert traffic.confirmed_at_loss is not None, "the client did not lose its connection"
        self.assertGreater(len(traffic.unconfirmed_at_loss), 0)
        confirmed_by_second = traffic.confirmed - traffic.confirmed_at_loss
        # What the first broker had not confirmed was published again and confirmed by the second.
        self.assertLessEqual(traffic.unconfirmed_at_loss, confirmed_by_second)
        # The consumer resumed on the second broker and takes all it confirmed.
        await eventually(lambda: confirmed_by_second <= traffic.numbers(second.port), reactor, timeout=PATIENCE)
        self.assertEqual(
            [type(event) for event in events], [Connected, ConnectionLost, QueueRenamed, Connected]
        )
        renamed = events[2]
        assert isinstance(renamed, QueueRenamed)
        self.assertEqual(renamed.old, audit)
        audited = await setup.queue_declare(audit, passive=True)  # the old name, translated
        self.assertEqual((audited.queue, audited.message_count), (renamed.new, len(confirmed_by_second)))
        self.assertEqual(client.address, f"127.0.0.1:{second.port}")
        _log.info(
            "kill -9 of the first of two brokers: {total} confirmed, {again} published again, "
            "{moved} confirmed by the second and all received there; recovered {after:.3f} s after the loss",
            total=len(traffic.confirmed), again=len(traffic.unconfirmed_at_loss), moved=len(confirmed_by_second),
            after=traffic.recovered_after,
        )

    @inline
    async def test_kill_9_and_restart_on_the_same_port_loses_no_confirmed_message(self) -> None:
        data_dir = self.mktemp()
        broker = await self.started(data_dir)
        client, events = self.client(broker.url)
        setup = await client.channel()
        await setup.queue_declare("ledger", durable=True)
        traffic = await self.traffic(client, 3000, 1000, "", "ledger", "ledger")
        await broker.kill()
        restarted = BrokerProcess(data_dir, port=broker.port)
        self.addCleanup(restarted.kill)
        await restarted.start(reactor)
        await traffic.done
        await eventually(lambda: traffic.confirmed <= traffic.numbers(), reactor, timeout=PATIENCE)

        lost = traffic.confirmed - traffic.numbers()
        self.assertEqual(lost, set())
        self.assertEqual(len(traffic.confirmed), 3000)
        # Duplicates are counted, not bounded: a message appears twice when it
        # was published again after the broker had stored it, or when its ack
        # was not yet committed when the broker died (any ack of the batch
        # being written, however many the consumer made meanwhile).
        self.assertEqual(sum(isinstance(event, Connected) for event in events), 2)
        _log.info(
            "kill -9 and restart of the broker: {confirmed} confirmed, {received} received, "
            "{lost} lost, {duplicates} duplicates; recovered {after:.3f} s after the loss",
            confirmed=len(traffic.confirmed), received=len(traffic.received), lost=len(lost),
            duplicates=traffic.duplicates(), after=traffic.recovered_after,
        )


class RabbitMQFailoverTests(FailoverTestCase):
    skip = rabbitmq_missing()

    @inline
    async def test_a_connection_the_node_closes_is_recovered(self) -> None:
        node = shared_rabbitmq()
        url = f"amqp://guest:guest@127.0.0.1:{node.port}/"
        queue = f"failover-{uuid.uuid4()}"
        client, events = self.client(url)
        setup = await client.channel()
        await setup.queue_declare(queue)
        self.addCleanup(self.delete_queue, url, queue)
        traffic = await self.traffic(client, 1000, 300, "", queue, queue)
        await deferToThread(
            node.evaluate,
            'rabbit_connection_tracking_handler:close_connections('
            'rabbit_connection_tracking:list(<<"/">>), <<"failover test">>, 0).',
        )
        await traffic.done
        await eventually(lambda: traffic.confirmed <= traffic.numbers(), reactor, timeout=PATIENCE)

        losses = [event for event in events if isinstance(event, ConnectionLost)]
        self.assertEqual(len(losses), 1)
        self.assertEqual(losses[0].reason.reply_code, 320)
        self.assertIn("failover test", losses[0].reason.reply_text)
        self.assertTrue(isinstance(events[-1], Connected) and events[-1].recovered)
        self.assertEqual(len(traffic.confirmed), 1000)
        # RabbitMQ requeues the unacknowledged deliveries (at most the prefetch
        # window); the client publishes again what it had not confirmed.
        self.assertLessEqual(traffic.duplicates(), len(traffic.unconfirmed_at_loss) + PREFETCH)
        _log.info(
            "RabbitMQ closed the connection: {confirmed} confirmed, {again} published again, "
            "{duplicates} duplicates, none lost; recovered {after:.3f} s after the loss",
            confirmed=len(traffic.confirmed), again=len(traffic.unconfirmed_at_loss), duplicates=traffic.duplicates(),
            after=traffic.recovered_after,
        )

    async def delete_queue(self, url: str, queue: str) -> None:
        connection = await connect(reactor, url)
        channel = await connection.channel()
        await channel.request("queue.delete", queue=queue)
        await connection.disconnect()


#: The line of a failover example that lists the brokers.
_BROKERS_LINE = re.compile(r"^BROKERS = \[.*\]$", re.MULTILINE)


def failover_example(library: str) -> Block:
    """The example of docs/client.rst's failover section that imports *library*."""
    imports = re.compile(rf"^(import|from) {library}\b", re.MULTILINE)
    found = [block for block in blocks(DOCS / "client.rst") if block.runs and imports.search(block.code)]
    assert len(found) == 1, f"docs/client.rst has {len(found)} runnable blocks importing {library}"
    return found[0]


class OtherClientsFailoverTests(FailoverTestCase):
    """The examples of docs/client.rst for other clients, with a dead broker first in their list."""

    @inlineCallbacks
    def run_example(self, library: str) -> Any:
        """Run the example with a dead broker and a live one; it must publish
        its ten messages to the live one."""
        # kombu replaces its module in sys.modules by one without __spec__,
        # which find_spec then refuses: a library imported already is there.
        if library not in sys.modules and importlib.util.find_spec(library) is None:
            raise SkipTest(f"{library} is not installed (pip install '.[test]')")
        dead = yield self.started(self.mktemp())
        alive = yield self.started(self.mktemp())
        yield dead.kill()
        block = failover_example(library)
        program = _BROKERS_LINE.sub(f"BROKERS = {[dead.url, alive.url]!r}", block.code)
        self.assertNotEqual(program, block.code, "the example has no BROKERS = [...] line")
        example = Block(block.guide, block.line, "python", program, None)
        out, err, code = yield example.run({"amqp": alive.url})
        self.assertEqual(code, 0, f"{block.where} failed:\n{err.decode()}")
        count = yield Deferred.fromCoroutine(self.message_count(alive.url, "orders"))
        self.assertEqual(count, 10)

    def test_pika(self) -> Any:
        return self.run_example("pika")

    def test_kombu(self) -> Any:
        return self.run_example("kombu")

    def test_aio_pika(self) -> Any:
        return self.run_example("aio_pika")
