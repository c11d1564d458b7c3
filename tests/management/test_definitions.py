"""Definitions exported by RabbitMQ 3.10 and by this broker import and
export again with nothing lost."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from twisted.internet.defer import inlineCallbacks
from twisted.internet.threads import deferToThread

from tests.management.test_config_api import ConfigTestCase
from txamqp09.broker.auth.definitions import pairs_to_object
from txamqp09.testing.rabbitmq import CLI_USER, RabbitMQ, erlang_term, rabbitmq_missing

#: ``rabbitmqctl export_definitions`` of a RabbitMQ 3.10.8 node holding a
#: vhost with limits, a user with tags and limits, permissions, topic
#: permissions, policies, an operator policy, classic, quorum and stream
#: queues with arguments, exchanges (one with an alternate exchange) and
#: bindings (to queues and to an exchange, one with arguments).
RABBITMQ_EXPORT = Path(__file__).with_name("rabbitmq-3.10-definitions.json")


def _keyed(entries: list[dict[str, Any]], *fields: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    return {tuple(json.dumps(entry.get(name), sort_keys=True) for name in fields): entry for entry in entries}


def _objects(value: Any) -> Any:
    """*value* with RabbitMQ's lists of ``[key, value]`` pairs as objects."""
    if isinstance(value, dict):
        return {key: _objects(item) for key, item in value.items()}
    return pairs_to_object(value)


class DefinitionsRoundTripTests(ConfigTestCase):
    """Import, then export: what the file held is there, in RabbitMQ's format."""

    def assertHolds(self, exported: dict[str, Any], original: dict[str, Any]) -> None:
        """Every entry of *original* is in *exported*, with the same fields
        (less RabbitMQ's pair lists, which come back as objects)."""
        keys = {
            "users": ("name",), "permissions": ("user", "vhost"), "topic_permissions": ("user", "vhost", "exchange"),
            "policies": ("vhost", "name"), "queues": ("vhost", "name"), "exchanges": ("vhost", "name"),
            "bindings": ("vhost", "source", "destination", "destination_type", "routing_key", "arguments"),
            "parameters": ("vhost", "component", "name"), "vhosts": ("name",),
        }
        for section, fields in keys.items():
            ours = _keyed(exported[section], *fields)
            for key, entry in _keyed(original.get(section, []), *fields).items():
                self.assertIn(key, ours, f"{section} {key} missing")
                for name, value in entry.items():
                    self.assertEqual(ours[key].get(name), _objects(value), f"{section} {key} {name}")

    @inlineCallbacks
    def test_rabbitmq_export_imports_and_exports_again(self) -> Any:
        original = json.loads(RABBITMQ_EXPORT.read_text())
        answer = yield self.broker.request("POST", "/api/definitions", original)
        self.assertEqual(answer.status, 204, answer)
        shop = self.broker.factory.broker.vhosts["shop"]
        self.assertEqual(shop.queues["jobs.a"].policy, "cap")
        self.assertEqual(shop.queues["jobs.a"].operator_policy, "ops")
        self.assertEqual(shop.queues["jobs.a"].max_length, 100)
        self.assertEqual(shop.queues["orders"].settings.dead_letter_exchange, "dead")
        self.assertEqual(shop.queues["quorum.q"].settings.queue_type, "quorum")
        self.assertEqual(shop.exchanges["logs"].alternate, "dead")
        self.assertEqual(shop.max_queues, 200)
        database = self.config.database
        self.assertEqual(database.limit("user", "ann", "max-channels"), 20)
        self.assertEqual(database.users["ann"].tags, ("monitoring", "policymaker"))
        exported = yield self.broker.request("GET", "/api/definitions")
        self.assertHolds(exported.body, original)
        # And this broker's own export round-trips exactly.
        again = yield self.broker.request("POST", "/api/definitions", exported.body)
        self.assertEqual(again.status, 204)
        second = yield self.broker.request("GET", "/api/definitions")
        self.assertEqual(second.body, exported.body)

    @inlineCallbacks
    def test_a_live_rabbitmq_export_round_trips(self) -> Any:
        if rabbitmq_missing():
            raise self.skipTest(rabbitmq_missing())
        node = RabbitMQ(tempfile.mkdtemp())
        yield deferToThread(node.start)
        self.addCleanup(deferToThread, node.stop)
        # What rabbitmqctl's add_vhost, add_user, set_permissions, set_policy,
        # set_user_limits, set_topic_permissions and export_definitions call.
        for call in (("rabbit_vhost", "add", "live", CLI_USER),
                     ("rabbit_auth_backend_internal", "add_user", "bob", "pw", CLI_USER),
                     ("rabbit_auth_backend_internal", "set_permissions", "bob", "live", ".*", "", "^in$", CLI_USER),
                     ("rabbit_policy", "parse_set", "live", "ttl", "^t", '{"message-ttl": 5000, "expires": 60000}',
                      0, "all", CLI_USER),
                     ("rabbit_auth_backend_internal", "set_user_limits", "bob", '{"max-connections": 3}', CLI_USER),
                     ("rabbit_auth_backend_internal", "set_topic_permissions", "bob", "live", "amq.topic", "^x", "^y",
                      CLI_USER)):
            yield deferToThread(node.call, *call)
        path = str(Path(tempfile.mkdtemp(), "export.json"))
        yield deferToThread(
            node.evaluate,
            f"file:write_file({erlang_term(path)}, rabbit_json:encode(rabbit_definitions:all_definitions())).",
        )
        original = json.loads(Path(path).read_text())
        answer = yield self.broker.request("POST", "/api/definitions", original)
        self.assertEqual(answer.status, 204, answer)
        exported = yield self.broker.request("GET", "/api/definitions")
        self.assertHolds(exported.body, original)
        self.assertTrue(self.config.database.users["bob"].password_hash.verify("pw"))
