"""Queues, exchanges, bindings, connections, channels and consumers over the API."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks

from txamqp09.broker.auth.permissions import Permissions
from txamqp09.broker.auth.users import VirtualHost
from txamqp09.client.connection import connect
from tests.management.support import ManagementTestCase


def q(name: str) -> str:
    """*name* as a path segment."""
    return quote(name, safe="")


class ObjectTests(ManagementTestCase):
    """One broker per test, a client of this project where AMQP is needed."""

    def request(self, *args: Any, **kwargs: Any) -> Any:
        return self.broker.request(*args, **kwargs)

    @inlineCallbacks
    def client(self) -> Any:
        connection = yield connect(reactor, f"amqp://guest:guest@127.0.0.1:{self.broker.amqp_port}/")
        self.addCleanup(lambda: connection.disconnect() if connection.state.name == "OPEN" else None)
        return connection

    # -- queues ------------------------------------------------------------------

    @inlineCallbacks
    def test_declare_list_and_delete_a_queue(self) -> Any:
        answer = yield self.request("PUT", "/api/queues/%2F/work", {"durable": True, "arguments": {"x-max-length": 10}})
        self.assertEqual(answer.status, 201)
        answer = yield self.request("PUT", "/api/queues/%2F/work", {"durable": True, "arguments": {"x-max-length": 10}})
        self.assertEqual(answer.status, 204)
        answer = yield self.request("PUT", "/api/queues/%2F/work", {"durable": False})
        self.assertEqual(answer.status, 400)
        self.assertEqual(answer.body["error"], "bad_request")
        self.assertIn("inequivalent arg 'durable'", answer.body["reason"])
        answer = yield self.request("GET", "/api/queues")
        (queue,) = answer.body
        self.assertEqual(
            {key: queue[key] for key in ("name", "vhost", "durable", "arguments", "messages", "type")},
            {"name": "work", "vhost": "/", "durable": True, "arguments": {"x-max-length": 10}, "messages": 0,
             "type": "classic"},
        )
        answer = yield self.request("DELETE", "/api/queues/%2F/work")
        self.assertEqual(answer.status, 204)
        answer = yield self.request("GET", "/api/queues/%2F/work")
        self.assertEqual((answer.status, answer.body), (404, {"error": "Object Not Found", "reason": "Not Found"}))

    @inlineCallbacks
    def test_publish_get_and_purge(self) -> Any:
        yield self.request("PUT", "/api/queues/%2F/q", {})
        for payload in ["first", "second"]:
            answer = yield self.request("POST", "/api/exchanges/%2F/amq.default/publish", {
                "routing_key": "q", "payload": payload, "payload_encoding": "string",
                "properties": {"headers": {"h": "v"}, "content_type": "text/plain"},
            })
            self.assertEqual((answer.status, answer.body), (200, {"routed": True}))
        answer = yield self.request("POST", "/api/exchanges/%2F/amq.default/publish", {
            "routing_key": "nowhere", "payload": "", "payload_encoding": "string", "properties": {}})
        self.assertEqual(answer.body, {"routed": False})
        answer = yield self.request("POST", "/api/queues/%2F/q/get", {
            "count": 1, "ackmode": "ack_requeue_true", "encoding": "auto", "truncate": 3})
        self.assertEqual(answer.body, [{
            "payload_bytes": 5, "redelivered": False, "exchange": "", "routing_key": "q", "message_count": 1,
            "properties": {"headers": {"h": "v"}, "content_type": "text/plain"}, "payload": "fir",
            "payload_encoding": "string"}])
        answer = yield self.request("POST", "/api/queues/%2F/q/get", {
            "count": 5, "ackmode": "reject_requeue_false", "encoding": "base64"})
        self.assertEqual([(m["payload"], m["redelivered"]) for m in answer.body],
                         [("Zmlyc3Q=", True), ("c2Vjb25k", False)])
        answer = yield self.request("GET", "/api/queues/%2F/q")
        self.assertEqual(answer.body["messages"], 0)
        yield self.request("POST", "/api/exchanges/%2F/amq.default/publish", {
            "routing_key": "q", "payload": "aGk=", "payload_encoding": "base64", "properties": {}})
        answer = yield self.request("DELETE", "/api/queues/%2F/q/contents")
        self.assertEqual(answer.status, 204)
        self.assertEqual(self.broker.factory.broker.vhosts["/"].queues["q"].message_count, 0)

    @inlineCallbacks
    def test_delete_if_empty_and_if_unused(self) -> Any:
        yield self.request("PUT", "/api/queues/%2F/q", {})
        yield self.request("POST", "/api/exchanges/%2F/amq.default/publish", {
            "routing_key": "q", "payload": "x", "payload_encoding": "string", "properties": {}})
        answer = yield self.request("DELETE", "/api/queues/%2F/q?if-empty=true")
        self.assertEqual(answer.status, 400)
        self.assertIn("not empty", answer.body["reason"])
        answer = yield self.request("DELETE", "/api/queues/%2F/q?if-unused=true")
        self.assertEqual(answer.status, 204)

    @inlineCallbacks
    def test_bad_input_gets_rabbitmqs_errors(self) -> Any:
        answer = yield self.request("PUT", "/api/queues/%2F/q", raw=b"{bad")
        self.assertEqual((answer.status, answer.body), (400, {"error": "bad_request", "reason": "not_json"}))
        answer = yield self.request("PUT", "/api/queues/nohost/q", {})
        self.assertEqual((answer.status, answer.body), (404, {"error": "not_found", "reason": "vhost_not_found"}))
        answer = yield self.request("GET", "/api/queues/nohost")
        self.assertEqual((answer.status, answer.body), (404, {"error": "Object Not Found", "reason": "Not Found"}))
        answer = yield self.request("PUT", "/api/queues/%2F/" + "a" * 256, {})
        self.assertEqual(
            (answer.status, answer.body),
            (400, {"error": "bad_request", "reason": "queue should be less than 255 bytes, actually was 256"}),
        )
        answer = yield self.request("GET", "/api/queues?page=1&name=(&use_regex=true")
        self.assertEqual((answer.status, answer.body),
                         (400, {"error": "bad_request", "reason": "Pagination parameters are invalid"}))
        answer = yield self.request("PUT", "/api/queues/%2F/q", {"arguments": {"x-message-ttl": -1}})
        self.assertEqual(answer.status, 400)
        self.assertIn("x-message-ttl", answer.body["reason"])
        answer = yield self.request("PUT", "/api/queues/%2F/q", {"arguments": "x"})
        self.assertEqual(answer.status, 400)
        answer = yield self.request("POST", "/api/queues/%2F/q/get", {"count": 1, "ackmode": "bogus", "encoding": "auto"})
        self.assertEqual(answer.status, 404)
        yield self.request("PUT", "/api/queues/%2F/q", {})
        answer = yield self.request("POST", "/api/queues/%2F/q/get", {"count": 1, "ackmode": "bogus", "encoding": "auto"})
        self.assertEqual(answer.status, 400)
        answer = yield self.request("POST", "/api/exchanges/%2F/amq.default/publish", {"routing_key": "q"})
        self.assertEqual(answer.status, 400)
        self.assertEqual(self.broker.factory.broker.vhosts["/"].queues["q"].message_count, 0)

    @inlineCallbacks
    def test_permissions_apply_as_on_amqp(self) -> Any:
        self.broker.add_user("mg", "p", tags=("management",))
        self.broker.database.set_permissions("mg", "/", Permissions("^mine", "^mine", "^mine"))
        answer = yield self.request("PUT", "/api/queues/%2F/other", {}, user="mg", password="p")
        self.assertEqual((answer.status, answer.body["error"]), (401, "not_authorised"))
        self.assertNotIn("other", self.broker.factory.broker.vhosts["/"].queues)
        answer = yield self.request("PUT", "/api/queues/%2F/mine", {}, user="mg", password="p")
        self.assertEqual(answer.status, 201)
        self.broker.database.add_vhost(VirtualHost("v"))
        answer = yield self.request("GET", "/api/queues/v", user="mg", password="p")
        self.assertEqual(answer.body, {"error": "not_authorised", "reason": "User not authorised to access virtual host"})

    # -- exchanges and bindings -------------------------------------------------

    @inlineCallbacks
    def test_exchanges_and_bindings(self) -> Any:
        answer = yield self.request("PUT", "/api/exchanges/%2F/logs", {"type": "topic", "durable": True})
        self.assertEqual(answer.status, 201)
        answer = yield self.request("PUT", "/api/exchanges/%2F/bad", {"type": "bogus"})
        self.assertEqual(answer.status, 400)
        yield self.request("PUT", "/api/queues/%2F/q", {})
        answer = yield self.request("POST", "/api/bindings/%2F/e/logs/q/q", {"routing_key": "a.#", "arguments": {"x": 1}})
        self.assertEqual(answer.status, 201)
        location = answer.headers["location"]
        self.assertTrue(location.startswith("q/a.%23~"), location)
        answer = yield self.request("GET", "/api/bindings/%2F/e/logs/q/q")
        (binding,) = answer.body
        self.assertEqual(binding["properties_key"], location.split("/", 1)[1])
        self.assertEqual((binding["source"], binding["destination_type"], binding["routing_key"]), ("logs", "queue", "a.#"))
        answer = yield self.request("GET", "/api/queues/%2F/q/bindings")
        self.assertEqual([b["source"] for b in answer.body], ["", "logs"])
        answer = yield self.request("POST", "/api/exchanges/%2F/logs/publish", {
            "routing_key": "a.b", "payload": "x", "payload_encoding": "string", "properties": {}})
        self.assertEqual(answer.body, {"routed": True})
        answer = yield self.request("GET", "/api/exchanges/%2F/logs/bindings/source")
        self.assertEqual(len(answer.body), 1)
        answer = yield self.request("DELETE", "/api/exchanges/%2F/logs?if-unused=true")
        self.assertEqual(answer.status, 400)
        answer = yield self.request("DELETE", "/api/bindings/%2F/e/logs/q/q/" + q(binding["properties_key"]))
        self.assertEqual(answer.status, 204)
        answer = yield self.request("DELETE", "/api/bindings/%2F/e/logs/q/q/" + q(binding["properties_key"]))
        self.assertEqual(answer.status, 404)
        answer = yield self.request("GET", "/api/exchanges/%2F/amq.default")
        self.assertEqual((answer.body["name"], answer.body["type"]), ("", "direct"))
        answer = yield self.request("DELETE", "/api/exchanges/%2F/logs?if-unused=true")
        self.assertEqual(answer.status, 204)

    # -- connections, channels, consumers ----------------------------------------

    @inlineCallbacks
    def test_connections_channels_and_consumers(self) -> Any:
        connection = yield self.client()
        channel = yield connection.channel()
        yield channel.queue_declare("jobs")
        yield channel.basic_qos(3)
        consumer = yield channel.basic_consume("jobs", lambda message: None, consumer_tag="worker")
        answer = yield self.request("GET", "/api/connections")
        (row,) = answer.body
        self.assertEqual((row["user"], row["vhost"], row["protocol"], row["channels"], row["auth_mechanism"]),
                         ("guest", "/", "AMQP 0-9-1", 1, "PLAIN"))
        self.assertEqual(row["peer_host"], "127.0.0.1")
        answer = yield self.request("GET", "/api/channels")
        (channel_row,) = answer.body
        self.assertEqual(channel_row["name"], f"{row['name']} (1)")
        self.assertEqual((channel_row["consumer_count"], channel_row["prefetch_count"]), (1, 3))
        answer = yield self.request("GET", f"/api/connections/{q(row['name'])}/channels")
        self.assertEqual([c["number"] for c in answer.body], [1])
        answer = yield self.request("GET", "/api/consumers/%2F")
        (consumer_row,) = answer.body
        self.assertEqual(
            (consumer_row["consumer_tag"], consumer_row["queue"], consumer_row["prefetch_count"],
             consumer_row["channel_details"]["name"]),
            ("worker", {"name": "jobs", "vhost": "/"}, 3, channel_row["name"]),
        )
        answer = yield self.request("GET", "/api/queues/%2F/jobs")
        self.assertEqual([c["consumer_tag"] for c in answer.body["consumer_details"]], ["worker"])
        closed = connection.whenClosed()
        answer = yield self.request("DELETE", f"/api/connections/{q(row['name'])}", headers={"X-Reason": "maintenance"})
        self.assertEqual(answer.status, 204)
        ending = yield closed
        self.assertEqual((ending.reply_code, ending.reply_text), (320, "CONNECTION_FORCED - maintenance"))
        del consumer

    @inlineCallbacks
    def test_others_connections_are_hidden_from_management_users(self) -> Any:
        yield self.client()
        self.broker.add_user("mg", "p", tags=("management",))
        answer = yield self.request("GET", "/api/connections", user="mg", password="p")
        self.assertEqual(answer.body, [])
        self.broker.add_user("mon", "p", tags=("monitoring",))
        answer = yield self.request("GET", "/api/connections", user="mon", password="p")
        self.assertEqual(len(answer.body), 1)
        answer = yield self.request("DELETE", f"/api/connections/{q(answer.body[0]['name'])}", user="mon", password="p")
        self.assertEqual((answer.status, answer.body["reason"]), (401, "Not administrator user"))

    @inlineCallbacks
    def test_churn_and_connection_bytes_are_counted(self) -> Any:
        connection = yield self.client()
        channel = yield connection.channel()
        yield channel.queue_declare("counted")
        yield channel.close()
        churn = self.broker.factory.broker.churn
        self.assertEqual(
            (churn.connection_created, churn.channel_created, churn.channel_closed, churn.queue_created),
            (1, 1, 1, 1),
        )
        (server,) = self.broker.node.connections
        self.assertGreater(server.stats.recv_oct, 8)
        self.assertGreater(server.stats.send_oct, 0)
        answer = yield self.request("GET", "/api/connections")
        self.assertEqual(answer.body[0]["recv_oct"], server.stats.recv_oct)
        answer = yield self.request("GET", "/api/overview")
        self.assertEqual(answer.body["churn_rates"]["queue_created"], 1)
        closed = connection.whenClosed()
        yield connection.disconnect()
        yield closed
        yield server.whenLost()
        self.assertEqual(churn.connection_closed, 1)
