"""The operations of a group: /api/nodes, a standby's management API and
metrics, ``amqp09ctl cluster_status``, on two real members of a group on a
real PostgreSQL server (their brokers are the management tests' brokers,
with the group's store unopened and a stand-in for AMQP serving)."""

from __future__ import annotations

import json
import os
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.endpoints import TCP4ServerEndpoint
from twisted.trial.unittest import TestCase
from twisted.web.client import Agent

from tests.management.support import ManagementBroker, http_request
from tests.management.test_ctl import run_ctl
from txamqp09.prometheus import make_metrics_site
from txamqp09.testing.http import read_body
from txamqp09.testing.postgresql import psycopg_missing, shared_postgresql
from txamqp09.testing.waiting import eventually
from txamqp09.store.url import store_from_url

try:
    import psycopg

    from tests.group.test_service import TIMING_PERIOD, Member
except ImportError:  # the tests skip, through psycopg_missing()
    pass

#: Seconds a test waits for the group to settle before it fails.
WAIT = 20.0


class GroupMember:
    """A member of a group: its group service (with the stand-in broker of
    the group's tests) and a management broker whose node it is."""

    def __init__(self, url: str, name: str) -> None:
        self.member = Member(url, name)
        self.management = ManagementBroker()
        node = self.management.node
        node.name = name
        node.group = self.member.service
        node.store = store_from_url(url, reactor, application_name=self.member.identity.session)
        self.metrics_port = 0

    @property
    def status(self) -> Any:
        return self.member.service.status()

    @inlineCallbacks
    def start(self) -> Any:
        """Listen for the API and the metrics, and join the group."""
        yield self.management.start()
        metrics = yield TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(
            make_metrics_site(self.management.node, reactor)
        )
        self.management.ports.append(metrics)
        self.metrics_port = metrics.getHost().port
        self.member.service.startService()

    @inlineCallbacks
    def stop(self) -> Any:
        yield self.member.service.leave(clean=False)
        yield self.member.broker.close()
        yield self.management.stop()

    def api(self, path: str, **options: Any) -> Any:
        """GET *path* of this member's management API."""
        return http_request(self.management.url, "GET", path, **options)

    @inlineCallbacks
    def metrics(self) -> Any:
        """This member's ``/metrics``, as text."""
        response = yield Agent(reactor).request(b"GET", f"http://127.0.0.1:{self.metrics_port}/metrics".encode())
        body = yield read_body(response)
        return body.decode()


