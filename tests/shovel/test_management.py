"""``/api/shovels``, the restart and delete endpoints and ``amqp09ctl``'s
shovel_status, restart_shovel and delete_shovel."""

from __future__ import annotations

import json
import os
from typing import Any, Optional

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import TestCase

from tests.management.support import ManagementBroker
from tests.management.test_ctl import run_ctl
from txamqp09.links.uri import LocalAddress
from txamqp09.shovel.service import ShovelService
from txamqp09.testing.broker import LoopbackBroker
from txamqp09.testing.waiting import eventually

#: RabbitMQ 3.10's keys of a running shovel's row in /api/shovels (queue to queue).
RUNNING_KEYS = {"node", "timestamp", "name", "vhost", "type", "state", "src_uri", "src_protocol",
                "dest_protocol", "dest_uri", "src_queue", "dest_queue"}


class ShovelApiTests(TestCase):
    """A broker with its API and a shovel service; a destination broker."""

    @inlineCallbacks
    def setUp(self) -> Any:
        self.broker = ManagementBroker()
        yield self.broker.start()
        self.addCleanup(self.broker.stop)
        self.destination = LoopbackBroker()
        self.destination.start()
        self.addCleanup(self.destination.stop)
        self.service = ShovelService(self.broker.factory.config, reactor, self.local)
        self.broker.node.shovels = self.service
        self.service.startService()
        self.addCleanup(self.service.stopService)
        self.secret_uri = f"amqp://guest:guest@127.0.0.1:{self.destination.port}/%2F"

    def local(self) -> Optional[LocalAddress]:
        return LocalAddress("127.0.0.1", self.broker.amqp_port)

    def shovels(self, path: str = "/api/shovels") -> Any:
        return self.broker.request("GET", path)

    @inlineCallbacks
    def running(self) -> Any:
        @inlineCallbacks
        def look() -> Any:
            answer = yield self.shovels()
            return answer if answer.body and answer.body[0]["state"] == "running" else None

        answer = yield eventually(look, reactor, what="the shovel running")
        return answer

    @inlineCallbacks
    def test_status_restart_and_redaction(self) -> Any:
        value = {"src-uri": "amqp://", "src-queue": "a", "dest-uri": self.secret_uri, "dest-queue": "b"}
        answer = yield self.broker.request("PUT", "/api/parameters/shovel/%2F/s1", {"value": value})
        self.assertEqual(answer.status, 201)
        answer = yield self.running()
        (row,) = answer.body
        self.assertEqual(set(row), RUNNING_KEYS)
        self.assertEqual((row["node"], row["name"], row["vhost"], row["type"], row["src_uri"], row["dest_uri"]),
                         (self.broker.node.name, "s1", "/", "dynamic", "amqp://",
                          f"amqp://127.0.0.1:{self.destination.port}/%2F"))
        self.assertNotIn(b"guest", answer.raw)
        by_vhost = yield self.shovels("/api/shovels/%2F")
        self.assertEqual([r["name"] for r in by_vhost.body], ["s1"])
        missing = yield self.shovels("/api/shovels/nosuch")
        self.assertEqual(missing.status, 404)
        restarted = yield self.broker.request("DELETE", "/api/shovels/vhost/%2F/s1/restart")
        self.assertEqual(restarted.status, 204)
        yield self.running()
        unknown = yield self.broker.request("DELETE", "/api/shovels/vhost/%2F/nope/restart")
        self.assertEqual((unknown.status, unknown.body), (404, {"error": "Object Not Found", "reason": "Not Found"}))

    @inlineCallbacks
    def test_ctl_set_parameter_and_shovel_status(self) -> Any:
        home = os.path.abspath(self.mktemp())
        value = json.dumps({"src-uri": "amqp://", "src-queue": "a", "dest-uri": self.secret_uri, "dest-queue": "b"})
        _, err, code = yield run_ctl(self.broker.url, home, "set_parameter", "shovel", "s2", value)
        self.assertEqual(code, 0)
        self.assertIn('"dest-uri": "amqp://guest:***@127.0.0.1:', err)
        yield self.running()
        out, err, code = yield run_ctl(self.broker.url, home, "-q", "shovel_status")
        self.assertEqual((code, err), (0, ""))
        header, line = out.splitlines()
        self.assertEqual(header.split(), ["name", "vhost", "type", "state", "source", "destination",
                                          "termination_reason"])
        self.assertEqual(line.split(), ["s2", "/", "dynamic", "running", "amqp://",
                                        f"amqp://127.0.0.1:{self.destination.port}/%2F"])
        _, err, code = yield run_ctl(self.broker.url, home, "set_parameter", "shovel", "bad", '{"src-uri": "x"}')
        self.assertEqual(code != 0, True)
        self.assertIn("Must specify 'src-exchange' or 'src-queue'", err)

    @inlineCallbacks
    def test_delete_endpoint_clears_the_parameter(self) -> Any:
        value = {"src-uri": "amqp://", "src-queue": "a", "dest-uri": self.secret_uri, "dest-queue": "b"}
        yield self.broker.request("PUT", "/api/parameters/shovel/%2F/s1", {"value": value})
        yield self.running()
        deleted = yield self.broker.request("DELETE", "/api/shovels/vhost/%2F/s1")
        self.assertEqual(deleted.status, 204)
        self.assertEqual(self.service.shovels, {})
        parameter = yield self.broker.request("GET", "/api/parameters/shovel/%2F/s1")
        self.assertEqual(parameter.status, 404)
        again = yield self.broker.request("DELETE", "/api/shovels/vhost/%2F/s1")
        self.assertEqual((again.status, again.body), (404, {"error": "Object Not Found", "reason": "Not Found"}))

    @inlineCallbacks
    def test_ctl_restart_and_delete_shovel(self) -> Any:
        """rabbitmqctl's texts (its shovel plugin's commands)."""
        home = os.path.abspath(self.mktemp())
        value = {"src-uri": "amqp://", "src-queue": "a", "dest-uri": self.secret_uri, "dest-queue": "b"}
        self.broker.factory.config.set_parameter("shovel", "/", "s3", value)
        yield self.running()
        node = self.broker.node.name
        _, err, code = yield run_ctl(self.broker.url, home, "restart_shovel", "s3")
        self.assertEqual((code, err), (0, f"Restarting dynamic Shovel s3 in virtual host / on node {node}\n"))
        yield self.running()
        _, err, code = yield run_ctl(self.broker.url, home, "delete_shovel", "s3")
        self.assertEqual((code, err), (0, "Deleting shovel s3 in vhost /\n"))
        self.assertNotIn(("shovel", "/", "s3"), self.broker.factory.config.parameters)
        for command in ("delete_shovel", "restart_shovel"):
            _, err, code = yield run_ctl(self.broker.url, home, "-q", command, "s3")
            self.assertEqual((code, err), (1, (
                f"Error: Shovel with the given name was not found on the target node '{node}' "
                "and / or virtual host '/'\n"
            )))
