"""Shovels and RabbitMQ 3.10: the same definitions accepted and refused
alike; this project's shovel with RabbitMQ as its source and as its
destination; RabbitMQ's own shovel plugin moving messages out of this
project's broker."""

from __future__ import annotations

import html
import json
import uuid
from typing import Any, Optional

from twisted.internet import reactor
from twisted.internet.defer import ensureDeferred
from twisted.trial.unittest import TestCase

from tests.management.support import http_request
from tests.shovel.test_definition import REFUSED
from txamqp09.client import connect
from txamqp09.links.uri import LocalAddress
from txamqp09.shovel.service import ShovelService
from txamqp09.shovel.worker import RUNNING
from txamqp09.testing.broker import LoopbackBroker
from txamqp09.testing.rabbitmq import CLI_USER, RabbitMQ, rabbitmq_missing, shared_rabbitmq
from txamqp09.testing.waiting import acknowledged_messages, eventually

#: The plugins of the node these tests share.
PLUGINS = ("rabbitmq_shovel", "rabbitmq_shovel_management")


def node() -> RabbitMQ:
    """The private node with the management and shovel plugins."""
    return shared_rabbitmq(management=True, more_plugins=PLUGINS)


class RabbitMQShovelTestCase(TestCase):
    """This project's broker (``self.ours``), the private RabbitMQ node
    (``self.rabbit``) and a shovel service on our broker."""

    skip = rabbitmq_missing()
    timeout = 120

    def setUp(self) -> None:
        self.rabbit = node()
        self.ours = LoopbackBroker()
        self.ours.start()
        self.addCleanup(self.ours.stop)
        self.service = ShovelService(self.ours.factory.config, reactor, self.local, "txamqp09@test")
        self.service.startService()
        self.addCleanup(self.service.stopService)
        self.tag = uuid.uuid4().hex[:8]
        self.connections: list[Any] = []
        self.addCleanup(lambda: ensureDeferred(self._disconnect()))

    def local(self) -> Optional[LocalAddress]:
        return LocalAddress("127.0.0.1", self.ours.port)

    @property
    def rabbit_url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.rabbit.port}/%2F"

    @property
    def rabbit_api(self) -> str:
        return f"http://127.0.0.1:{self.rabbit.management_port}"

    async def _disconnect(self) -> None:
        for connection in self.connections:
            await connection.disconnect()

    async def channel(self, url: str) -> Any:
        connection = await connect(reactor, url)
        self.connections.append(connection)
        return await connection.channel()

    async def publish(self, url: str, queue: str, count: int) -> None:
        channel = await self.channel(url)
        await channel.queue_declare(queue, durable=True)
        await channel.confirm_select()
        for number in range(count):
            await channel.basic_publish(b"%d" % number, routing_key=queue, properties={"delivery_mode": 2})

    async def received(self, url: str, queue: str, count: int) -> list[bytes]:
        channel = await self.channel(url)
        await channel.queue_declare(queue, durable=True)
        messages = await acknowledged_messages(channel, queue, count, reactor, 30, 0.02)
        return [message.body for message in messages]

    async def put_on_rabbitmq(self, name: str, value: Any) -> Any:
        answer = await http_request(self.rabbit_api, "PUT", f"/api/parameters/shovel/%2F/{name}", {"value": value})
        if answer.status in (201, 204):
            self.addCleanup(http_request, self.rabbit_api, "DELETE", f"/api/parameters/shovel/%2F/{name}")
        return answer