class GroupOperationsTests(TestCase):
    """An active member (node-a) and a standby (node-b), seen through their APIs."""

    skip = psycopg_missing()

    @inlineCallbacks
    def setUp(self) -> Any:
        self.url = shared_postgresql().new_database()
        self.active = yield self.started("node-a")
        yield eventually(lambda: self.active.member.service.serving, reactor, WAIT, what="node-a serving")
        self.standby = yield self.started("node-b")
        yield eventually(
            lambda: {row.node for row in self.active.status.members} == {"node-a", "node-b"}
            and any(row.node == "node-a" and row.amqp_addresses() for row in self.standby.status.members),
            reactor, WAIT, what="both members seen by both, node-a's row written since it serves",
        )

    @inlineCallbacks
    def started(self, name: str) -> Any:
        member = GroupMember(self.url, name)
        yield member.start()
        self.addCleanup(member.stop)
        return member

    @inlineCallbacks
    def test_nodes_lists_every_member_with_role_lease_and_round_trip(self) -> Any:
        answer = yield self.active.api("/api/nodes")
        self.assertEqual(answer.status, 200, answer)
        nodes = {node["name"]: node for node in answer.body}
        self.assertEqual(set(nodes), {"node-a", "node-b"})
        active, standby = nodes["node-a"], nodes["node-b"]
        self.assertEqual((active["role"], active["running"], active["type"]), ("active", True, "disc"))
        self.assertGreater(active["mem_used"], 0)
        self.assertEqual(active["lease_epoch"], self.active.status.lease.epoch)
        self.assertEqual(active["lease_expires"], self.active.status.lease.expires.isoformat())
        self.assertGreater(active["store_round_trip"], 0)
        self.assertEqual((standby["role"], standby["running"], standby["being_drained"]), ("standby", True, False))
        self.assertIsNone(standby["lease_expires"])
        self.assertIsNone(standby["lease_epoch"])
        self.assertGreater(standby["store_round_trip"], 0)
        self.assertNotIn("mem_used", standby)
        one = yield self.active.api("/api/nodes/node-b")
        self.assertEqual(one.body["role"], "standby")
        missing = yield self.active.api("/api/nodes/node-z")
        self.assertEqual(missing.status, 404)

    @inlineCallbacks
    def test_a_member_whose_row_is_stale_is_not_running(self) -> Any:
        """A member that stopped writing its row (a broker that crashed) is
        listed, not running, for as long as its row stays."""
        with psycopg.connect(self.url, autocommit=True) as connection:
            connection.execute(
                "INSERT INTO amqp09_group_members (node, session, role, last_seen) "
                "VALUES ('node-c', 'gone', 'active', now() - %s * interval '2 seconds')",
                (TIMING_PERIOD,),
            )
        yield eventually(lambda: len(self.active.status.members) == 3, reactor, WAIT)
        answer = yield self.active.api("/api/nodes")
        nodes = {node["name"]: node for node in answer.body}
        self.assertEqual((nodes["node-c"]["role"], nodes["node-c"]["running"]), ("active", False))
        self.assertEqual(nodes["node-b"]["running"], True)

    @inlineCallbacks
    def test_a_standby_tells_its_role_and_who_serves(self) -> Any:
        overview = yield self.standby.api("/api/overview", user=None)
        self.assertEqual(overview.status, 200, overview)
        self.assertEqual((overview.body["role"], overview.body["node"]), ("standby", "node-b"))
        self.assertEqual(overview.body["group"]["lease"]["holder"], "node-a")
        nodes = yield self.standby.api("/api/nodes", user=None)
        self.assertEqual({node["name"]: node["role"] for node in nodes.body}, {"node-a": "active", "node-b": "standby"})
        queues = yield self.standby.api("/api/queues")
        self.assertEqual((queues.status, queues.body["error"], queues.body["role"]), (503, "not_serving", "standby"))
        port = self.active.member.broker.port.getHost().port
        self.assertIn(f"the active broker is node-a (AMQP on 127.0.0.1:{port})", queues.body["reason"])
        in_service = yield self.standby.api("/api/health/checks/is-in-service")
        self.assertEqual((in_service.status, in_service.body["status"]), (503, "failed"))
        active_in_service = yield self.active.api("/api/health/checks/is-in-service")
        self.assertEqual((active_in_service.status, active_in_service.body), (200, {"status": "ok"}))
        active_overview = yield self.active.api("/api/overview")
        self.assertEqual(active_overview.body["role"], "active")
        self.assertIn("object_totals", active_overview.body)

    @inlineCallbacks
    def test_metrics_tell_the_role_the_lease_and_the_round_trip(self) -> Any:
        active = yield self.active.metrics()
        self.assertIn('txamqp09_group_role{role="active"} 1.0', active)
        self.assertIn('txamqp09_group_role{role="standby"} 0.0', active)
        self.assertIn(f"txamqp09_group_lease_epoch {float(self.active.status.lease.epoch)}", active)
        self.assertIn("txamqp09_group_serving_seconds_left ", active)
        self.assertIn('txamqp09_group_members{role="standby"} 1.0', active)
        self.assertIn("rabbitmq_queues ", active)
        round_trip = _sample(active, "txamqp09_group_store_round_trip_seconds")
        self.assertGreater(round_trip, 0)
        standby = yield self.standby.metrics()
        self.assertIn('txamqp09_group_role{role="standby"} 1.0', standby)
        self.assertIn('txamqp09_group_role{role="active"} 0.0', standby)
        self.assertGreater(_sample(standby, "txamqp09_group_lease_seconds_left"), 0)
        self.assertNotIn("txamqp09_group_serving_seconds_left", standby)
        self.assertNotIn("rabbitmq_queues", standby)
        self.assertIn("rabbitmq_identity_info", standby)

    @inlineCallbacks
    def test_cluster_status_lists_the_members_and_their_roles(self) -> Any:
        home = os.path.abspath(self.mktemp())
        out, err, code = yield run_ctl(self.standby.management.url, home, "cluster_status")
        self.assertEqual((code, err), (0, "Cluster status of node node-b ...\n"), out)
        self.assertIn("Disk Nodes\n\nnode-a\nnode-b\n\nRunning Nodes\n\nnode-a\nnode-b\n", out)
        epoch = self.active.status.lease.epoch
        self.assertRegex(out, rf"\nNode: node-a, role: active, lease epoch: {epoch}, lease expires: \S+, "
                              r"store round trip: [0-9.]+ ms, last seen: \S+\n")
        self.assertRegex(out, r"\nNode: node-b, role: standby, store round trip: [0-9.]+ ms, last seen: \S+\n")
        port = self.active.member.broker.port.getHost().port
        self.assertIn(f"Node: node-a, interface: 127.0.0.1, port: {port}, protocol: amqp", out)
        out, _, code = yield run_ctl(self.active.management.url, home, "--formatter", "json", "cluster_status")
        status = json.loads(out)
        self.assertEqual((status["disk_nodes"], status["running_nodes"]), (["node-a", "node-b"], ["node-a", "node-b"]))
        self.assertEqual({name: role["role"] for name, role in status["roles"].items()},
                         {"node-a": "active", "node-b": "standby"})


class AloneTests(TestCase):
    """A broker alone is one running disk node, without roles."""

    @inlineCallbacks
    def test_cluster_status_of_a_broker_alone(self) -> Any:
        broker = ManagementBroker()
        yield broker.start()
        self.addCleanup(broker.stop)
        nodes = yield broker.request("GET", "/api/nodes")
        self.assertEqual([node["name"] for node in nodes.body], [broker.node.name])
        self.assertNotIn("role", nodes.body[0])
        out, _, code = yield run_ctl(broker.url, os.path.abspath(self.mktemp()), "cluster_status")
        self.assertEqual(code, 0)
        self.assertIn("Running Nodes\n\n" + broker.node.name + "\n", out)
        self.assertNotIn("Group Roles", out)


def _sample(exposition: str, name: str) -> float:
    """The value of the unlabelled sample *name* in a text *exposition*."""
    for line in exposition.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no sample {name} in:\n{exposition}")
