"""Federation across brokers of this project, each its own process with its
own data directory on 127.0.0.1, configured through the management API:
a federated exchange around a ring of three brokers (max-hops 1 and 2:
exact delivery counts, nothing loops), and a federated queue that drains
its upstream as consumers appear."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import quote

from twisted.internet import reactor
from twisted.internet.defer import ensureDeferred, gatherResults
from twisted.trial.unittest import TestCase

from tests.broker.process import BrokerProcess
from tests.management.support import http_request
from tests.management.test_ctl import run_ctl
from txamqp09.client import connect
from txamqp09.testing.rabbitmq import free_port
from txamqp09.testing.waiting import eventually


class Node:
    """One broker process with its management API."""

    def __init__(self, process: BrokerProcess, http_port: int) -> None:
        self.process = process
        self.http_port = http_port

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        answer = await http_request(self.api, method, path, body)
        if answer.status >= 400:
            raise AssertionError(f"{method} {path}: {answer}")
        return answer.body

    async def answers(self) -> bool:
        try:
            await self.request("GET", "/api/overview")
        except Exception:
            return False
        return True

    async def links(self) -> list[dict[str, Any]]:
        return await self.request("GET", "/api/federation-links")  # type: ignore[no-any-return]

    async def queue(self, name: str) -> dict[str, Any]:
        return await self.request("GET", f"/api/queues/%2F/{quote(name, safe='')}")  # type: ignore[no-any-return]


class FederationAcrossProcessesTests(TestCase):
    """Brokers run as ``twistd amqp09 --management ...`` child processes."""

    #: A test starts two or three broker processes and runs amqp09ctl once
    #: per broker (each about 0.5 s of CPU, many seconds of wall time on a
    #: loaded machine), then waits on up to seven conditions of 30 s each:
    #: trial's default 120 s was once exceeded at load 15-18.
    timeout = 300

    async def start_nodes(self, count: int) -> list[Node]:
        nodes = [self.node(self.mktemp()) for _ in range(count)]
        await gatherResults([node.process.start(reactor) for node in nodes])
        for number, node in enumerate(nodes):
            await eventually(node.answers, reactor, timeout=30, what="the management API answers")
            out, err, code = await run_ctl(node.api, os.path.abspath(self.mktemp()), "set_cluster_name",
                                           f"broker-{number}")
            self.assertEqual((code, err), (0, f"Setting cluster name to broker-{number} ...\n"))
        return nodes

    def node(self, data_dir: str) -> Node:
        """A broker process on *data_dir* with its API on a free port (not started)."""
        http_port = free_port()
        process = BrokerProcess(data_dir, "--management", f"tcp:{http_port}:interface=127.0.0.1")
        self.addCleanup(process.kill)
        return Node(process, http_port)

    async def channel(self, node: Node) -> Any:
        connection = await connect(reactor, node.process.url)
        self.addCleanup(connection.disconnect)
        return await connection.channel()

    async def all_running(self, nodes: list[Node], links: int) -> bool:
        for node in nodes:
            found = await node.links()
            if len(found) != links or any(link["status"] != "running" for link in found):
                return False
        return True

    async def federation_queues_drained(self, nodes: list[Node]) -> bool:
        for node in nodes:
            queues = await node.request("GET", "/api/queues/%2F")
            if any(queue["name"].startswith("federation: ") and queue.get("messages", 0) for queue in queues):
                return False
        return True

    def test_ring_max_hops_1(self) -> Any:
        return ensureDeferred(self.ring(max_hops=1, bindings=2, received=2))

    def test_ring_max_hops_2(self) -> Any:
        return ensureDeferred(self.ring(max_hops=2, bindings=3, received=3))

    async def ring(self, max_hops: int, bindings: int, received: int) -> None:
        """Three brokers, each federating exchange ``ring`` from the one
        before it; one message published at each. With max-hops 1 a
        message reaches the next broker only; with 2 it reaches all three
        and stops (it would come back to the broker it started from)."""
        nodes = await self.start_nodes(3)
        channels = []
        for node in nodes:
            channel = await self.channel(node)
            await channel.exchange_declare("ring", "direct", durable=True)
            await channel.queue_declare("q", durable=True)
            await channel.request("queue.bind", queue="q", exchange="ring", routing_key="k", arguments={})
            await channel.confirm_select()
            channels.append(channel)
        for number, node in enumerate(nodes):
            previous = nodes[number - 1]
            await node.request("PUT", "/api/parameters/federation-upstream/%2F/previous", {"value": {
                "uri": f"amqp://guest:guest@127.0.0.1:{previous.process.port}", "max-hops": max_hops}})
            await node.request("PUT", "/api/policies/%2F/ring", {
                "pattern": "^ring$", "apply-to": "exchanges", "definition": {"federation-upstream-set": "all"}})
        await eventually(lambda: self.all_running(nodes, 1), reactor, timeout=30, what="every link runs")

        async def bound() -> bool:
            for node in nodes:
                found = await node.request("GET", "/api/exchanges/%2F/ring/bindings/source")
                if len(found) != bindings:
                    return False
            return True

        await eventually(bound, reactor, timeout=30, what=f"{bindings} bindings on each ring exchange")
        for number, channel in enumerate(channels):
            await channel.basic_publish(f"from {number}".encode(), "ring", "k", {"delivery_mode": 2})

        async def delivered() -> bool:
            counts = [(await node.queue("q"))["messages"] for node in nodes]
            return counts == [received] * 3

        await eventually(delivered, reactor, timeout=30, what=f"{received} messages in each queue")
        await eventually(lambda: self.federation_queues_drained(nodes), reactor, timeout=30,
                         what="the federation queues are empty")
        for number, channel in enumerate(channels):
            bodies = []
            hops = {}
            while (message := await channel.basic_get("q", no_ack=True)) is not None:
                bodies.append(message.body)
                hops[message.body] = [entry[b"cluster-name" if b"cluster-name" in entry else "cluster-name"]
                                      for entry in message.headers.get("x-received-from", [])]
            self.assertEqual(len(bodies), received, (number, bodies))
            self.assertEqual(hops[f"from {number}".encode()], [])
            self.assertEqual(hops[f"from {(number - 1) % 3}".encode()], [f"broker-{(number - 1) % 3}".encode()])
            if max_hops == 2:
                self.assertEqual(hops[f"from {(number - 2) % 3}".encode()],
                                 [f"broker-{(number - 1) % 3}".encode(), f"broker-{(number - 2) % 3}".encode()])
        for node in nodes:
            await node.process.stop()

    def test_queue_drains_upstream_as_consumers_appear(self) -> Any:
        return ensureDeferred(self._queue_drains_upstream())

    async def _queue_drains_upstream(self) -> None:
        upstream, downstream = await self.start_nodes(2)
        up = await self.channel(upstream)
        down = await self.channel(downstream)
        await up.queue_declare("jobs", durable=True)
        await up.confirm_select()
        for number in range(100):
            await up.basic_publish(b"job %d" % number, "", "jobs", {"delivery_mode": 2})
        await down.queue_declare("jobs", durable=True)
        await downstream.request("PUT", "/api/parameters/federation-upstream/%2F/origin", {"value": {
            "uri": f"amqp://guest:guest@127.0.0.1:{upstream.process.port}", "prefetch-count": 10}})
        await downstream.request("PUT", "/api/policies/%2F/jobs", {
            "pattern": "^jobs$", "apply-to": "queues", "definition": {"federation-upstream": "origin"}})
        await eventually(lambda: self.all_running([downstream], 1), reactor, timeout=30, what="the link runs")
        (link,) = await downstream.links()
        self.assertEqual({key: link[key] for key in ("queue", "upstream_queue", "consumer_tag", "type", "upstream")},
                         {"queue": "jobs", "upstream_queue": "jobs", "consumer_tag": "federation-link-origin",
                          "type": "queue", "upstream": "origin"})
        self.assertEqual(link["uri"], f"amqp://127.0.0.1:{upstream.process.port}")
        home = os.path.abspath(self.mktemp())
        out, err, code = await run_ctl(downstream.api, home, "federation_status")
        self.assertEqual(code, 0, err)
        self.assertTrue(err.startswith("Listing federation links on node txamqp09@"), err)
        lines = out.splitlines()
        self.assertEqual(lines[0].split()[:6], ["type", "vhost", "exchange", "upstream_exchange", "queue",
                                               "upstream_queue"])
        self.assertEqual(lines[1].split()[:7], ["queue", "/", "jobs", "jobs", "origin", "running",
                                               "Federation"])
        self.assertNotIn("guest", out)
        out, err, code = await run_ctl(downstream.api, home, "-q", "federation_status", "--only-down")
        self.assertEqual((code, len(out.splitlines())), (0, 1), out)  # the header only
        # No consumer downstream: the upstream keeps its messages.
        self.assertEqual((await upstream.queue("jobs"))["consumers"], 0)
        self.assertEqual((await upstream.queue("jobs"))["messages"], 100)
        await down.basic_qos(5)
        received: list[Any] = []

        def take(message: Any) -> None:
            received.append(message)
            message.ack()

        await down.basic_consume("jobs", take)
        await eventually(lambda: len(received) == 100, reactor, timeout=30, what="100 messages consumed downstream")
        self.assertEqual(sorted(message.body for message in received), sorted(b"job %d" % n for n in range(100)))

        async def upstream_empty() -> bool:
            return (await upstream.queue("jobs"))["messages"] == 0  # type: ignore[no-any-return]

        await eventually(upstream_empty, reactor, timeout=30, what="the upstream queue is drained")
        for node in (upstream, downstream):
            await node.process.stop()

    def test_downstream_killed_and_restarted(self) -> Any:
        return ensureDeferred(self._downstream_killed_and_restarted())

    async def _downstream_killed_and_restarted(self) -> None:
        """The link comes back from the store after ``kill -9`` of the
        downstream; what was published upstream meanwhile waited in the
        upstream queue and arrives. Nothing is lost; the one message the
        downstream had when it was killed may come again (its ack may not
        have reached the upstream)."""
        upstream, downstream = await self.start_nodes(2)
        down = await self.channel(downstream)
        await down.exchange_declare("events", "fanout", durable=True)
        await down.queue_declare("kept", durable=True)
        await down.request("queue.bind", queue="kept", exchange="events", routing_key="", arguments={})
        await downstream.request("PUT", "/api/parameters/federation-upstream/%2F/origin", {"value": {
            "uri": f"amqp://guest:guest@127.0.0.1:{upstream.process.port}"}})
        await downstream.request("PUT", "/api/policies/%2F/events", {
            "pattern": "^events$", "apply-to": "exchanges", "definition": {"federation-upstream": "origin"}})
        await eventually(lambda: self.all_running([downstream], 1), reactor, timeout=30, what="the link runs")

        async def upstream_bound() -> bool:
            return len(await upstream.request("GET", "/api/exchanges/%2F/events/bindings/source")) == 1

        await eventually(upstream_bound, reactor, timeout=30, what="the binding reaches the upstream")
        up = await self.channel(upstream)
        await up.confirm_select()
        await up.basic_publish(b"before", "events", "", {"delivery_mode": 2})

        async def kept(node: Node, count: int) -> bool:
            return (await node.queue("kept"))["messages"] == count  # type: ignore[no-any-return]

        await eventually(lambda: kept(downstream, 1), reactor, timeout=30, what="the first message arrives")
        await downstream.process.kill()
        for number in range(5):
            await up.basic_publish(b"while down %d" % number, "events", "", {"delivery_mode": 2})
        restarted = self.node(downstream.process.data_dir)
        await restarted.process.start(reactor)
        await eventually(restarted.answers, reactor, timeout=30, what="the restarted API answers")
        await eventually(lambda: self.all_running([restarted], 1), reactor, timeout=30, what="the link runs again")
        await eventually(lambda: self.federation_queues_drained([upstream]), reactor, timeout=30,
                         what="the upstream queue is drained")

        async def settled() -> bool:
            queue = await restarted.queue("kept")
            return queue["messages"] >= 6 and queue["messages_unacknowledged"] == 0  # type: ignore[no-any-return]

        await eventually(settled, reactor, timeout=30, what="the messages published meanwhile arrive")
        channel = await self.channel(restarted)
        bodies = []
        while (message := await channel.basic_get("kept", no_ack=True)) is not None:
            bodies.append(message.body)
        expected = [b"before"] + [b"while down %d" % number for number in range(5)]
        self.assertEqual(sorted(set(bodies)), sorted(expected))
        self.assertIn(len(bodies), (6, 7), bodies)
        self.assertEqual(len(bodies) - len(set(bodies)), bodies.count(b"before") - 1, bodies)
        for node in (upstream, restarted):
            await node.process.stop()
