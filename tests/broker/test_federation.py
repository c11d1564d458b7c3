"""Federation links between two brokers of this project in the test's process:
upstream checks, header rules, exchange links kept in step with bindings,
queue links that consume only while their queue wants messages."""

from __future__ import annotations

from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import ensureDeferred
from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import TestCase

from txamqp09.broker.federation.service import FederationService
from txamqp09.broker.federation.headers import binding_hops, queue_link_headers, should_forward
from txamqp09.broker.federation.links import upstream_queue_name
from txamqp09.broker.federation.upstreams import Upstream, upstream_errors, upstream_set_errors, upstreams_for
from txamqp09.broker.model.policy import PolicyError, check_definition
from txamqp09.broker.auth.users import UserDatabase
from txamqp09.broker.model import Broker, Client
from txamqp09.broker.runtime import ConfigError, RuntimeConfig
from txamqp09.client import connect
from txamqp09.testing.broker import LoopbackBroker
from txamqp09.testing.waiting import eventually


class UpstreamParameterTests(TestCase):
    """Parameter values and policies are checked with RabbitMQ's texts."""

    def test_valid_upstream(self) -> None:
        self.assertEqual(upstream_errors("up", {
            "uri": ["amqp://a", "amqps://b:5671/v"], "max-hops": 2, "ack-mode": "on-publish", "trust-user-id": True,
            "expires": 1000, "message-ttl": 10, "prefetch-count": 5}), [])

    def test_invalid_upstreams(self) -> None:
        cases = [
            ({}, 'Key "uri" not found in up'),
            ({"uri": "http://x"}, '"http://x" not a valid URI: {{unexpected_uri_scheme,"http"},"http://x"}'),
            ({"uri": "amqp://x", "max-hops": "2"}, 'max-hops should be a number, actually was <<"2">>'),
            ({"uri": "amqp://x", "ack-mode": "later"},
             'ack-mode should be one of [<<"no-ack">>,<<"on-publish">>,<<"on-confirm">>], actually was <<"later">>'),
            ({"uri": "amqp://x", "trust-user-id": 1}, "trust-user-id should be boolean, actually was 1"),
            ({"uri": "amqp://x", "colour": "red"}, 'Unrecognised terms [{<<"colour">>,<<"red">>}] in up'),
            ("amqp://x", 'up not a list <<"amqp://x">>'),
        ]
        for value, text in cases:
            self.assertEqual(upstream_errors("up", value), [text])

    def test_upstream_set(self) -> None:
        self.assertEqual(upstream_set_errors("s", [{"upstream": "a"}, {"upstream": "b", "max-hops": 3}]), [])
        self.assertEqual(upstream_set_errors("s", [{"max-hops": 3}]), ['Key "upstream" not found in s'])

    def test_policy_keys(self) -> None:
        self.assertEqual(check_definition({"federation-upstream-set": "all"}), {"federation-upstream-set": "all"})
        cases = [
            ({"federation-upstream": 3}, "3 is not a valid federation upstream name"),
            ({"federation-upstream-set": ["a"]}, "['a'] is not a valid federation upstream set name"),
            ({"federation-upstream": "a", "federation-upstream-set": "b"},
             "cannot specify federation-upstream, federation-upstream-set or federation-upstream-pattern together"),
        ]
        for definition, text in cases:
            with self.assertRaises(PolicyError) as caught:
                check_definition(definition)
            self.assertEqual(str(caught.exception), text)

    def test_upstreams_for_policies(self) -> None:
        parameters = {
            ("federation-upstream", "/", "a"): {"uri": "amqp://a", "max-hops": 2},
            ("federation-upstream", "/", "b"): {"uri": ["amqp://b1", "amqp://b2"]},
            ("federation-upstream", "other", "c"): {"uri": "amqp://c"},
            ("federation-upstream-set", "/", "s"): [{"upstream": "b", "max-hops": 4}, {"upstream": "gone"}],
        }
        self.assertEqual([u.name for u in upstreams_for({"federation-upstream-set": "all"}, "/", parameters)],
                         ["a", "b"])
        (member,) = upstreams_for({"federation-upstream-set": "s"}, "/", parameters)
        self.assertEqual((member.uris, member.max_hops, member.ack_mode, member.prefetch_count),
                         (("amqp://b1", "amqp://b2"), 4, "on-confirm", 1000))
        self.assertEqual(upstreams_for({"federation-upstream": "a"}, "/", parameters),
                         [Upstream("a", ("amqp://a",), consumer_tag="federation-link-a", max_hops=2)])
        self.assertEqual([u.name for u in upstreams_for({"federation-upstream-pattern": "^b"}, "/", parameters)], ["b"])
        self.assertEqual(upstreams_for({"federation-upstream": "c"}, "/", parameters), [])

    def test_parameters_checked_and_shown_without_credentials(self) -> None:
        config = LoopbackBroker().factory.config
        FederationService(config, reactor, "node")
        with self.assertRaises(ConfigError) as caught:
            config.set_parameter("federation-upstream", "/", "up", {"uri": "amqp://x", "max-hops": "2"})
        self.assertEqual(str(caught.exception), 'max-hops should be a number, actually was <<"2">>')
        config.set_parameter("federation-upstream", "/", "up", {"uri": ["amqp://u:secret@x/v", "amqp://y"]})
        config.set_parameter("federation-upstream-set", "/", "s", [{"upstream": "up", "uri": "amqp://u:pw@z"}])
        self.assertEqual([entry["value"] for entry in config.parameter_entries()],
                         [{"uri": ["amqp://x/v", "amqp://y"]}, [{"upstream": "up", "uri": "amqp://z"}]])


