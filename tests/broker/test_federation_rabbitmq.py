"""Federation from the private RabbitMQ 3.10 node (the upstream) into this
project's broker (the downstream): a federated exchange and a federated
queue. The node runs without its federation plugin, as an upstream needs
none: the link falls back to a fanout internal exchange there."""

from __future__ import annotations

import os
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import ensureDeferred
from twisted.trial.unittest import TestCase

from txamqp09.broker.federation.service import FederationService
from txamqp09.client import ChannelClosed, connect
from txamqp09.testing.broker import LoopbackBroker
from txamqp09.testing.rabbitmq import rabbitmq_missing, shared_rabbitmq
from txamqp09.testing.waiting import eventually


class RabbitMQUpstreamTests(TestCase):
    """A txamqp09 downstream of the shared RabbitMQ node."""

    skip = rabbitmq_missing()

    def setUp(self) -> None:
        # Started from the test's own thread: the node ends with the thread that started it.
        self.rabbitmq_url = f"amqp://guest:guest@127.0.0.1:{shared_rabbitmq().port}/%2F"
        self.suffix = os.urandom(4).hex()
        self.downstream = LoopbackBroker()
        self.downstream.start()
        self.addCleanup(self.downstream.stop)
        self.config = self.downstream.factory.config
        self.config.global_parameters["cluster_name"] = "txamqp09-down"
        self.service = FederationService(self.config, reactor, "txamqp09@test")
        self.service.startService()
        self.addCleanup(self.service.stopService)

    async def channel(self, url: str) -> Any:
        connection = await connect(reactor, url)
        self.addCleanup(connection.disconnect)
        return await connection.channel()

    def federate(self, pattern: str, apply_to: str) -> None:
        self.config.set_parameter("federation-upstream", "/", "rabbit", {"uri": self.rabbitmq_url})
        self.config.put_policy("/", "fed", {"pattern": pattern, "apply-to": apply_to,
                                            "definition": {"federation-upstream": "rabbit"}})

    def running(self) -> bool:
        return bool(self.service.links) and all(link.status == "running" for link in self.service.links.values())

    def test_federated_exchange(self) -> Any:
        return ensureDeferred(self._federated_exchange())

    async def _federated_exchange(self) -> None:
        exchange = f"fed.interop.{self.suffix}"
        rabbit = await self.channel(self.rabbitmq_url)
        down = await self.channel(self.downstream.url)
        await down.exchange_declare(exchange, "topic")
        await down.queue_declare("q")
        await down.request("queue.bind", queue="q", exchange=exchange, routing_key="a.*", arguments={})
        self.federate("^fed\\.interop\\.", "exchanges")
        await eventually(self.running, reactor, timeout=30, what="the link runs")
        upstream_queue = f"federation: {exchange} -> txamqp09-down"
        self.addCleanup(self.cleanup, exchange, upstream_queue)
        declared = await rabbit.queue_declare(upstream_queue, passive=True)
        self.assertEqual(declared.queue, upstream_queue)
        await rabbit.exchange_declare(exchange, "topic", passive=True)  # the link declared it like ours

        async def bound() -> Any:
            for routing_key, body in ((b"a.b", b"bound"), (b"c.d", b"not bound")):
                rabbit.basic_publish(body, exchange, routing_key.decode())
            probe = await down.basic_get("q", no_ack=True)
            return probe

        first = await eventually(bound, reactor, timeout=30, what="a.* bound at RabbitMQ")
        self.assertEqual(first.body, b"bound")
        (hop,) = first.headers["x-received-from"]
        self.assertEqual(hop["exchange"], exchange.encode())
        self.assertEqual(hop["vhost"], b"/")
        (link,) = self.service.links.values()
        self.assertEqual(hop["cluster-name"], link.upstream_cluster.encode())  # RabbitMQ's node name
        self.assertEqual(hop["uri"], self.rabbitmq_url.replace("guest:guest@", "").encode())
        while (message := await down.basic_get("q", no_ack=True)) is not None:
            self.assertEqual(message.body, b"bound")
        (status,) = self.service.status()
        self.assertEqual((status["type"], status["status"], status["upstream_exchange"]),
                         ("exchange", "running", exchange))

    async def cleanup(self, exchange: str, queue: str) -> None:
        for link in list(self.service.links.values()):
            await link.stop()
        self.service.links.clear()
        rabbit = await self.channel(self.rabbitmq_url)
        await rabbit.request("queue.delete", queue=queue, if_unused=False, if_empty=False)
        for name in (exchange, f"{queue} A", f"{queue} B"):
            await rabbit.request("exchange.delete", exchange=name, if_unused=False)

    def test_federated_queue(self) -> Any:
        return ensureDeferred(self._federated_queue())

    async def _federated_queue(self) -> None:
        queue = f"fed.jobs.{self.suffix}"
        rabbit = await self.channel(self.rabbitmq_url)
        await rabbit.queue_declare(queue, auto_delete=False)
        self.addCleanup(self.delete_queue, queue)
        for number in range(20):
            rabbit.basic_publish(b"job %d" % number, "", queue)
        down = await self.channel(self.downstream.url)
        await down.queue_declare(queue)
        self.federate("^fed\\.jobs\\.", "queues")
        await eventually(self.running, reactor, timeout=30, what="the link runs")
        self.assertEqual((await rabbit.queue_declare(queue, passive=True)).message_count, 20)
        received: list[Any] = []
        await down.basic_consume(queue, received.append, no_ack=True)
        await eventually(lambda: len(received) == 20, reactor, timeout=30, what="20 jobs moved from RabbitMQ")
        self.assertEqual([message.body for message in received], [b"job %d" % n for n in range(20)])
        self.assertEqual(received[0].headers["x-received-from"][0]["visit-count"], 1)
        self.assertEqual((await rabbit.queue_declare(queue, passive=True)).message_count, 0)

    async def delete_queue(self, queue: str) -> None:
        for link in list(self.service.links.values()):
            await link.stop()
        self.service.links.clear()
        rabbit = await self.channel(self.rabbitmq_url)
        try:
            await rabbit.request("queue.delete", queue=queue, if_unused=False, if_empty=False)
        except ChannelClosed:
            pass
