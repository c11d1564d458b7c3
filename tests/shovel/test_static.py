"""Static shovels: the ``shovels`` of the definitions file the broker starts with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import TestCase

from tests.broker.test_restart import BrokerProcessTestCase
from tests.management.support import ManagementBroker
from txamqp09.links.uri import LocalAddress
from txamqp09.shovel.definition import static_shovels
from txamqp09.shovel.service import ShovelService
from txamqp09.testing.waiting import acknowledged_messages, eventually

#: A static shovel from queue ``in`` to queue ``out`` of the broker it runs in.
MOVER = {"src-uri": "amqp://", "src-queue": "in", "dest-uri": "amqp://", "dest-queue": "out",
         "dest-add-forward-headers": True, "reconnect-delay": 0.1}


class StaticShovelProcessTests(BrokerProcessTestCase):
    """``twistd amqp09 --definitions FILE`` with a static shovel."""

    @inlineCallbacks
    def test_a_static_shovel_moves_messages_from_the_start(self) -> Any:
        definitions = Path(self.mktemp()).absolute()
        definitions.write_text(json.dumps({
            "users": [{"name": "guest", "password": "guest", "tags": "administrator"}],
            "vhosts": [{"name": "/"}],
            "permissions": [{"user": "guest", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}],
            "shovels": {"mover": MOVER},
        }), encoding="utf-8")
        broker = yield self.started(self.mktemp(), "--definitions", str(definitions))
        channel = yield self.channel(broker)
        for queue in ("in", "out"):
            yield channel.queue_declare(queue, durable=True)
        for number in range(10):
            channel.basic_publish(b"%d" % number, routing_key="in")
        messages = yield acknowledged_messages(channel, "out", 10, reactor)
        self.assertEqual([message.body for message in messages], [b"%d" % n for n in range(10)])
        (table,) = messages[0].headers["x-shovelled"]
        self.assertEqual((table["shovel-type"], table["shovel-name"], "shovel-vhost" in table),
                         (b"static", b"mover", False))
        self.assertNotIn(b"not applied", broker.output)


class StaticShovelApiTests(TestCase):
    """What the API shows of a static shovel, and what it cannot do to it."""

    @inlineCallbacks
    def setUp(self) -> Any:
        self.broker = ManagementBroker()
        yield self.broker.start()
        self.addCleanup(self.broker.stop)
        self.service = ShovelService(
            self.broker.factory.config, reactor, self.local, static=static_shovels({"mover": MOVER})
        )
        self.broker.node.shovels = self.service
        self.service.startService()
        self.addCleanup(self.service.stopService)

    def local(self) -> Optional[LocalAddress]:
        return LocalAddress("127.0.0.1", self.broker.amqp_port, self.broker.factory.security.direct_login)

    @inlineCallbacks
    def test_listed_for_administrators_and_neither_restarted_nor_deleted(self) -> Any:
        @inlineCallbacks
        def running() -> Any:
            answer = yield self.broker.request("GET", "/api/shovels")
            return answer.body if answer.body and answer.body[0]["state"] == "running" else None

        (row,) = yield eventually(running, reactor, what="the static shovel running")
        self.assertEqual((row["name"], row["type"], "vhost" in row), ("mover", "static", False))
        self.broker.add_user("watcher", "w", tags=("monitoring",))
        seen = yield self.broker.request("GET", "/api/shovels", user="watcher", password="w")
        self.assertEqual((seen.status, seen.body), (200, []))
        by_vhost = yield self.broker.request("GET", "/api/shovels/%2F")
        self.assertEqual(by_vhost.body, [])
        for path in ("/api/shovels/vhost/%2F/mover", "/api/shovels/vhost/%2F/mover/restart"):
            answer = yield self.broker.request("DELETE", path)
            self.assertEqual(answer.status, 404, path)
        self.assertEqual(list(self.service.static_shovels), ["mover"])
        self.assertNotIn(("shovel", "/", "mover"), self.broker.factory.config.parameters)