class HeaderTests(TestCase):
    """The rules of x-received-from and x-bound-from."""

    def test_should_forward(self) -> None:
        one = {"x-received-from": [{"cluster-name": "a", "vhost": "/"}]}
        self.assertTrue(should_forward(None, 1, "b", "/"))
        self.assertFalse(should_forward(one, 1, "b", "/"))
        self.assertTrue(should_forward(one, 2, "b", "/"))
        self.assertFalse(should_forward(one, 5, "a", "/"))
        self.assertTrue(should_forward(one, 5, "a", "other"))

    def test_binding_hops(self) -> None:
        self.assertEqual(binding_hops({}, 2, "up", "/"), 2)
        bound = {"x-bound-from": [{"cluster-name": "c", "vhost": "/", "hops": 2}]}
        self.assertEqual(binding_hops(bound, 5, "up", "/"), 1)
        self.assertEqual(binding_hops(bound, 5, "c", "/"), 0)

    def test_queue_link_headers_count_visits(self) -> None:
        entry = {"uri": "amqp://u", "queue": "q", "redelivered": False}
        first = queue_link_headers({"CC": ["k"]}, entry, "ex", "rk")
        self.assertEqual(first, {"x-original-exchange": "ex", "x-original-routing-key": "rk", "x-original-cc": ["k"],
                                 "x-received-from": [{**entry, "visit-count": 1}]})
        as_received = {**first, "x-received-from": [{key: value.encode() if isinstance(value, str) else value
                                                     for key, value in first["x-received-from"][0].items()}]}
        again = queue_link_headers(as_received, entry, "", "q")
        self.assertEqual(again["x-received-from"], [{**entry, "visit-count": 2}])
        self.assertEqual(again["x-original-exchange"], "ex")

    def test_upstream_queue_name(self) -> None:
        self.assertEqual(upstream_queue_name("x", "/", "/", "x", "down"), "federation: x -> down")
        self.assertEqual(upstream_queue_name("x", "/", "/", "y", "down"), "federation: x -> down:y")
        self.assertEqual(upstream_queue_name("x", "/", "v", "y", "down"), "federation: x -> down:v:y")


