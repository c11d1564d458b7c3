"""What is configured at run time survives ``kill -9`` of the broker
process: users, tags, vhosts, permissions, topic permissions, policies,
operator policies, limits and parameters, set with amqp09ctl over the API."""

from __future__ import annotations

import json
import os
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import TestCase

from tests.broker.process import BrokerProcess
from tests.management.test_ctl import run_ctl
from txamqp09.testing.rabbitmq import free_port

#: What is made at run time, as amqp09ctl commands.
CHANGES = [
    ("add_vhost", "shop", "--description", "the shop"),
    ("add_user", "ann", "s3cret"),
    ("set_user_tags", "ann", "monitoring"),
    ("-p", "shop", "set_permissions", "ann", "^ann-", ".*", ".*"),
    ("-p", "shop", "set_topic_permissions", "ann", "amq.topic", "^{username}\\.", ".*"),
    ("-p", "shop", "set_policy", "--apply-to", "queues", "cap", "^jobs", '{"max-length": 10}'),
    ("-p", "shop", "set_operator_policy", "ops", ".*", '{"message-ttl": 60000}'),
    ("-p", "shop", "set_vhost_limits", '{"max-queues": 50}'),
    ("set_user_limits", "ann", '{"max-channels": 4}'),
    ("-p", "shop", "set_parameter", "federation-upstream", "origin", '{"uri": "amqp://127.0.0.1"}'),
    ("delete_user", "guest"),
]


class KillTests(TestCase):
    """The broker runs as ``twistd amqp09 --management ...`` in a child process."""

    def start(self, data_dir: str) -> Any:
        self.http_port = free_port()
        broker = BrokerProcess(data_dir, "--management", f"tcp:{self.http_port}:interface=127.0.0.1")
        self.addCleanup(broker.kill)
        started = broker.start(reactor)
        return started.addCallback(lambda _: broker)

    def ctl(self, *arguments: str, user: str = "guest", password: str = "guest") -> Any:
        return run_ctl(f"http://127.0.0.1:{self.http_port}", os.path.abspath(self.mktemp()),
                       "-q", "--user", user, "--password", password, *arguments)

    @inlineCallbacks
    def test_runtime_configuration_survives_kill_9(self) -> Any:
        data_dir = self.mktemp()
        broker = yield self.start(data_dir)
        _, err, code = yield self.ctl("await_startup")
        self.assertEqual(code, 0, err)
        for change in CHANGES[:-1]:
            _, err, code = yield self.ctl(*change)
            self.assertEqual(code, 0, (change, err))
        # guest is deleted as the last change: ann (an administrator now) goes on.
        yield self.ctl("set_user_tags", "ann", "administrator")
        _, err, code = yield self.ctl(*CHANGES[-1], user="ann", password="s3cret")
        self.assertEqual(code, 0, err)
        out, _, _ = yield self.ctl("export_definitions", "-", user="ann", password="s3cret")
        before = json.loads(out)
        yield broker.kill()

        broker = yield self.start(data_dir)
        _, _, code = yield self.ctl("await_startup", user="ann", password="s3cret")
        self.assertEqual(code, 0)
        out, _, code = yield self.ctl("export_definitions", "-", user="ann", password="s3cret")
        self.assertEqual(code, 0)
        after = json.loads(out)
        self.assertEqual(after, before)
        self.assertEqual([user["name"] for user in after["users"]], ["ann"])
        self.assertEqual({p["name"] for p in after["policies"]}, {"cap"})
        self.assertIn({"vhost": "shop", "component": "operator_policy", "name": "ops", "value": {
            "pattern": ".*", "apply-to": "all", "definition": {"message-ttl": 60000}, "priority": 0}},
            after["parameters"])
        self.assertIn({"vhost": "shop", "component": "vhost-limits", "name": "limits", "value": {"max-queues": 50}},
                      after["parameters"])
        self.assertEqual(after["users"][0]["limits"], {"max-channels": 4})
        self.assertEqual(after["topic_permissions"], [{"user": "ann", "vhost": "shop", "exchange": "amq.topic",
                                                       "write": "^{username}\\.", "read": ".*"}])
        _, err, code = yield self.ctl("list_users")
        self.assertEqual((code, err), (1, "Error: 401 Login failed\n"))  # guest is gone
        yield broker.stop()
