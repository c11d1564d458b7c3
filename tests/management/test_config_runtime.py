"""The runtime configuration: changed at run time, kept in the store, merged
with a definitions file at every start."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, cast

from twisted.internet import reactor as global_reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.interfaces import IReactorFromThreads
from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase

from txamqp09.broker.auth.users import UserDatabase
from txamqp09.broker.model import Broker, Persistence
from txamqp09.broker.runtime import ConfigError, RuntimeConfig
from txamqp09.broker.auth.security import Security
from txamqp09.broker.server import ServerFactory
from txamqp09.broker.service import BrokerService
from txamqp09.store.memory import MemoryStore
from txamqp09.store.sqlite import SQLiteStore

reactor = cast(IReactorFromThreads, global_reactor)

FILE = {
    "rabbit_version": "3.10.8",
    "users": [{"name": "admin", "password": "secret", "tags": ["administrator"]}],
    "vhosts": [{"name": "/"}, {"name": "billing"}],
    "permissions": [{"user": "admin", "vhost": "billing", "configure": ".*", "write": ".*", "read": ".*"}],
    "policies": [{"vhost": "billing", "name": "ttl", "pattern": "^inv", "apply-to": "queues",
                  "definition": {"message-ttl": 60000}, "priority": 1}],
    "queues": [{"name": "invoices", "vhost": "billing", "durable": True, "auto_delete": False,
                "arguments": {"x-max-length": 100}}],
    "exchanges": [{"name": "events", "vhost": "billing", "type": "topic", "durable": True,
                   "auto_delete": False, "internal": False, "arguments": {}}],
    "bindings": [{"source": "events", "vhost": "billing", "destination": "invoices",
                  "destination_type": "queue", "routing_key": "invoice.#", "arguments": {}}],
}


class Node:
    """A broker service over a store, started and stopped like twistd does."""

    def __init__(self, store: Any, definitions: Optional[dict[str, Any]] = None) -> None:
        self.clock = Clock()
        database = UserDatabase.default() if definitions is None else UserDatabase()
        self.factory = ServerFactory(
            self.clock, Broker(persistence=Persistence(store)), security=Security(database, self.clock)
        )
        self.service = BrokerService(self.factory, store, definitions=definitions)
        self.service.startService()

    @property
    def config(self) -> RuntimeConfig:
        return self.factory.config

    def stop(self) -> Any:
        return self.service.stopService()


class RestartTests(TestCase):
    """What is made at run time is there after a restart, on both stores."""

    def make_store(self) -> Any:
        return SQLiteStore(Path(self.mktemp()) / "store.db", reactor)

    def reopen(self, store: Any) -> Any:
        return SQLiteStore(store.path, reactor)

    @inlineCallbacks
    def test_runtime_changes_survive_a_restart(self) -> Any:
        store = self.make_store()
        node = Node(store)
        config = node.config
        config.put_vhost("shop", {"description": "the shop"})
        config.put_user("ann", password="pw", tags=["monitoring"])
        config.set_permissions("ann", "shop", "^ann-", ".*", ".*")
        config.set_topic_permissions("ann", "shop", "amq.topic", "^{username}\\.", ".*")
        config.put_policy("shop", "cap", {"pattern": ".*", "definition": {"max-length": 5}})
        config.put_policy("shop", "ops", {"pattern": ".*", "definition": {"message-ttl": 1000}}, operator=True)
        config.set_limit("vhost", "shop", "max-queues", 10)
        config.set_limit("user", "ann", "max-channels", 3)
        config.set_parameter("federation-upstream", "shop", "up", {"uri": "amqp://127.0.0.1"})
        config.delete_user("guest")
        before = config.export()
        yield node.stop()

        node = Node(self.reopen(store))
        self.addCleanup(node.stop)
        config = node.config
        self.assertEqual(config.export(), before)
        database = config.database
        self.assertNotIn("guest", database.users)
        self.assertTrue(database.users["ann"].password_hash.verify("pw"))
        self.assertEqual(database.users["ann"].tags, ("monitoring",))
        self.assertEqual(database.permissions_for("ann", "shop").configure, "^ann-")  # type: ignore[union-attr]
        self.assertTrue(database.topic_allows("ann", "shop", "amq.topic", "write", "ann.x"))
        self.assertFalse(database.topic_allows("ann", "shop", "amq.topic", "write", "bob.x"))
        self.assertEqual(database.limit("user", "ann", "max-channels"), 3)
        shop = node.factory.broker.vhosts["shop"]
        self.assertEqual(shop.max_queues, 10)
        self.assertEqual(sorted(shop.policies.policies), ["cap"])
        self.assertEqual(sorted(shop.policies.operator_policies), ["ops"])
        self.assertEqual(config.parameters, {("federation-upstream", "shop", "up"): {"uri": "amqp://127.0.0.1"}})

    @inlineCallbacks
    def test_deleting_a_vhost_is_kept_too(self) -> Any:
        store = self.make_store()
        node = Node(store)
        node.config.put_vhost("temp")
        node.config.put_policy("temp", "p", {"pattern": ".*", "definition": {"max-length": 1}})
        node.config.delete_vhost("temp")
        yield node.stop()
        node = Node(self.reopen(store))
        self.addCleanup(node.stop)
        self.assertNotIn("temp", node.config.database.vhosts)
        self.assertNotIn("temp", node.factory.broker.vhosts)
        self.assertEqual(node.config.policies(), [])

    @inlineCallbacks
    def test_definitions_file_imported_on_first_start_and_merged_on_each(self) -> Any:
        store = self.make_store()
        node = Node(store, FILE)
        billing = node.factory.broker.vhosts["billing"]
        self.assertEqual(billing.queues["invoices"].policy, "ttl")
        self.assertEqual(billing.queues["invoices"].settings.message_ttl, 60000)
        self.assertIn("invoice.#", [b.routing_key for b in billing.exchanges["events"].bindings.values()])
        self.assertNotIn("guest", node.config.database.users)
        node.config.put_user("admin", password="changed", tags=["administrator"])
        node.config.put_user("later", password="pw")
        node.config.delete_policy("billing", "ttl")
        yield node.stop()

        node = Node(self.reopen(store), FILE)
        self.addCleanup(node.stop)
        users = node.config.database.users
        # The file wins for what it names; what it does not name stays.
        self.assertTrue(users["admin"].password_hash.verify("secret"))
        self.assertIn("later", users)
        self.assertEqual(node.factory.broker.vhosts["billing"].queues["invoices"].policy, "ttl")


class MemoryRestartTests(RestartTests):
    """The same against the in-memory store (one instance across restarts)."""

    def make_store(self) -> Any:
        return MemoryStore()

    def reopen(self, store: Any) -> Any:
        return store


class ImportTests(TestCase):
    """A definitions import is checked whole before anything changes."""

    def setUp(self) -> None:
        self.config = RuntimeConfig(UserDatabase.default(), Broker())
        self.config.start({})

    def assertUnchanged(self, data: dict[str, Any], text: str, *, not_found: bool = False) -> None:
        before = self.config.export()
        with self.assertRaises(ConfigError) as caught:
            self.config.import_definitions(data)
        self.assertIn(text, str(caught.exception))
        self.assertEqual(caught.exception.not_found, not_found)
        self.assertEqual(self.config.export(), before)

    def test_a_bad_entry_anywhere_changes_nothing(self) -> None:
        good = {"users": [{"name": "new", "password": "x", "tags": []}], "vhosts": [{"name": "v"}]}
        self.assertUnchanged({**good, "policies": [{"vhost": "v", "name": "p", "pattern": ".*",
                                                    "definition": {"max-lenght": 1}}]},
                             'are not recognised policy settings')
        self.assertUnchanged({**good, "policies": [{"vhost": "v", "name": "p", "pattern": "(",
                                                    "definition": {"max-length": 1}}]},
                             "pattern should be regular expression")
        self.assertUnchanged({**good, "queues": [{"vhost": "nowhere", "name": "q", "durable": True,
                                                  "auto_delete": False, "arguments": {}}]},
                             "virtual host 'nowhere' does not exist", not_found=True)
        self.assertUnchanged({**good, "queues": [{"vhost": "v", "name": "q" * 256}]}, "longer than 255 bytes")
        self.assertUnchanged({**good, "queues": [{"vhost": "v", "name": "q", "arguments": {"x-message-ttl": "soon"}}]},
                             "invalid arg 'x-message-ttl'")
        self.assertUnchanged({**good, "permissions": [{"user": "new", "vhost": "v", "configure": "(",
                                                       "write": "", "read": ""}]},
                             "not a regular expression")
        self.assertUnchanged({**good, "exchanges": [{"vhost": "v", "name": "x", "type": "x-delayed-message"}]},
                             "exchange type 'x-delayed-message' is not supported")
        self.assertUnchanged({**good, "bindings": [{"vhost": "v", "source": "none", "destination": "q",
                                                    "destination_type": "queue"}]},
                             "no exchange 'none'", not_found=True)
        self.assertUnchanged({**good, "users": [{"name": "bad", "limits": {"max-queues": 1}}]},
                             "Unrecognised terms")

    def test_unsupported_sections_are_reported_by_name(self) -> None:
        report = self.config.import_definitions({
            "vhosts": [{"name": "/"}],
            "federation_state": [],
            "parameters": [{"vhost": "/", "component": "mqtt-port-to-vhost-mapping", "name": "m", "value": {}}],
        })
        self.assertEqual(report.unsupported[0], "top-level key 'federation_state'")
        self.assertIn("parameter component 'mqtt-port-to-vhost-mapping'", report.unsupported[1])