class PolicyWatchTests(TestCase):
    """Policy changes and entities declared or deleted reach the federation
    service as they happen, without its clock moving."""

    def setUp(self) -> None:
        self.reactor = MemoryReactorClock()
        self.config = RuntimeConfig(UserDatabase.default(), Broker())
        self.config.set_parameter("federation-upstream", "/", "up", {"uri": "amqp://127.0.0.1:1"})
        vhost = self.config.broker.vhosts["/"]
        vhost.declare_exchange("fed.x", "direct")
        vhost.declare_queue("fed.q", Client("test"))
        self.service = FederationService(self.config, self.reactor, "txamqp09@test")
        self.service.startService()
        self.addCleanup(self.service.stopService)

    def links(self) -> set[tuple[str, str, str, str]]:
        return set(self.service.links)

    def policy(self, pattern: str, apply_to: str = "all", **definition: Any) -> None:
        self.config.put_policy("/", "fed", {"pattern": pattern, "apply-to": apply_to,
                                            "definition": definition or {"federation-upstream": "up"}})

    def test_nothing_is_polled(self) -> None:
        self.assertEqual(self.reactor.getDelayedCalls(), [])

    def test_set_changed_cleared(self) -> None:
        self.assertEqual(self.links(), set())
        self.policy("^fed")
        self.assertEqual(self.links(), {("exchange", "/", "fed.x", "up"), ("queue", "/", "fed.q", "up")})
        self.policy("^fed", "queues")
        self.assertEqual(self.links(), {("queue", "/", "fed.q", "up")})
        self.policy("^fed", "queues", **{"max-length": 5})
        self.assertEqual(self.links(), set())
        self.policy("^fed", "exchanges", **{"federation-upstream-set": "all"})
        self.assertEqual(self.links(), {("exchange", "/", "fed.x", "up")})
        self.config.delete_policy("/", "fed")
        self.assertEqual(self.links(), set())

    def test_entities_declared_and_deleted_under_a_policy(self) -> None:
        self.policy("^fed")
        vhost = self.config.broker.vhosts["/"]
        vhost.declare_exchange("fed.y", "fanout")
        vhost.declare_queue("fed.r", Client("test"))
        vhost.declare_queue("other", Client("test"))
        self.assertEqual(self.links(), {("exchange", "/", "fed.x", "up"), ("queue", "/", "fed.q", "up"),
                                        ("exchange", "/", "fed.y", "up"), ("queue", "/", "fed.r", "up")})
        vhost.delete_exchange("fed.x")
        vhost.delete_queue(vhost.queues["fed.q"])
        self.assertEqual(self.links(), {("exchange", "/", "fed.y", "up"), ("queue", "/", "fed.r", "up")})
        queue = vhost.queues["fed.r"]
        (link,) = [link for link in self.service.links.values() if link.kind == "queue"]
        self.assertEqual(queue.state_watchers, (link.adjust,))
        self.service.stopService()
        self.assertEqual((queue.state_watchers, vhost.entity_watchers), ((), []))

    def test_definitions_and_vhost_deletion(self) -> None:
        self.config.import_definitions({"policies": [
            {"vhost": "/", "name": "fed", "pattern": "^fed.q$", "definition": {"federation-upstream": "up"}}]})
        self.assertEqual(self.links(), {("queue", "/", "fed.q", "up")})
        self.config.delete_vhost("/")
        self.assertEqual(self.links(), set())


