"""Runtime parameter components: watchers told of every change, checks applied."""

from __future__ import annotations

from typing import Any

from twisted.application.service import Service
from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase

from txamqp09.broker.auth.security import Security
from txamqp09.broker.federation.service import FederationService
from txamqp09.broker.auth.users import UserDatabase
from txamqp09.broker.model import Broker, Persistence
from txamqp09.broker.parameters import Component, Components
from txamqp09.broker.runtime import POLICY, ConfigError, RuntimeConfig
from txamqp09.broker.server import ServerFactory
from txamqp09.broker.service import BrokerService
from txamqp09.shovel.service import ShovelService
from txamqp09.store.memory import MemoryStore


class Recorder:
    """A watcher that records what it is told."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def parameter_set(self, vhost: str, name: str, value: Any) -> None:
        self.events.append(("set", vhost, name, value))

    def parameter_cleared(self, vhost: str, name: str) -> None:
        self.events.append(("cleared", vhost, name))


class WatchingService(Service):
    """Watches a component (federation upstreams unless told) once started,
    as the shovel service watches shovels."""

    def __init__(self, config: RuntimeConfig, component: str = "federation-upstream") -> None:
        self.config = config
        self.component = component
        self.watcher = Recorder()
        self.seen_at_start: list[tuple[Any, ...]] = []

    def startService(self) -> None:
        super().startService()
        self.config.components.watch(self.component, self.watcher)
        self.seen_at_start = list(self.watcher.events)


def _config() -> RuntimeConfig:
    return RuntimeConfig(UserDatabase.default(), Broker())


def _node(store: MemoryStore, start: bool = True) -> BrokerService:
    """A broker service on *store* (started unless told)."""
    clock = Clock()
    factory = ServerFactory(clock, Broker(persistence=Persistence(store)),
                            security=Security(UserDatabase.default(), clock))
    service = BrokerService(factory, store)
    if start:
        service.startService()
    return service


class ComponentsTests(TestCase):
    """The registry on its own."""

    def test_watch_replays_then_follows(self) -> None:
        components = Components()
        components.update({("thing", "/", "a"): 1, ("other", "/", "b"): 2})
        watcher = Recorder()
        components.watch("thing", watcher)
        self.assertEqual(watcher.events, [("set", "/", "a", 1)])
        components.update({("thing", "/", "a"): 1, ("thing", "/", "c"): 3})
        components.update({("thing", "/", "a"): 5})
        self.assertEqual(watcher.events[1:], [("set", "/", "c", 3), ("cleared", "/", "c"), ("set", "/", "a", 5)])

    def test_unchanged_value_tells_nobody(self) -> None:
        components = Components()
        watcher = Recorder()
        components.watch("thing", watcher)
        components.update({("thing", "/", "a"): {"x": 1}})
        components.update({("thing", "/", "a"): {"x": 1}})
        self.assertEqual(watcher.events, [("set", "/", "a", {"x": 1})])

    def test_unwatch(self) -> None:
        components = Components()
        watcher = Recorder()
        components.watch("thing", watcher)
        components.unwatch("thing", watcher)
        components.update({("thing", "/", "a"): 1})
        self.assertEqual(watcher.events, [])

    def test_add(self) -> None:
        components = Components()
        self.assertNotIn("thing", components)
        self.assertEqual(components.errors("thing", "n", 1), [])
        components.add("thing", Component(lambda name, value: [f"{name} bad"]))
        self.assertIn("thing", components)
        self.assertEqual(components.errors("thing", "n", 1), ["n bad"])

    def test_errors_and_shown_of_known_components_only(self) -> None:
        components = Components({"thing": Component(lambda name, value: [f"{name} bad"], lambda value: "hidden")})
        self.assertEqual(components.errors("thing", "n", 1), ["n bad"])
        self.assertEqual(components.shown("thing", 1), "hidden")
        self.assertEqual(components.errors("other", "n", 1), [])
        self.assertEqual(components.shown("other", 1), 1)


class RuntimeConfigWatchTests(TestCase):
    """Watchers of a component through the runtime configuration."""

    def test_set_change_clear(self) -> None:
        config = _config()
        watcher = Recorder()
        config.components.watch("federation-upstream", watcher)
        config.set_parameter("federation-upstream", "/", "up", {"uri": "amqp://a"})
        config.set_parameter("federation-upstream", "/", "up", {"uri": "amqp://b"})
        config.set_parameter("other", "/", "x", 1)
        config.clear_parameter("federation-upstream", "/", "up")
        self.assertEqual(watcher.events, [
            ("set", "/", "up", {"uri": "amqp://a"}),
            ("set", "/", "up", {"uri": "amqp://b"}),
            ("cleared", "/", "up"),
        ])

    def test_definitions_import_and_vhost_deletion(self) -> None:
        config = _config()
        watcher = Recorder()
        config.components.watch("federation-upstream", watcher)
        config.import_definitions({
            "vhosts": [{"name": "v"}],
            "parameters": [{"vhost": "v", "component": "federation-upstream", "name": "up", "value": {"uri": "amqp://"}}],
        })
        config.delete_vhost("v")
        self.assertEqual(watcher.events, [("set", "v", "up", {"uri": "amqp://"}), ("cleared", "v", "up")])

    def test_restored_at_start_before_children_start(self) -> None:
        """A service that watches when it starts (a child of the broker
        service) is told of the parameters the store kept."""
        store = MemoryStore()
        first = _node(store)
        first.factory.config.set_parameter("federation-upstream", "/", "up", {"uri": "amqp://"})
        first.stopService()
        second = _node(store, start=False)
        child = WatchingService(second.factory.config)
        child.setServiceParent(second)
        second.startService()
        self.addCleanup(second.stopService)
        self.assertEqual(child.seen_at_start, [("set", "/", "up", {"uri": "amqp://"})])

    def test_services_plug_in_their_components(self) -> None:
        """The configuration knows no component of its own: a shovel is kept
        unchecked and reported until the shovel service is made, and so are
        federation upstreams until the federation service is."""
        config = _config()
        shovel = {"vhost": "/", "component": "shovel", "name": "s", "value": {"src-uri": "amqp://"}}
        upstream = {"vhost": "/", "component": "federation-upstream", "name": "up", "value": {}}
        report = config.import_definitions({"parameters": [shovel, upstream]})
        self.assertEqual(report.unsupported, [
            "parameter component 'shovel' (//s): kept, not acted on",
            "parameter component 'federation-upstream' (//up): kept, not acted on",
        ])
        ShovelService(config, Clock(), lambda: None)
        FederationService(config, Clock(), "node")
        for entry, error in [(shovel, "Key \"dest-uri\" not found in s"), (upstream, "Key \"uri\" not found in up")]:
            with self.assertRaises(ConfigError) as raised:
                config.set_parameter(entry["component"], "/", entry["name"], entry["value"])
            self.assertIn(error, str(raised.exception))

    def test_refused_value_changes_nothing(self) -> None:
        config = _config()
        ShovelService(config, Clock(), lambda: None)
        watcher = Recorder()
        config.components.watch("shovel", watcher)
        with self.assertRaises(ConfigError) as raised:
            config.set_parameter("shovel", "/", "s", {"src-uri": "amqp://"})
        self.assertIn("Key \"dest-uri\" not found in s", str(raised.exception))
        self.assertEqual((watcher.events, config.parameters), ([], {}))
        with self.assertRaises(ConfigError) as imported:
            config.import_definitions({"parameters": [
                {"vhost": "/", "component": "shovel", "name": "s", "value": {"src-uri": "amqp://"}}]})
        self.assertIn("Must specify 'src-exchange' or 'src-queue'", str(imported.exception))
        self.assertEqual(config.parameters, {})


class PolicyWatchTests(TestCase):
    """Policies reach watchers as parameters of component ``policy``."""

    def test_set_change_clear(self) -> None:
        config = _config()
        watcher = Recorder()
        config.components.watch(POLICY, watcher)
        body = {"pattern": "^a", "definition": {"max-length": 1}}
        config.put_policy("/", "p", body)
        config.put_policy("/", "p", body)
        config.put_policy("/", "p", {**body, "priority": 2})
        config.delete_policy("/", "p")
        expected = {"vhost": "/", "name": "p", "pattern": "^a", "apply-to": "all",
                    "definition": {"max-length": 1}, "priority": 0}
        self.assertEqual(watcher.events, [
            ("set", "/", "p", expected),
            ("set", "/", "p", {**expected, "priority": 2}),
            ("cleared", "/", "p"),
        ])

    def test_definitions_import_and_vhost_deletion(self) -> None:
        config = _config()
        watcher = Recorder()
        config.components.watch(POLICY, watcher)
        config.import_definitions({
            "vhosts": [{"name": "v"}],
            "policies": [{"vhost": "v", "name": "p", "pattern": ".*", "definition": {"max-length": 1}}],
        })
        config.delete_vhost("v")
        self.assertEqual([event[:3] for event in watcher.events], [("set", "v", "p"), ("cleared", "v", "p")])

    def test_restored_at_start(self) -> None:
        store = MemoryStore()
        first = _node(store)
        first.factory.config.put_policy("/", "p", {"pattern": ".*", "definition": {"max-length": 1}})
        first.stopService()
        second = _node(store, start=False)
        child = WatchingService(second.factory.config, POLICY)
        child.setServiceParent(second)
        second.startService()
        self.addCleanup(second.stopService)
        self.assertEqual([event[:3] for event in child.seen_at_start], [("set", "/", "p")])

    def test_not_a_parameter_of_its_own(self) -> None:
        config = _config()
        with self.assertRaises(ConfigError) as raised:
            config.set_parameter(POLICY, "/", "p", {"pattern": ".*", "definition": {}})
        self.assertEqual(str(raised.exception), "component 'policy' is set through its own endpoint")
        self.assertEqual(config.parameters, {})
