"""What a member's management API and metrics say of its role (no database
needed: the group's status is given)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from twisted.internet.defer import inlineCallbacks
from twisted.python.reflect import requireModule
from twisted.trial.unittest import TestCase

from tests.management.support import ManagementTestCase, http_request
from tests.prometheus.support import MetricsBroker, scrape

if requireModule("psycopg") is not None:
    from txamqp09.group.keeper import LeaseTiming
    from txamqp09.group.records import Address, Lease, Member
    from txamqp09.group.service import GroupStatus, Role

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


class StatedGroup:
    """A group whose status is given: this member has *role*, node-a holds the lease."""

    def __init__(self, role: "Role") -> None:
        self.role = role
        self.timing = LeaseTiming(3.0, 1.0)

    @property
    def serving(self) -> bool:
        return self.role is Role.ACTIVE

    def status(self) -> "GroupStatus":
        lease = Lease("node-a", "txamqp09@node-a 0a0b0c0d0e0f", 4242, 3, NOW + timedelta(seconds=2), False, NOW)
        members = (
            Member("node-a", "txamqp09@node-a 0a0b0c0d0e0f", "active", (Address("amqp", "10.0.0.1", 5672),), NOW, 0.002),
            Member("node-b", "txamqp09@node-b 0c0d0e0f0a0b", "standby", (), NOW, 0.001),
        )
        node = "node-a" if self.role is Role.ACTIVE else "node-b"
        return GroupStatus(node, self.role, lease, members)


class ManagementRoleTests(ManagementTestCase):
    skip = None if requireModule("psycopg") is not None else "psycopg 3 is not installed"

    def request(self, path: str, **options: Any) -> Any:
        return http_request(self.broker.url, "GET", path, **options)

    @inlineCallbacks
    def test_standby_overview_and_refusals(self) -> Any:
        """A standby answers its overview without a login, with its role and
        the group; health checks fail with the reason; everything else is
        503 not_serving."""
        self.broker.node.group = StatedGroup(Role.STANDBY)
        overview = yield self.request("/api/overview", user=None)
        self.assertEqual(overview.status, 200)
        self.assertEqual(overview.body["role"], "standby")
        group = overview.body["group"]
        self.assertEqual((group["node"], group["lease"]["holder"], group["lease"]["epoch"]), ("node-b", "node-a", 3))
        self.assertEqual(group["lease"]["expires"], (NOW + timedelta(seconds=2)).isoformat())
        self.assertEqual([member["role"] for member in group["members"]], ["active", "standby"])
        self.assertEqual(group["members"][0]["addresses"], [{"protocol": "amqp", "host": "10.0.0.1", "port": 5672}])
        health = yield self.request("/api/health/checks/alarms")
        self.assertEqual(health.status, 503)
        self.assertEqual(health.body["status"], "failed")
        self.assertIn("the active broker is node-a", health.body["reason"])
        queues = yield self.request("/api/queues")
        self.assertEqual((queues.status, queues.body["error"], queues.body["role"]), (503, "not_serving", "standby"))

    @inlineCallbacks
    def test_active_serves_with_its_role(self) -> Any:
        """The active member's API works as usual; its overview adds the role and group."""
        self.broker.node.group = StatedGroup(Role.ACTIVE)
        overview = yield self.request("/api/overview")
        self.assertEqual(overview.status, 200)
        self.assertEqual(overview.body["role"], "active")
        self.assertEqual(overview.body["group"]["node"], "node-a")
        self.assertIn("object_totals", overview.body)
        queues = yield self.request("/api/queues")
        self.assertEqual(queues.status, 200)
        refused = yield self.request("/api/overview", user=None)
        self.assertEqual(refused.status, 401)


class MetricsRoleTests(TestCase):
    skip = ManagementRoleTests.skip

    @inlineCallbacks
    def test_standby_metrics_say_standby(self) -> Any:
        """A standby's metrics are its group's only; the active's are the broker's and its group's."""
        metrics = MetricsBroker()
        yield metrics.start()
        self.addCleanup(metrics.stop)
        metrics.node.group = StatedGroup(Role.STANDBY)
        standby = yield scrape(metrics.metrics_port)
        self.assertEqual(standby.status, 200)
        self.assertEqual(standby.value("txamqp09_group_role", role="standby"), 1)
        self.assertEqual(standby.value("txamqp09_group_role", role="active"), 0)
        self.assertEqual(standby.value("txamqp09_group_lease_epoch"), 3)
        self.assertIsNone(standby.value("rabbitmq_connections"))
        metrics.node.group = StatedGroup(Role.ACTIVE)
        active = yield scrape(metrics.metrics_port)
        self.assertIsNotNone(active.value("rabbitmq_connections"))
        self.assertEqual(active.value("txamqp09_group_role", role="active"), 1)
