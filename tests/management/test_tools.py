"""Third-party tools written for RabbitMQ drive this broker's API: rabbitmqadmin,
pyrabbit2, celery flower's broker view."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any, Optional

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.threads import deferToThread
from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial.unittest import TestCase

from tests.management.support import ManagementBroker, ManagementTestCase

try:
    import pyrabbit2
except ImportError:
    pyrabbit2 = None
try:
    from flower.utils.broker import Broker as FlowerBroker
except ImportError:
    FlowerBroker = None

#: Where Debian's rabbitmq-server puts rabbitmqadmin.
_RABBITMQADMIN = [
    "/usr/bin/rabbitmqadmin",
    "/usr/sbin/rabbitmqadmin",
    "/usr/lib/rabbitmq/lib/rabbitmq_server-3.10.8/plugins/rabbitmq_management-3.10.8/priv/www/cli/rabbitmqadmin",
]


def rabbitmqadmin() -> Optional[str]:
    """The rabbitmqadmin script, if installed."""
    return next((path for path in _RABBITMQADMIN if os.path.isfile(path)), None)


class RabbitmqadminTests(ManagementTestCase):
    """rabbitmqadmin, run with this Python against the broker's API port."""

    skip = None if rabbitmqadmin() else "rabbitmqadmin is missing; install the Debian package rabbitmq-server"

    @inlineCallbacks
    def admin(self, *arguments: str) -> Any:
        """Run rabbitmqadmin; its standard output (the test fails on a non-zero exit)."""
        script = rabbitmqadmin()
        assert script is not None
        out, err, code = yield getProcessOutputAndValue(
            sys.executable, [script, "-H", "127.0.0.1", "-P", str(self.broker.http_port), *arguments],
            env=dict(os.environ), reactor=reactor,
        )
        self.assertEqual(code, 0, f"rabbitmqadmin {' '.join(arguments)} failed: {out!r} {err!r}")
        return out.decode()

    @inlineCallbacks
    def test_declare_publish_list_and_get(self) -> Any:
        out = yield self.admin("declare", "queue", "name=tasks", "durable=false")
        self.assertIn("queue declared", out)
        out = yield self.admin("declare", "exchange", "name=jobs", "type=topic")
        self.assertIn("exchange declared", out)
        yield self.admin("declare", "binding", "source=jobs", "destination=tasks", "routing_key=job.#")
        out = yield self.admin("publish", "exchange=jobs", "routing_key=job.print", "payload=hello world")
        self.assertIn("Message published", out)
        out = yield self.admin("-f", "raw_json", "list", "queues")
        (queue,) = json.loads(out)
        self.assertEqual((queue["name"], queue["messages"]), ("tasks", 1))
        out = yield self.admin("-f", "tsv", "list", "queues", "name", "messages")
        self.assertEqual(out.split(), ["name", "messages", "tasks", "1"])
        out = yield self.admin("-f", "raw_json", "get", "queue=tasks", "ackmode=ack_requeue_false")
        (message,) = json.loads(out)
        self.assertEqual((message["payload"], message["routing_key"], message["exchange"]),
                         ("hello world", "job.print", "jobs"))
        self.assertEqual(self.broker.factory.broker.vhosts["/"].queues["tasks"].message_count, 0)
        out = yield self.admin("-f", "raw_json", "list", "bindings", "source", "destination", "routing_key")
        self.assertIn({"source": "jobs", "destination": "tasks", "routing_key": "job.#"}, json.loads(out))
        yield self.admin("delete", "queue", "name=tasks")
        self.assertNotIn("tasks", self.broker.factory.broker.vhosts["/"].queues)

    @inlineCallbacks
    def test_export_then_import_into_another_broker(self) -> Any:
        yield self.admin("declare", "vhost", "name=shop")
        yield self.admin("declare", "user", "name=clerk", "password=secret", "tags=monitoring")
        yield self.admin("declare", "permission", "vhost=shop", "user=clerk", "configure=^clerk", "write=.*", "read=.*")
        yield self.admin("declare", "permission", "vhost=shop", "user=guest", "configure=.*", "write=.*", "read=.*")
        yield self.admin("-V", "shop", "declare", "queue", "name=orders", "durable=true",
                         'arguments={"x-max-length": 100}')
        yield self.admin("-V", "shop", "declare", "exchange", "name=sales", "type=topic", "durable=true")
        yield self.admin("-V", "shop", "declare", "binding", "source=sales", "destination=orders",
                         "routing_key=order.#")
        yield self.admin("-V", "shop", "declare", "policy", "name=ttl", "pattern=^orders$",
                         'definition={"message-ttl": 60000}', "apply-to=queues")
        path = self.mktemp()
        out = yield self.admin("export", path)
        self.assertIn("Exported definitions", out)
        with open(path) as exported:
            definitions = json.load(exported)
        self.assertIn({"name": "orders", "vhost": "shop", "durable": True, "auto_delete": False,
                       "arguments": {"x-max-length": 100}, "type": "classic"},
                      [{key: queue.get(key) for key in ("name", "vhost", "durable", "auto_delete", "arguments", "type")}
                       for queue in definitions["queues"]])
        other = ManagementBroker()
        yield other.start()
        self.addCleanup(other.stop)
        script = rabbitmqadmin()
        assert script is not None
        out, err, code = yield getProcessOutputAndValue(
            sys.executable, [script, "-H", "127.0.0.1", "-P", str(other.http_port), "import", path],
            env=dict(os.environ), reactor=reactor,
        )
        self.assertEqual(code, 0, f"rabbitmqadmin import failed: {out!r} {err!r}")
        self.assertIn(b"Uploaded definitions", out)
        vhost = other.factory.broker.vhosts["shop"]
        self.assertEqual(vhost.queues["orders"].arguments, {"x-max-length": 100})
        self.assertEqual(vhost.queues["orders"].policy, "ttl")
        self.assertEqual(vhost.exchanges["sales"].kind, "topic")
        self.assertEqual([binding.routing_key for binding in vhost.queues["orders"].bindings], ["order.#"])
        self.assertIn("clerk", other.node.database.users)

    @inlineCallbacks
    def test_overview_and_nodes(self) -> Any:
        out = yield self.admin("-f", "raw_json", "show", "overview")
        (overview,) = json.loads(out)
        self.assertEqual(overview["node"], self.broker.node.name)
        out = yield self.admin("-f", "raw_json", "list", "nodes", "name")
        self.assertEqual(json.loads(out), [{"name": self.broker.node.name}])


