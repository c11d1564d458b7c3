"""The configuration endpoints: users, vhosts, permissions, topic
permissions, policies, operator policies, parameters, limits, definitions."""

from __future__ import annotations

from typing import Any

import pika
from twisted.internet.defer import inlineCallbacks
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from tests.management.support import ManagementBroker


class ConfigApiTests(TestCase):
    """Changes through the API, as RabbitMQ answers them."""

    @inlineCallbacks
    def setUp(self) -> Any:
        self.broker = ManagementBroker()
        yield self.broker.start()
        self.addCleanup(self.broker.stop)
        self.config = self.broker.factory.config

    def request(self, *args: Any, **kwargs: Any) -> Any:
        return self.broker.request(*args, **kwargs)

    def connect(self, user: str, password: str, vhost: str = "/") -> pika.BlockingConnection:
        parameters = pika.ConnectionParameters(
            "127.0.0.1", self.broker.amqp_port, vhost, pika.PlainCredentials(user, password),
        )
        return pika.BlockingConnection(parameters)

    @inlineCallbacks
    def test_user_lifecycle_and_login_over_amqp_and_http(self) -> Any:
        answer = yield self.request("PUT", "/api/users/ann", {"password": "s3cret", "tags": "monitoring,management"})
        self.assertEqual(answer.status, 201)
        answer = yield self.request("GET", "/api/users/ann")
        self.assertEqual(answer.body["tags"], ["monitoring", "management"])
        self.assertEqual(answer.body["hashing_algorithm"], "rabbit_password_hashing_sha256")
        self.assertEqual(set(answer.body), {"name", "password_hash", "hashing_algorithm", "tags", "limits"})
        answer = yield self.request("GET", "/api/whoami", user="ann", password="s3cret")
        self.assertEqual(answer.body["name"], "ann")
        answer = yield self.request("GET", "/api/users/without-permissions")
        self.assertEqual([user["name"] for user in answer.body], ["ann"])
        answer = yield self.request("PUT", "/api/permissions/%2F/ann", {"configure": ".*", "write": ".*", "read": ".*"})
        self.assertEqual(answer.status, 201)
        connection = yield deferToThread(self.connect, "ann", "s3cret")
        yield deferToThread(connection.close)
        # A hash moved from RabbitMQ: the password "guest" hashed with SHA-256.
        answer = yield self.request("PUT", "/api/users/ann", {
            "password_hash": "4TqYI4RxD8ZMT+U8Ws8hwMsTdfWGR8J8rn+8dfM5uFXu/lyx",
            "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": []})
        self.assertEqual(answer.status, 204)
        self.assertFalse(self.config.database.users["ann"].password_hash.verify("s3cret"))
        answer = yield self.request("DELETE", "/api/users/ann")
        self.assertEqual(answer.status, 204)
        answer = yield self.request("GET", "/api/users/ann")
        self.assertEqual((answer.status, answer.body), (404, {"error": "Object Not Found", "reason": "Not Found"}))

    @inlineCallbacks
    def test_vhost_lifecycle_and_deleting_closes_its_connections(self) -> Any:
        answer = yield self.request("PUT", "/api/vhosts/shop", {"description": "the shop", "tags": ["prod"]})
        self.assertEqual(answer.status, 201)
        answer = yield self.request("GET", "/api/vhosts/shop")
        self.assertEqual((answer.body["description"], answer.body["tags"]), ("the shop", ["prod"]))
        yield self.request("PUT", "/api/permissions/shop/guest", {"configure": ".*", "write": ".*", "read": ".*"})
        connection = yield deferToThread(self.connect, "guest", "guest", "shop")
        channel = yield deferToThread(connection.channel)
        yield deferToThread(channel.queue_declare, "orders", durable=True)
        self.assertIn("orders", self.broker.factory.broker.vhosts["shop"].queues)
        lost = [c for c in self.broker.factory.connections if c.vhost == "shop"][0].whenLost()
        answer = yield self.request("DELETE", "/api/vhosts/shop")
        self.assertEqual(answer.status, 204)
        yield lost
        self.assertNotIn("shop", self.broker.factory.broker.vhosts)
        self.assertNotIn(("guest", "shop"), self.config.database.permissions)
        answer = yield self.request("GET", "/api/vhosts/shop")
        self.assertEqual(answer.status, 404)

    @inlineCallbacks
    def test_policy_applies_to_existing_and_new_queues(self) -> Any:
        vhost = self.broker.factory.broker.vhosts["/"]
        connection = yield deferToThread(self.connect, "guest", "guest")
        self.addCleanup(deferToThread, connection.close)
        channel = yield deferToThread(connection.channel)
        yield deferToThread(channel.queue_declare, "jobs.a")
        for n in range(5):
            yield deferToThread(channel.basic_publish, "", "jobs.a", b"m%d" % n)
        yield deferToThread(channel.queue_declare, "jobs.a", passive=True)  # a round trip: the publishes arrived
        answer = yield self.request("PUT", "/api/policies/%2F/cap", {
            "pattern": "^jobs\\.", "definition": {"max-length": 2}, "apply-to": "queues", "priority": 3})
        self.assertEqual(answer.status, 201)
        self.assertEqual(vhost.queues["jobs.a"].message_count, 2)
        yield deferToThread(channel.queue_declare, "jobs.b")
        self.assertEqual(vhost.queues["jobs.b"].policy, "cap")
        answer = yield self.request("GET", "/api/policies/%2F")
        self.assertEqual(answer.body, [{"vhost": "/", "name": "cap", "pattern": "^jobs\\.", "apply-to": "queues",
                                        "definition": {"max-length": 2}, "priority": 3}])
        answer = yield self.request("PUT", "/api/operator-policies/%2F/ops", {
            "pattern": ".*", "definition": {"max-length": 1}})
        self.assertEqual(answer.status, 201)
        self.assertEqual(vhost.queues["jobs.a"].message_count, 1)
        self.assertEqual(vhost.queues["jobs.a"].effective_policy, {"max-length": 1})
        answer = yield self.request("DELETE", "/api/policies/%2F/cap")
        self.assertEqual(answer.status, 204)
        self.assertIsNone(vhost.queues["jobs.b"].policy)

    @inlineCallbacks
    def test_bad_input_is_refused_and_nothing_changes(self) -> Any:
        before = self.config.export()
        cases = [
            ("PUT", "/api/policies/%2F/p", None, b"{not json", 400, {"error": "bad_request", "reason": "not_json"}),
            ("PUT", "/api/policies/%2F/p", {"pattern": ".*", "definition": {"max-lenght": 1}}, None, 400,
             {"error": "bad_request",
              "reason": 'Validation failed\n\npolicy: [<<"max-lenght">>] are not recognised policy settings\n'}),
            ("PUT", "/api/policies/%2F/p", {"pattern": ".*", "definition": {"message-ttl": -5}}, None, 400, None),
            ("PUT", "/api/policies/%2F/p", {"pattern": "(", "definition": {"message-ttl": 5}}, None, 400, None),
            ("PUT", "/api/policies/%2F/p", {"definition": {"message-ttl": 5}}, None, 400,
             {"error": "bad_request", "reason": "[{key_missing,pattern}]"}),
            ("PUT", "/api/policies/nowhere/p", {"pattern": ".*", "definition": {"message-ttl": 5}}, None, 404,
             {"error": "not_found", "reason": "vhost_not_found"}),
            ("PUT", "/api/vhosts/" + "v" * 256, {}, None, 400, None),
            ("PUT", "/api/vhosts/v", {"colour": "blue"}, None, 400, None),
            ("PUT", "/api/users/u", {"password": "p", "admin": True}, None, 400, None),
            ("PUT", "/api/permissions/%2F/guest", {"configure": "(", "write": "", "read": ""}, None, 400, None),
            ("PUT", "/api/permissions/nowhere/guest", {"configure": "", "write": "", "read": ""}, None, 404,
             {"error": "not_found", "reason": "vhost_not_found"}),
            ("PUT", "/api/vhost-limits/%2F/max-queues", {"value": "ten"}, None, 400, None),
            ("PUT", "/api/vhost-limits/%2F/max-bananas", {"value": 1}, None, 400, None),
            ("POST", "/api/definitions", {"vhosts": [{"name": "new"}],
                                          "policies": [{"vhost": "new", "name": "p", "pattern": ".*",
                                                        "definition": {"bogus": 1}}]}, None, 400, None),
        ]
        for method, path, body, raw, status, expected in cases:
            answer = yield self.request(method, path, body, raw=raw)
            self.assertEqual(answer.status, status, (method, path, answer))
            self.assertEqual(set(answer.body), {"error", "reason"}, (method, path))
            if expected is not None:
                self.assertEqual(answer.body, expected)
        self.assertEqual(self.config.export(), before)

    @inlineCallbacks
    def test_limits_parameters_and_topic_permissions(self) -> Any:
        answer = yield self.request("PUT", "/api/vhost-limits/%2F/max-queues", {"value": 10})
        self.assertEqual(answer.status, 204)
        answer = yield self.request("GET", "/api/vhost-limits")
        self.assertEqual(answer.body, [{"vhost": "/", "value": {"max-queues": 10}}])
        self.assertEqual(self.broker.factory.broker.vhosts["/"].max_queues, 10)
        yield self.request("PUT", "/api/user-limits/guest/max-channels", {"value": 4})
        answer = yield self.request("GET", "/api/user-limits/guest")
        self.assertEqual(answer.body, [{"user": "guest", "value": {"max-channels": 4}}])
        answer = yield self.request("DELETE", "/api/vhost-limits/%2F/max-queues")
        self.assertEqual(answer.status, 204)
        self.assertIsNone(self.broker.factory.broker.vhosts["/"].max_queues)
        answer = yield self.request("PUT", "/api/parameters/federation-upstream/%2F/up", {"value": {"uri": "amqp://"}})
        self.assertEqual(answer.status, 201)
        answer = yield self.request("GET", "/api/parameters/federation-upstream")
        self.assertEqual(answer.body, [{"vhost": "/", "component": "federation-upstream", "name": "up",
                                        "value": {"uri": "amqp://"}}])
        answer = yield self.request("PUT", "/api/topic-permissions/%2F/guest",
                                    {"exchange": "amq.topic", "write": "^a\\.", "read": ".*"})
        self.assertEqual(answer.status, 201)
        answer = yield self.request("GET", "/api/topic-permissions")
        self.assertEqual(answer.body, [{"user": "guest", "vhost": "/", "exchange": "amq.topic",
                                        "write": "^a\\.", "read": ".*"}])

    @inlineCallbacks
    def test_definitions_export_and_import_round_trip(self) -> Any:
        yield self.request("PUT", "/api/vhosts/shop", {})
        yield self.request("PUT", "/api/policies/shop/ttl", {"pattern": "^q", "definition": {"message-ttl": 100}})
        self.broker.factory.broker.vhosts["shop"].declare_queue("q1", None, durable=True,  # type: ignore[arg-type]
                                                                 arguments={"x-max-length": 10})
        exported = yield self.request("GET", "/api/definitions")
        self.assertEqual(exported.status, 200)
        self.assertEqual([q["name"] for q in exported.body["queues"]], ["q1"])
        self.assertEqual(exported.body["queues"][0]["arguments"], {"x-max-length": 10})
        yield self.request("DELETE", "/api/vhosts/shop")
        answer = yield self.request("POST", "/api/definitions", exported.body)
        self.assertEqual(answer.status, 204)
        again = yield self.request("GET", "/api/definitions")
        self.assertEqual(again.body, exported.body)
        self.assertEqual(self.broker.factory.broker.vhosts["shop"].queues["q1"].policy, "ttl")
        one = yield self.request("GET", "/api/definitions/shop")
        self.assertEqual(set(one.body), {"rabbit_version", "rabbitmq_version", "product_name", "product_version",
                                         "policies", "parameters", "queues", "exchanges", "bindings"})
        self.assertNotIn("vhost", one.body["queues"][0])
