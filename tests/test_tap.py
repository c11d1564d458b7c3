"""``twistd amqp09`` options and the service they build."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from twisted.internet.endpoints import SSL4ServerEndpoint
from twisted.internet.task import Clock
from twisted.python import usage
from twisted.python.reflect import requireModule
from twisted.trial.unittest import SkipTest, SynchronousTestCase
from twisted.web.server import Site

from txamqp09.broker.federation.service import FederationService
from txamqp09.prometheus import MetricsResource
from txamqp09.shovel.service import ShovelService
from txamqp09.testing.certificates import CertificateAuthority
from txamqp09.testing.postgresql import psycopg_missing
from txamqp09.tap import Options, makeService


def build(*argv: str) -> list[Any]:
    """The listening services ``twistd amqp09 ARGV`` would start."""
    return [child for child in service_of(*argv) if hasattr(child, "endpoint")]


def service_of(*argv: str) -> Any:
    """The service ``twistd amqp09 ARGV`` would run."""
    options = Options()
    options.parseOptions(list(argv))
    return makeService(options, Clock())


def bound(listener: Any) -> Any:
    """The endpoint a listening service binds, inside the endpoints that
    wrap it (to log and to record where it listens)."""
    endpoint = listener.endpoint
    while hasattr(endpoint, "endpoint"):
        endpoint = endpoint.endpoint
    return endpoint


def api_node(site: Site) -> Any:
    """The management node behind *site*'s API (the site's root serves the web UI)."""
    return site.resource.getStaticEntity(b"api").node


class OptionsTests(SynchronousTestCase):
    def test_listeners_share_one_broker(self) -> None:
        services = build("--port", "5999", "--listen", "tcp:6000:interface=127.0.0.1")
        self.assertEqual([bound(service)._port for service in services], [6000, 5999])
        self.assertIs(services[0].factory.broker, services[1].factory.broker)

    def test_connection_options_and_watermark(self) -> None:
        (service,) = build("--port", "5999", "--frame-max", "8192", "--heartbeat", "0",
                                "--high-watermark", "1000")
        factory = service.factory
        self.assertEqual((factory.options["frame_max"], factory.options["heartbeat"]), (8192, 0))
        self.assertEqual(factory.throttle.high_watermark, 1000)

    def test_staging_ttl(self) -> None:
        (service,) = build("--port", "5999", "--staging-ttl", "90")
        self.assertEqual(service.factory.buildProtocol(None).handshake.staging_ttl, 90.0)
        (service,) = build("--port", "5999")
        self.assertEqual(service.factory.buildProtocol(None).handshake.staging_ttl, 3600.0)

    def test_management_listener_is_off_unless_asked(self) -> None:
        self.assertEqual(len(build("--port", "5999")), 1)
        services = build("--port", "5999", "--management", "tcp:15999:interface=127.0.0.1")
        listeners = [service for service in services if hasattr(service, "endpoint")]
        self.assertEqual(
            [(listener.endpoint.protocol, bound(listener)._port) for listener in listeners],
            [("amqp", 5999), ("http", 15999)],
        )
        self.assertIsInstance(listeners[1].factory, Site)
        self.assertIs(api_node(listeners[1].factory).factory, listeners[0].factory)

    def test_federation_runs_in_the_broker(self) -> None:
        service = service_of("--port", "5999", "--management", "tcp:15999:interface=127.0.0.1")
        (federation,) = [child for child in service if isinstance(child, FederationService)]
        self.assertIs(federation.config, service.factory.config)
        self.assertIn("federation-upstream", service.factory.config.components)
        self.assertIn("federation-upstream-set", service.factory.config.components)
        (site,) = [child.factory for child in service if isinstance(getattr(child, "factory", None), Site)]
        self.assertIs(api_node(site).federation, federation)

    def test_prometheus_listener_is_off_unless_asked(self) -> None:
        options = Options()
        options.parseOptions(["--port", "5999", "--management", "tcp:15999:interface=127.0.0.1",
                              "--prometheus", "tcp:15998:interface=127.0.0.1"])
        broker = makeService(options, Clock())
        services = list(broker)
        listeners = [service for service in services if hasattr(service, "endpoint")]
        self.assertEqual(
            [(listener.endpoint.protocol, bound(listener)._port) for listener in listeners],
            [("amqp", 5999), ("http", 15999), ("http/prometheus", 15998)],
        )
        metrics = listeners[2].factory.resource.original
        self.assertIsInstance(metrics, MetricsResource)
        self.assertIs(metrics.node.factory, listeners[0].factory)
        self.assertIs(metrics.disk, broker.disk_monitor)

    def test_shovels_run_after_the_listeners_and_report_to_the_api(self) -> None:
        options = Options()
        options.parseOptions(["--port", "5999", "--management", "tcp:15999:interface=127.0.0.1"])
        broker = makeService(options, Clock())
        services = list(broker)
        shovels = services[-1]
        self.assertIsInstance(shovels, ShovelService)
        self.assertIs(shovels.config, broker.factory.config)
        self.assertIn("shovel", broker.factory.config.components)
        site = [service for service in services if isinstance(getattr(service, "factory", None), Site)][0]
        self.assertIs(api_node(site.factory).shovels, shovels)

    def test_disk_free_limit_watches_the_data_directory(self) -> None:
        options = Options()
        options.parseOptions(["--data-dir", "/srv/amqp", "--disk-free-limit", "24MiB"])
        monitor = makeService(options, Clock()).disk_monitor
        self.assertEqual((monitor.directory, monitor.limit), (Path("/srv/amqp"), 24 * 1024 * 1024))
        options = Options()
        options.parseOptions([])
        self.assertEqual(makeService(options, Clock()).disk_monitor.limit, 50_000_000)
        options = Options()
        options.parseOptions(["--transient"])
        self.assertIsNone(makeService(options, Clock()).disk_monitor)
        self.assertRaises(usage.UsageError, Options().parseOptions, ["--disk-free-limit", "lots"])

    def test_store_url(self) -> None:
        broker = service_of("--data-dir", "/srv/amqp")
        self.assertEqual(broker.store.path, Path("/srv/amqp/store.db"))
        self.assertIsNone(broker.store_location)
        broker = service_of("--store", "sqlite:/srv/other/amqp.db")
        self.assertEqual(broker.store.path, Path("/srv/other/amqp.db"))
        self.assertEqual(broker.disk_monitor.directory, Path("/srv/other"), "the store's file system is watched")
        self.assertEqual(broker.store_location, "/srv/other/amqp.db")
        for argv, said in [
            (["--store", "mysql://db"], "--store: store URL 'mysql://db' names no store"),
            (["--store", "sqlite:"], "--store: store URL sqlite: names no file"),
            (["--transient", "--store", "sqlite:x.db"], "--transient keeps nothing: it takes no --store"),
        ]:
            error = self.assertRaises(usage.UsageError, Options().parseOptions, argv)
            self.assertTrue(str(error).startswith(said), str(error))

    def test_a_postgresql_store_is_named_by_its_uri(self) -> None:
        missing = psycopg_missing()
        if missing:
            raise SkipTest(missing)
        broker = service_of("--store", "postgresql://broker:secret@db1:5432,db2:5433/amqp")
        self.assertEqual(broker.store.url, "postgresql://broker:secret@db1:5432,db2:5433/amqp")
        self.assertTrue(broker.store.application_name.startswith("txamqp09@"), "the node's name")
        self.assertEqual(broker.store_location, "postgresql://broker@db1:5432,db2:5433/amqp")
        self.assertIsNone(broker.disk_monitor, "no file system of this machine holds it")

    def test_bad_options(self) -> None:
        self.assertRaises(usage.UsageError, Options().parseOptions, ["--port", "x"])
        self.assertRaises(usage.UsageError, Options().parseOptions, ["--frame-max", "100"])


class SecurityOptionsTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.directory = Path(self.mktemp())
        self.directory.mkdir()

    def test_default_security_is_rabbitmqs(self) -> None:
        (service,) = build("--port", "5999")
        security = service.factory.security
        self.assertEqual(list(security.database.users), ["guest"])
        self.assertEqual(list(service.factory.broker.vhosts), ["/"])
        self.assertTrue(security.accept_ticket_zero)

    def test_definitions_tickets_and_tls_listener(self) -> None:
        """The definitions' vhosts exist in the model; the TLS port shares the factory."""
        definitions = self.directory / "definitions.json"
        definitions.write_text(json.dumps({"vhosts": [{"name": "/"}, {"name": "billing"}]}), encoding="utf-8")
        key, certificate, ca = CertificateAuthority().write_server_files(self.directory)
        tcp, tls = build(
            "--port", "5999", "--definitions", str(definitions), "--require-tickets",
            "--ssl-port", "5998", "--ssl-interface", "127.0.0.1", "--ssl-key", str(key),
            "--ssl-cert", str(certificate), "--ssl-ca", str(ca), "--ssl-verify", "required",
        )
        self.assertIs(tls.factory, tcp.factory)
        self.assertIsInstance(bound(tls), SSL4ServerEndpoint)
        self.assertEqual((bound(tls)._port, bound(tls)._interface), (5998, "127.0.0.1"))
        self.assertEqual(sorted(tcp.factory.broker.vhosts), ["/", "billing"])
        self.assertEqual(list(tcp.factory.security.database.users), [])
        self.assertFalse(tcp.factory.security.accept_ticket_zero)

    def test_security_usage_errors(self) -> None:
        error = self.assertRaises(usage.UsageError, Options().parseOptions, ["--ssl-port", "5671"])
        self.assertIn("--ssl-port needs --ssl-key and --ssl-cert", str(error))
        missing = str(self.directory / "missing.json")
        error = self.assertRaises(usage.UsageError, Options().parseOptions, ["--definitions", missing])
        self.assertIn("missing.json", str(error))