class Pyrabbit2Tests(TestCase):
    """pyrabbit2 from PyPI (a thread: it is a blocking client)."""

    skip = None if pyrabbit2 is not None else "pyrabbit2 is not installed (pip install '.[test]')"

    @inlineCallbacks
    def setUp(self) -> Any:
        self.broker = ManagementBroker()
        yield self.broker.start()
        self.addCleanup(self.broker.stop)
        self.client = pyrabbit2.Client(f"127.0.0.1:{self.broker.http_port}", "guest", "guest", timeout=10)

    @inlineCallbacks
    def test_queue_round_trip(self) -> Any:
        client = self.client
        alive = yield deferToThread(client.is_alive)
        self.assertTrue(alive)
        yield deferToThread(client.create_queue, "/", "orders", durable=False)
        yield deferToThread(client.create_exchange, "/", "shop", "direct")
        yield deferToThread(client.create_binding, "/", "shop", "orders", "new")
        routed = yield deferToThread(client.publish, "/", "shop", "new", "order 1")
        self.assertTrue(routed)
        queues = yield deferToThread(client.get_queues, "/", "ord")
        self.assertEqual([queue["name"] for queue in queues], ["orders"])
        depth = yield deferToThread(client.get_queue_depth, "/", "orders")
        self.assertEqual(depth, 1)
        messages = yield deferToThread(client.get_messages, "/", "orders", count=1, requeue=False)
        self.assertEqual([message["payload"] for message in messages], ["order 1"])
        bindings = yield deferToThread(client.get_queue_bindings, "/", "orders")
        self.assertEqual(sorted(binding["source"] for binding in bindings), ["", "shop"])
        overview = yield deferToThread(client.get_overview)
        self.assertEqual(overview["object_totals"]["queues"], 2)  # orders and aliveness-test
        yield deferToThread(client.delete_binding, "/", "shop", "orders", "new")
        bindings = yield deferToThread(client.get_queue_bindings, "/", "orders")
        self.assertEqual([binding["source"] for binding in bindings], [""])
        yield deferToThread(client.delete_queue, "/", "orders")
        queues = yield deferToThread(client.get_queues, "/")
        self.assertNotIn("orders", [queue["name"] for queue in queues])


class FlowerTests(ManagementTestCase):
    """celery flower's broker view: its RabbitMQ broker module lists the
    queues of the broker's management API (``flower --broker-api=URL``)."""

    skip = None if FlowerBroker is not None else "flower is not installed (pip install '.[tools]')"

    def flower_queues(self, broker_url: str, names: list[str]) -> Any:
        """What flower's broker module answers for *names* (in a thread: it runs its own event loop)."""
        assert FlowerBroker is not None
        api = f"http://guest:guest@127.0.0.1:{self.broker.http_port}/api/"
        return deferToThread(lambda: asyncio.run(FlowerBroker(broker_url, api).queues(names)))

    @inlineCallbacks
    def test_the_broker_view_lists_this_brokers_queues(self) -> Any:
        yield self.broker.request("PUT", "/api/queues/%2F/celery", {"durable": True})
        yield self.broker.request("PUT", "/api/queues/%2F/other", {})
        for number in range(2):
            yield self.broker.request("POST", "/api/exchanges/%2F/amq.default/publish", {
                "routing_key": "celery", "payload": f"task {number}", "payload_encoding": "string",
                "properties": {}})
        url = f"amqp://guest:guest@127.0.0.1:{self.broker.amqp_port}//"
        queues = yield self.flower_queues(url, ["celery", "missing"])
        self.assertEqual([(queue["name"], queue["messages"]) for queue in queues], [("celery", 2)])
        self.assertEqual(queues[0]["messages_ready"], 2)
        queues = yield self.flower_queues(f"amqp://guest:guest@127.0.0.1:{self.broker.amqp_port}/", ["other"])
        self.assertEqual([queue["name"] for queue in queues], ["other"])