class LinkTests(TestCase):
    """A downstream broker with the federation service, fed by an upstream broker."""

    def setUp(self) -> None:
        self.upstream = LoopbackBroker()
        self.upstream.start()
        self.addCleanup(self.upstream.stop)
        self.upstream.factory.config.global_parameters["cluster_name"] = "up"
        self.downstream = LoopbackBroker()
        self.downstream.start()
        self.addCleanup(self.downstream.stop)
        config = self.downstream.factory.config
        config.global_parameters["cluster_name"] = "down"
        self.service = FederationService(config, reactor, "txamqp09@test", alarms=self.downstream.factory.alarms)
        self.service.startService()
        self.addCleanup(self.service.stopService)
        self.vhost = self.downstream.broker.vhosts["/"]

    def federate(self, pattern: str, apply_to: str, **settings: Any) -> None:
        config = self.downstream.factory.config
        config.set_parameter("federation-upstream", "/", "up", {"uri": self.upstream.url, **settings})
        config.put_policy("/", "fed", {"pattern": pattern, "apply-to": apply_to,
                                       "definition": {"federation-upstream": "up"}})

    async def client(self, broker: LoopbackBroker) -> Any:
        connection = await connect(reactor, broker.url)
        self.addCleanup(connection.disconnect)
        return await connection.channel()

    def running(self) -> bool:
        return bool(self.service.links) and all(link.status == "running" for link in self.service.links.values())

    def test_exchange_link_follows_bindings(self) -> Any:
        return ensureDeferred(self._exchange_link_follows_bindings())

    async def _exchange_link_follows_bindings(self) -> None:
        down = await self.client(self.downstream)
        up = await self.client(self.upstream)
        await down.exchange_declare("fed.x", "direct")
        await down.queue_declare("q")
        await down.request("queue.bind", queue="q", exchange="fed.x", routing_key="k1", arguments={})
        self.federate("^fed", "exchanges")
        await eventually(self.running, reactor, what="the link runs")
        upstream_vhost = self.upstream.broker.vhosts["/"]
        self.assertIn("federation: fed.x -> down", upstream_vhost.queues)
        self.assertEqual(upstream_vhost.exchanges["fed.x"].kind, "direct")
        up.basic_publish(b"one", "fed.x", "k1", {"headers": {"h": 1}})
        up.basic_publish(b"not bound", "fed.x", "k2")
        message = await eventually(lambda: down.basic_get("q", no_ack=True), reactor)
        self.assertEqual(message.body, b"one")
        (hop,) = message.headers["x-received-from"]
        # The client reads long strings as bytes.
        self.assertEqual(hop, {"uri": f"amqp://127.0.0.1:{self.upstream.port}/%2F".encode(), "exchange": b"fed.x",
                               "redelivered": False, "cluster-name": b"up", "vhost": b"/"})
        self.assertEqual(message.headers["h"], 1)
        await down.request("queue.bind", queue="q", exchange="fed.x", routing_key="k2", arguments={})
        internal = upstream_vhost.exchanges["fed.x"]
        await eventually(lambda: len(internal.bindings) == 2, reactor, what="k2 bound upstream")
        up.basic_publish(b"two", "fed.x", "k2")
        message = await eventually(lambda: down.basic_get("q", no_ack=True), reactor)
        self.assertEqual(message.body, b"two")
        # Properties seen before are republished as before; a message that
        # crossed max-hops links already is dropped (and acked upstream) each time.
        travelled = {"headers": {"x-received-from": [{"cluster-name": "elsewhere", "vhost": "/"}]}}
        for body in (b"far", b"far again"):
            up.basic_publish(body, "fed.x", "k1", travelled)
        up.basic_publish(b"three", "fed.x", "k2")
        message = await eventually(lambda: down.basic_get("q", no_ack=True), reactor)
        self.assertEqual((message.body, message.headers["x-received-from"][0]["exchange"]), (b"three", b"fed.x"))
        link_queue = upstream_vhost.queues["federation: fed.x -> down"]
        await eventually(lambda: link_queue.message_count == 0 and not link_queue.consumers[0].session.unacked,
                         reactor, what="the dropped messages are acked upstream")
        self.assertIsNone(await down.basic_get("q", no_ack=True))
        await down.request("queue.unbind", queue="q", exchange="fed.x", routing_key="k1", arguments={})
        await eventually(lambda: len(internal.bindings) == 1, reactor, what="k1 unbound upstream")
        (status,) = self.service.status()
        self.assertEqual({key: status[key] for key in ("exchange", "upstream_exchange", "type", "vhost", "upstream",
                                                      "status", "uri")},
                         {"exchange": "fed.x", "upstream_exchange": "fed.x", "type": "exchange", "vhost": "/",
                          "upstream": "up", "status": "running", "uri": f"amqp://127.0.0.1:{self.upstream.port}/%2F"})
        self.assertEqual(status["local_connection"], "Federation link (upstream: up, policy: fed)")
        self.downstream.factory.config.delete_policy("/", "fed")
        await eventually(lambda: not self.service.links, reactor, what="the link stops")
        await eventually(lambda: "federation: fed.x -> down" not in upstream_vhost.queues, reactor,
                         what="the upstream queue is deleted")
        self.assertEqual(len(internal.bindings), 0)
        self.assertEqual([name for name in upstream_vhost.exchanges if name.startswith("federation:")], [])

    def test_links_hold_messages_while_the_broker_is_in_alarm(self) -> Any:
        return ensureDeferred(self._links_hold_messages_while_the_broker_is_in_alarm())

    async def _links_hold_messages_while_the_broker_is_in_alarm(self) -> None:
        """Like the broker's blocked publishers: nothing is republished while
        an alarm is up, the upstream keeps all but its prefetch window, and
        everything arrives in order once the alarm clears."""
        down = await self.client(self.downstream)
        up = await self.client(self.upstream)
        await down.exchange_declare("fed.x", "fanout")
        await down.queue_declare("q")
        await down.request("queue.bind", queue="q", exchange="fed.x", routing_key="", arguments={})
        self.federate("^fed", "exchanges", **{"prefetch-count": 5})
        await eventually(self.running, reactor, what="the link runs")
        link_queue = self.upstream.broker.vhosts["/"].queues["federation: fed.x -> down"]
        local = self.vhost.queues["q"]
        alarms = self.downstream.factory.alarms
        alarms.raise_alarm("disk")
        for number in range(20):
            up.basic_publish(str(number).encode(), "fed.x", "")
        await eventually(lambda: link_queue.message_count == 15, reactor,
                         what="the upstream keeps all but the prefetch window")
        self.assertEqual((len(link_queue.consumers[0].session.unacked), local.message_count), (5, 0))
        alarms.clear_alarm("disk")
        await eventually(lambda: local.message_count == 20, reactor, what="every message arrives")
        bodies = [message.body for message in [await down.basic_get("q", no_ack=True) for _ in range(20)]]
        self.assertEqual(bodies, [str(number).encode() for number in range(20)])
        await eventually(lambda: link_queue.message_count == 0 and not link_queue.consumers[0].session.unacked,
                         reactor, what="everything acked upstream")

    def test_queue_link_consumes_while_wanted(self) -> Any:
        return ensureDeferred(self._queue_link_consumes_while_wanted())

    async def _queue_link_consumes_while_wanted(self) -> None:
        down = await self.client(self.downstream)
        up = await self.client(self.upstream)
        await up.queue_declare("jobs")
        for number in range(5):
            up.basic_publish(str(number).encode(), "", "jobs")
        await down.queue_declare("jobs")
        self.federate("^jobs$", "queues")
        await eventually(self.running, reactor, what="the link runs")
        upstream_queue = self.upstream.broker.vhosts["/"].queues["jobs"]
        self.assertEqual(upstream_queue.message_count, 5)
        self.assertEqual(upstream_queue.consumer_count, 0)
        received: list[Any] = []
        await down.basic_consume("jobs", received.append, no_ack=True)
        await eventually(lambda: len(received) == 5, reactor, what="five messages moved")
        self.assertEqual([m.body for m in received], [b"0", b"1", b"2", b"3", b"4"])
        self.assertEqual(received[0].headers["x-original-routing-key"], b"jobs")
        self.assertEqual(received[0].headers["x-received-from"][0]["visit-count"], 1)
        self.assertEqual(upstream_queue.consumers[0].priority, -1)