class SameDefinitionsTests(RabbitMQShovelTestCase):
    """One definition JSON, two brokers: the same answer."""

    async def test_refused_alike(self) -> None:
        from tests.management.support import ManagementBroker

        ours = ManagementBroker()
        ShovelService(ours.factory.config, reactor, lambda: None)
        await ours.start()
        self.addCleanup(ours.stop)
        for value, _ in REFUSED:
            theirs = await self.put_on_rabbitmq("s", value)
            mine = await ours.request("PUT", "/api/parameters/shovel/%2F/s", {"value": value})
            self.assertEqual((mine.status, mine.body["reason"]), (theirs.status, html.unescape(theirs.body["reason"])))

    async def test_accepted_alike(self) -> None:
        from tests.management.support import ManagementBroker

        ours = ManagementBroker()
        await ours.start()
        self.addCleanup(ours.stop)
        value = {
            "src-uri": ["amqp://", "amqp://guest:guest@127.0.0.1:1"], "src-exchange": "amq.direct",
            "src-exchange-key": "k", "src-prefetch-count": 10, "src-delete-after": "never",
            "dest-uri": "amqp://", "dest-exchange": "amq.topic", "dest-exchange-key": "k2",
            "dest-add-forward-headers": True, "dest-add-timestamp-header": True,
            "dest-publish-properties": {"delivery_mode": 2}, "ack-mode": "on-publish", "reconnect-delay": 1,
        }
        name = f"same-{self.tag}"
        theirs = await self.put_on_rabbitmq(name, value)
        mine = await ours.request("PUT", f"/api/parameters/shovel/%2F/{name}", {"value": value})
        self.assertEqual((mine.status, theirs.status), (201, 201))


class SameControlTests(RabbitMQShovelTestCase):
    """Deleting and restarting a shovel through the API: the same answers."""

    async def test_delete_and_restart_alike(self) -> None:
        from tests.management.support import ManagementBroker

        ours = ManagementBroker()
        await ours.start()
        self.addCleanup(ours.stop)
        service = ShovelService(ours.factory.config, reactor, lambda: LocalAddress("127.0.0.1", ours.amqp_port))
        ours.node.shovels = service
        service.startService()
        self.addCleanup(service.stopService)
        name = f"control-{self.tag}"
        value = {"src-uri": "amqp://", "src-queue": f"a-{self.tag}", "dest-uri": "amqp://", "dest-queue": "b"}
        await self.put_on_rabbitmq(name, value)
        await ours.request("PUT", f"/api/parameters/shovel/%2F/{name}", {"value": value})
        answers = []
        for api, request in ((self.rabbit_api, None), (None, ours.request)):
            steps = []
            for method, path in [("DELETE", f"/api/shovels/vhost/%2F/{name}/restart"),
                                 ("DELETE", f"/api/shovels/vhost/%2F/{name}"),
                                 ("GET", f"/api/parameters/shovel/%2F/{name}"),
                                 ("DELETE", f"/api/shovels/vhost/%2F/{name}"),
                                 ("DELETE", f"/api/shovels/vhost/%2F/{name}/restart")]:
                answer = await (http_request(api, method, path) if api else request(method, path))
                steps.append((method, path, answer.status))
            answers.append(steps)
        self.assertEqual([status for _, _, status in answers[0]], [204, 204, 404, 404, 404])
        self.assertEqual(answers[1], answers[0])


class OurShovelTests(RabbitMQShovelTestCase):
    """This project's shovel, with RabbitMQ at one end."""

    async def test_rabbitmq_as_destination(self) -> None:
        source, target = f"out-{self.tag}", f"in-{self.tag}"
        await self.publish(self.ours.url, source, 100)
        self.ours.factory.config.set_parameter("shovel", "/", "to-rabbit", {
            "src-uri": "amqp://", "src-queue": source, "dest-uri": self.rabbit_url, "dest-queue": target,
            "dest-add-forward-headers": True,
        })
        bodies = await self.received(self.rabbit_url, target, 100)
        self.assertEqual(sorted(bodies), sorted(b"%d" % n for n in range(100)))
        await eventually(lambda: self.ours.broker.vhosts["/"].queues[source].message_count == 0, reactor)

    async def test_rabbitmq_as_source(self) -> None:
        source, target = f"out-{self.tag}", f"in-{self.tag}"
        await self.publish(self.rabbit_url, source, 100)
        self.ours.factory.config.set_parameter("shovel", "/", "from-rabbit", {
            "src-uri": [self.rabbit_url], "src-queue": source, "src-prefetch-count": 10,
            "dest-uri": "amqp://", "dest-queue": target,
        })
        await eventually(lambda: self.service.shovels["/", "from-rabbit"].state == RUNNING, reactor, 30)
        bodies = await self.received(self.ours.url, target, 100)
        self.assertEqual(bodies, [b"%d" % n for n in range(100)])
        channel = await self.channel(self.rabbit_url)
        await eventually(lambda: channel.queue_declare(source, passive=True).addCallback(
            lambda ok: ok.message_count == 0), reactor, 30, 0.05, "the RabbitMQ queue emptied")