class GroupOptionsTests(SynchronousTestCase):
    """A PostgreSQL store makes the broker a member of a group."""

    skip = None if requireModule("psycopg") is not None else "psycopg 3 is not installed"
    store = "postgresql://broker@db1:5432,db2:5432/amqp?target_session_attrs=read-write"

    def test_group_options_need_a_postgresql_store(self) -> None:
        for option in (["--node-name", "mq1"], ["--lease-period", "5"], ["--lease-renew", "1"]):
            with self.assertRaises(usage.UsageError) as raised:
                Options().parseOptions(["--port", "5999", *option])
            self.assertIn("postgresql://", str(raised.exception))

    def test_defaults(self) -> None:
        options = Options()
        options.parseOptions(["--listen", "tcp:5999:interface=127.0.0.1", "--store", self.store])
        self.assertTrue(options.in_group)
        self.assertEqual(options["node-name"], f"{socket.gethostname()}:5999")
        self.assertEqual(options.lease_timing(), (3.0, 1.0))
        short = Options()
        short.parseOptions(["--store", self.store, "--lease-period", "1.5"])
        self.assertEqual(short.lease_timing(), (1.5, 0.5))

    def test_renewal_shorter_than_the_period(self) -> None:
        with self.assertRaises(usage.UsageError) as raised:
            Options().parseOptions(["--store", self.store, "--lease-period", "2", "--lease-renew", "2"])
        self.assertIn("--lease-renew", str(raised.exception))

    def test_member_of_a_group(self) -> None:
        """The broker stands by in its group: the store carries the member's
        session name and the lease guard; the AMQP listener, federation and
        shovels run only while it serves; the management API sees the group."""
        broker = service_of(
            "--port", "5999", "--store", self.store, "--node-name", "mq1", "--lease-period", "6",
            "--lease-renew", "2", "--management", "tcp:15999:interface=127.0.0.1",
        )
        group = broker.group
        self.assertEqual((group.identity.node, group.timing.period, group.timing.renew), ("mq1", 6.0, 2.0))
        self.assertEqual(broker.store.application_name, group.identity.session)
        self.assertIn(group.identity.session, broker.store._guard[1])
        self.assertIs(group.window, broker.factory.window)
        serving = {type(child).__name__ for child in broker if child in broker._serving}
        self.assertEqual(serving, {"StreamServerEndpointService", "FederationService", "ShovelService"})
        self.assertEqual([bound(child)._port for child in broker if child in broker._serving and hasattr(child, "endpoint")], [5999])
        site = [child for child in broker if isinstance(getattr(child, "factory", None), Site)][0]
        self.assertIs(api_node(site.factory).group, group)