class RabbitMQShovelPluginTests(RabbitMQShovelTestCase):
    """RabbitMQ's rabbitmq_shovel moving messages out of this project's broker."""

    async def test_rabbitmq_shovel_drains_our_queue(self) -> None:
        source, target = f"ours-{self.tag}", f"theirs-{self.tag}"
        await self.publish(self.ours.url, source, 200)
        answer = await self.put_on_rabbitmq(f"from-ours-{self.tag}", {
            "src-uri": f"amqp://guest:guest@127.0.0.1:{self.ours.port}", "src-queue": source,
            "dest-uri": "amqp://", "dest-queue": target, "ack-mode": "on-confirm",
        })
        self.assertEqual(answer.status, 201)
        bodies = await self.received(self.rabbit_url, target, 200)
        self.assertEqual(bodies, [b"%d" % n for n in range(200)])
        await eventually(lambda: self.ours.broker.vhosts["/"].queues[source].message_count == 0, reactor, 30)
        status = await http_request(self.rabbit_api, "GET", "/api/shovels/%2F")
        (row,) = [row for row in status.body if row["name"] == f"from-ours-{self.tag}"]
        self.assertEqual((row["state"], row["src_uri"]), ("running", f"amqp://127.0.0.1:{self.ours.port}"))


class DirectLoginsAlikeTests(RabbitMQShovelTestCase):
    """A shovel whose URIs name the broker it runs in, in a virtual host
    where guest has no permissions: with no user it acts as RabbitMQ's
    direct user ``none`` (every right), with a user and no password as that
    user; both brokers move the messages alike."""

    def local(self) -> Optional[LocalAddress]:
        return LocalAddress("127.0.0.1", self.ours.port, self.ours.factory.security.direct_login)

    async def moved_alike(self, uri: str) -> None:
        vhost, user = f"direct-{self.tag}", f"owner-{self.tag}"
        definition = {"src-uri": uri.format(user=user, vhost=vhost), "src-queue": "from",
                      "dest-uri": uri.format(user=user, vhost=vhost), "dest-queue": "to"}
        rabbit = self.rabbit
        rabbit.call("rabbit_vhost", "add", vhost, CLI_USER)
        self.addCleanup(rabbit.call, "rabbit_vhost", "delete", vhost, CLI_USER)
        rabbit.call("rabbit_auth_backend_internal", "add_user", user, "pw", CLI_USER)
        self.addCleanup(rabbit.call, "rabbit_auth_backend_internal", "delete_user", user, CLI_USER)
        rabbit.call("rabbit_auth_backend_internal", "set_permissions", user, vhost, ".*", ".*", ".*", CLI_USER)
        config = self.ours.factory.config
        config.put_vhost(vhost)
        config.put_user(user, password="pw")
        config.set_permissions(user, vhost, ".*", ".*", ".*")
        moved = []
        for port in (rabbit.port, self.ours.port):
            url = f"amqp://{user}:pw@127.0.0.1:{port}/{vhost}"
            await self.publish(url, "from", 3)
            if port == rabbit.port:
                rabbit.call("rabbit_runtime_parameters", "parse_set", vhost, "shovel", "s", json.dumps(definition),
                            CLI_USER)
            else:
                config.set_parameter("shovel", vhost, "s", definition)
            moved.append(await self.received(url, "to", 3))
        self.assertEqual(moved, [[b"0", b"1", b"2"]] * 2)

    async def test_no_user(self) -> None:
        await self.moved_alike("amqp:///{vhost}")

    async def test_a_user_without_a_password(self) -> None:
        await self.moved_alike("amqp://{user}@/{vhost}")
