"""The security layer in the real broker, end to end.

``WiredBrokerTests`` run the broker ``twistd amqp09`` builds from its options
(a RabbitMQ-format ``--definitions`` file, a TLS port that requires client
certificates from a CA the test generates) on 127.0.0.1, and real clients
against it: pika over TLS with PLAIN and EXTERNAL, py-amqp with AMQPLAIN,
txAMQP speaking 0-9 with access tickets. ``NegotiationSecurityTests`` drive
the server connection frame by frame on a Clock for what real clients cannot
show: a peer address that is not loopback, the login throttle's waits, a
second start-ok, a connection lost while its login waits.
"""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import amqp
import pika
import txamqp.spec
from pika.exceptions import ChannelClosedByBroker, ProbableAccessDeniedError
from twisted.internet import defer, reactor
from twisted.internet.protocol import ClientCreator
from twisted.internet.task import Clock
from twisted.internet.threads import deferToThread
from twisted.logger import formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase, TestCase
from txamqp.client import ChannelClosed, ConnectionClosed, TwistedDelegate
from txamqp.protocol import AMQClient

from txamqp09.testing.certificates import CertificateAuthority, pem_certificate, pem_key
from tests.broker.auth.test_passwords import RABBITMQ_MD5_OF_SIMON
from txamqp09.testing.scripted import ScriptedClient
from txamqp09 import tap
from txamqp09.broker.auth.passwords import hash_password
from txamqp09.broker.auth.permissions import Permissions
from txamqp09.broker.auth.realms import AccessRealm, Right
from txamqp09.broker.auth.sasl import MechanismRegistry
from txamqp09.broker.auth.security import Security, refusal_text
from txamqp09.broker.auth.users import UserDatabase
from txamqp09.broker.server import ServerConnection, ServerFactory
from txamqp09.wire.versions import AMQP0_9, AMQP0_9_1, ProtocolVersion

_SPEC_DIR = Path(__file__).resolve().parents[3] / "spec"


def _user(name: str, password: str | None, tags: list[str] | None = None) -> dict[str, Any]:
    """A definitions entry as RabbitMQ exports it (an empty hash: no password)."""
    return {
        "name": name,
        "password_hash": hash_password(password).to_definition() if password is not None else "",
        "hashing_algorithm": "rabbit_password_hashing_sha256",
        "tags": tags or [],
        "limits": {},
    }


def _permissions(user: str, vhost: str, configure: str, write: str, read: str) -> dict[str, str]:
    return {"user": user, "vhost": vhost, "configure": configure, "write": write, "read": read}


#: A RabbitMQ 3.12 definitions export, with our realm keys: guest as RabbitMQ
#: makes it; app limited to app.* and holding a realm; someuser logging in
#: only with a certificate; gen allowed server-named queues only;
#: billing-app with the MD5 hash RabbitMQ itself wrote, on vhost billing.
DEFINITIONS: dict[str, Any] = {
    "rabbit_version": "3.12.13",
    "rabbitmq_version": "3.12.13",
    "product_name": "RabbitMQ",
    "product_version": "3.12.13",
    "users": [
        _user("guest", "guest", ["administrator"]),
        _user("app", "secret"),
        _user("someuser", None),
        _user("gen", "gen"),
        {"name": "billing-app", "password_hash": RABBITMQ_MD5_OF_SIMON,
         "hashing_algorithm": "rabbit_password_hashing_md5", "tags": [], "limits": {"max-connections": 10}},
    ],
    "vhosts": [
        {"name": "/", "description": "Default virtual host", "tags": [], "metadata": {"description": "", "tags": []}},
        {"name": "billing", "description": "", "tags": ["prod"], "metadata": {"description": "", "tags": ["prod"]}},
    ],
    "permissions": [
        _permissions("guest", "/", ".*", ".*", ".*"),
        _permissions("app", "/", "^app\\.", "^app\\.", "^app\\."),
        _permissions("someuser", "/", ".*", ".*", ".*"),
        _permissions("gen", "/", "^amq\\.gen-", "^amq\\.default$", "^amq\\.gen-"),
        _permissions("billing-app", "billing", "^billing\\.", "^(billing\\.|amq\\.default$)", "^billing\\."),
    ],
    "topic_permissions": [],
    "parameters": [],
    "global_parameters": [{"name": "cluster_name", "value": "rabbit@broker-1"}],
    "policies": [
        {"vhost": "billing", "name": "ttl", "pattern": "^billing\\.", "apply-to": "queues",
         "definition": {"message-ttl": 60000}, "priority": 0},
    ],
    "queues": [
        {"name": "billing.invoices", "vhost": "billing", "durable": True, "auto_delete": False, "arguments": {}},
    ],
    "exchanges": [],
    "bindings": [],
    "access_realms": [{"vhost": "/", "name": "/data/app", "exchanges": ["app.*"], "queues": ["app.*"]}],
    "realm_grants": [{"user": "app", "vhost": "/", "realm": "/data/app", "rights": ["passive", "active", "write", "read"]}],
}


def round_trip(queue: str, body: bytes) -> Callable[[pika.BlockingConnection], bytes]:
    """A pika scenario: declare ``queue``, publish ``body`` to it by the default exchange, get it back."""

    def scenario(connection: pika.BlockingConnection) -> bytes:
        channel = connection.channel()
        channel.queue_declare(queue)
        channel.basic_publish("", queue, body)
        return bytes(channel.basic_get(queue, auto_ack=True)[2])

    return scenario


class TapBroker:
    """What ``twistd amqp09 ARGUMENTS`` runs, on ports of 127.0.0.1 the system picks.

    The listeners are the tap's own endpoints with port 0; ``--transient``
    keeps the message store out of the way.
    """

    def __init__(self, *arguments: str) -> None:
        self.options = tap.Options()
        self.options.parseOptions(["--transient", "--listen", "tcp:0:interface=127.0.0.1", *arguments])
        self.listeners = [child for child in tap.makeService(self.options, reactor) if hasattr(child, "endpoint")]
        self.factory: ServerFactory = self.listeners[0].factory
        self.ports: list[Any] = []

    @property
    def security(self) -> Security:
        """The broker's security layer."""
        return self.factory.security

    @defer.inlineCallbacks
    def start(self) -> Any:
        """Listen on each endpoint; the port numbers, in the tap's order (TCP, then TLS)."""
        for listener in self.listeners:
            self.ports.append((yield listener.endpoint.listen(listener.factory)))
        return [port.getHost().port for port in self.ports]

    def stop(self) -> defer.Deferred[Any]:
        """Drop every connection and stop listening; fires when all is closed."""
        connections = list(self.factory.connections)
        waiting = [connection.whenLost() for connection in connections]
        for connection in connections:
            connection.dropConnection()
        waiting += [defer.maybeDeferred(port.stopListening) for port in self.ports]
        return defer.gatherResults(waiting)

    def all_lost(self) -> defer.Deferred[Any]:
        """Fires once the connections open now are gone."""
        return defer.gatherResults([connection.whenLost() for connection in list(self.factory.connections)])


class BrokerTestCase(TestCase):
    """Starts the tap's broker with :data:`DEFINITIONS` and a TLS port; clients for it."""

    timeout = 60
    #: Options added to the broker's command line.
    extra_options: tuple[str, ...] = ()

    @defer.inlineCallbacks
    def setUp(self) -> Any:  # type: ignore[override]  # trial waits for its Deferred
        self.pki = CertificateAuthority()
        self.directory = Path(self.mktemp())
        self.directory.mkdir()
        key, certificate, self.ca = self.pki.write_server_files(self.directory)
        self.definitions = self.directory / "definitions.json"
        self.definitions.write_text(json.dumps(DEFINITIONS), encoding="utf-8")
        self.broker = TapBroker(
            "--definitions", str(self.definitions), "--ssl-port", "0", "--ssl-interface", "127.0.0.1",
            "--ssl-key", str(key), "--ssl-cert", str(certificate), "--ssl-ca", str(self.ca),
            "--ssl-verify", "required", *self.extra_options,
        )
        self.port, self.tls_port = yield self.broker.start()
        self.addCleanup(self.broker.stop)

    # -- clients -----------------------------------------------------------------

    def pika(self, scenario: Callable[[pika.BlockingConnection], Any], **parameters: Any) -> defer.Deferred[Any]:
        """Run ``scenario`` with a pika connection (to the TCP port unless told), in a thread."""
        parameters.setdefault("port", self.port)

        def in_thread() -> Any:
            connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", **parameters))
            try:
                return scenario(connection)
            finally:
                if connection.is_open:
                    connection.close()

        return deferToThread(in_thread)

    def tls(self, common_name: str, credentials: Any = None) -> dict[str, Any]:
        """pika parameters for the TLS port with a client certificate naming ``common_name``."""
        key, certificate = self.pki.client(common_name)
        key_file, certificate_file = self.directory / "client.key", self.directory / "client.crt"
        key_file.write_bytes(pem_key(key))
        certificate_file.write_bytes(pem_certificate(certificate))
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(str(certificate_file), str(key_file))
        return {
            "port": self.tls_port,
            "ssl_options": pika.SSLOptions(context, "localhost"),
            "credentials": credentials or pika.credentials.ExternalCredentials(),
        }

    @defer.inlineCallbacks
    def txamqp(self, user: str, password: str) -> Any:
        """A txAMQP client speaking 0-9, logged in (AMQPLAIN, as txAMQP does)."""
        spec = txamqp.spec.load(os.path.join(_SPEC_DIR, "amqp0-9.xml"))
        client = yield ClientCreator(
            reactor, AMQClient, delegate=TwistedDelegate(), vhost="/", spec=spec, heartbeat=0
        ).connectTCP("127.0.0.1", self.port)
        self.addCleanup(client.transport.loseConnection)
        yield client.authenticate(user, password)
        return client

    @defer.inlineCallbacks
    def channels(self, client: Any, *numbers: int) -> Any:
        """Open these channels of a txAMQP client."""
        opened = []
        for number in numbers:
            channel = yield client.channel(number)
            yield channel.channel_open()
            opened.append(channel)
        return opened


class WiredBrokerTests(BrokerTestCase):
    # -- logging in ----------------------------------------------------------------

    @defer.inlineCallbacks
    def test_pika_plain_over_tls(self) -> Any:
        def scenario(connection: pika.BlockingConnection) -> Any:
            channel = connection.channel()
            channel.queue_declare("app.q")
            channel.exchange_declare("app.x", "fanout")
            channel.queue_bind("app.q", "app.x")
            channel.basic_publish("app.x", "", b"over tls")
            return channel.basic_get("app.q", auto_ack=True)[2]

        parameters = self.tls("app", pika.PlainCredentials("app", "secret"))
        self.assertEqual((yield self.pika(scenario, **parameters)), b"over tls")

    @defer.inlineCallbacks
    def test_large_bodies_over_tls(self) -> Any:
        """Deliveries, basic.get-ok and basic.return large enough to be sent
        from their parts still go through TLS (a body sent around it breaks
        the client's stream)."""
        bodies = [os.urandom(size) for size in (1 << 20, 3 << 20, 70_000)]

        def scenario(connection: pika.BlockingConnection) -> Any:
            channel = connection.channel()
            channel.queue_declare("app.large")
            channel.exchange_declare("app.large", "fanout")
            channel.queue_bind("app.large", "app.large")
            for body in bodies:
                channel.basic_publish("app.large", "", body)
            received = []
            for _method, _properties, body in channel.consume("app.large", auto_ack=True, inactivity_timeout=30):
                received.append(body)
                if len(received) == len(bodies):
                    break
            channel.cancel()
            gotten = []
            for body in bodies:
                channel.basic_publish("app.large", "", body)
                gotten.append(channel.basic_get("app.large", auto_ack=True)[2])
            channel.exchange_declare("app.unbound", "direct")
            channel.confirm_delivery()
            returned = []
            for body in bodies:
                try:
                    channel.basic_publish("app.unbound", "nowhere", body, mandatory=True)
                except pika.exceptions.UnroutableError as error:
                    returned += [message.body for message in error.messages]
            return received, gotten, returned

        parameters = self.tls("app", pika.PlainCredentials("app", "secret"))
        self.assertEqual((yield self.pika(scenario, **parameters)), (bodies, bodies, bodies))

    @defer.inlineCallbacks
    def test_pika_external_over_tls(self) -> Any:
        """someuser has no password: the certificate is the only way in; logout follows the close."""
        self.assertEqual((yield self.pika(round_trip("cert.q", b"signed"), **self.tls("someuser"))), b"signed")
        yield self.broker.all_lost()
        self.assertEqual(self.broker.security.realm.connections("someuser"), 0)

    @defer.inlineCallbacks
    def test_pika_external_for_an_unknown_user(self) -> Any:
        error = yield self.assertFailure(self.pika(lambda c: None, **self.tls("stranger")), Exception)
        self.assertIn(refusal_text("EXTERNAL"), str(error))

    @defer.inlineCallbacks
    def test_pika_wrong_password_is_refused_and_throttled(self) -> Any:
        credentials = pika.PlainCredentials("app", "wrong")
        error = yield self.assertFailure(self.pika(lambda c: None, credentials=credentials), Exception)
        self.assertIn(refusal_text("PLAIN"), str(error))
        self.assertEqual(self.broker.security.throttle.delay("app", "127.0.0.1"), 0.5)

    @defer.inlineCallbacks
    def test_py_amqp_amqplain(self) -> Any:
        def scenario() -> Any:
            connection = amqp.Connection(
                f"127.0.0.1:{self.port}", userid="app", password="secret", login_method="AMQPLAIN"
            )
            connection.connect()
            try:
                connection.channel().queue_declare("app.in", auto_delete=False)
                try:
                    connection.channel().queue_purge("elsewhere")
                except amqp.exceptions.AccessRefused as error:
                    return error.reply_code, error.reply_text
            finally:
                connection.close()

        code, text = yield deferToThread(scenario)
        self.assertEqual(code, 403)
        self.assertIn("queue 'elsewhere' in vhost '/' refused for user 'app': queue.purge needs read permission", text)
        self.assertIn("app.in", self.broker.factory.broker.vhosts["/"].queues)

    # -- virtual hosts ---------------------------------------------------------------

    @defer.inlineCallbacks
    def test_pika_unknown_vhost(self) -> Any:
        error = yield self.assertFailure(self.pika(lambda c: None, virtual_host="nowhere"), ProbableAccessDeniedError)
        # 0-9-1 connections answer as RabbitMQ 3.10 does (402 on 0-8/0-9).
        self.assertIn("(530) 'NOT_ALLOWED - vhost nowhere not found'", str(error))

    @defer.inlineCallbacks
    def test_pika_vhost_without_permissions(self) -> Any:
        error = yield self.assertFailure(self.pika(lambda c: None, virtual_host="billing"), ProbableAccessDeniedError)
        self.assertIn(
            "(403) \"ACCESS_REFUSED - access to vhost 'billing' refused for user 'guest': they have no permissions on it",
            str(error),
        )

    # -- permissions -------------------------------------------------------------------

    @defer.inlineCallbacks
    def test_pika_permission_denials(self) -> Any:
        """Each kind of method is refused with 403 naming the permission RabbitMQ's table asks for."""
        fanout = {"alternate-exchange": "amq.fanout"}
        attempts: list[tuple[Callable[[Any], Any], str, str]] = [
            (lambda c: c.exchange_declare("other.x"), "configure", "exchange.declare needs configure permission on it"),
            (lambda c: c.exchange_delete("other.x"), "configure", "exchange.delete needs configure"),
            (lambda c: c.queue_declare("other.q"), "configure", "queue.declare needs configure"),
            (lambda c: c.queue_delete("other.q"), "configure", "queue.delete needs configure"),
            (lambda c: c.exchange_declare("app.ae", arguments=fanout), "write", "exchange 'amq.fanout'"),
            (lambda c: c.queue_declare("app.dl", arguments={"x-dead-letter-exchange": "amq.fanout"}), "write",
             "exchange 'amq.fanout'"),
            (lambda c: c.queue_bind("other.q", "app.x"), "write", "queue 'other.q'"),
            (lambda c: c.exchange_bind("amq.direct", "app.x"), "write", "exchange.bind needs write"),
            (lambda c: (c.confirm_delivery(), c.basic_publish("amq.direct", "k", b"x")), "write",
             "basic.publish needs write"),
            (lambda c: c.queue_bind("app.q", "amq.direct"), "read", "queue.bind needs read permission"),
            (lambda c: c.queue_unbind("app.q", "amq.direct"), "read", "queue.unbind needs read"),
            (lambda c: c.exchange_bind("app.x", "amq.direct"), "read", "exchange 'amq.direct'"),
            (lambda c: c.queue_purge("other.q"), "read", "queue.purge needs read"),
            (lambda c: c.basic_get("other.q"), "read", "basic.get needs read"),
            (lambda c: c.basic_consume("other.q", lambda *a: None), "read", "basic.consume needs read"),
        ]

        def scenario(connection: pika.BlockingConnection) -> Any:
            setup = connection.channel()
            setup.queue_declare("app.q")
            setup.exchange_declare("app.x")
            outcomes = []
            for attempt, _, _ in attempts:
                try:
                    attempt(connection.channel())
                except ChannelClosedByBroker as error:
                    outcomes.append((error.reply_code, error.reply_text))
                else:
                    outcomes.append((200, "not refused"))
            return outcomes

        outcomes = yield self.pika(scenario, credentials=pika.PlainCredentials("app", "secret"))
        for (code, text), (_, permission, words) in zip(outcomes, attempts):
            self.assertEqual(code, 403, text)
            self.assertIn(f"needs {permission} permission", text)
            self.assertIn(words, text)

    @defer.inlineCallbacks
    def test_server_named_queues_are_checked_on_their_real_name(self) -> Any:
        def declare(connection: pika.BlockingConnection) -> Any:
            try:
                return connection.channel().queue_declare("", exclusive=True).method.queue
            except ChannelClosedByBroker as error:
                return error.reply_text

        refused = yield self.pika(declare, credentials=pika.PlainCredentials("app", "secret"))
        self.assertRegex(refused, "access to queue 'amq\\.gen-[-\\w]{22}' .* queue.declare needs configure")
        named = yield self.pika(declare, credentials=pika.PlainCredentials("gen", "gen"))
        self.assertRegex(named, "^amq\\.gen-[-\\w]{22}$")

    # -- access realms and tickets (0-9) -------------------------------------------------

    @defer.inlineCallbacks
    def test_txamqp_0_9_realm_ticket(self) -> Any:
        client = yield self.txamqp("app", "secret")
        (channel,) = yield self.channels(client, 1)
        ticket = (yield channel.access_request(realm="/data/app", active=True, write=True, read=True)).ticket
        yield channel.exchange_declare(ticket=ticket, exchange="app.events", type="topic")
        yield channel.queue_declare(ticket=ticket, queue="app.inbox")
        yield channel.queue_bind(ticket=ticket, queue="app.inbox", exchange="app.events", routing_key="#")
        with self.assertRaises(ChannelClosed) as caught:
            yield channel.queue_declare(ticket=ticket, queue="other.inbox")
        self.assertIn("queue 'other.inbox' is not in realm '/data/app' of access ticket", str(caught.exception))

    @defer.inlineCallbacks
    def test_txamqp_0_9_ticket_of_another_channel(self) -> Any:
        client = yield self.txamqp("app", "secret")
        first, second = yield self.channels(client, 1, 2)
        ticket = (yield first.access_request(realm="/data/app", active=True)).ticket
        with self.assertRaises(ConnectionClosed) as caught:
            yield second.queue_declare(ticket=ticket, queue="app.other")
        self.assertIn("530", str(caught.exception))
        self.assertIn("granted on channel 1 and may not be used on channel 2", str(caught.exception))

    @defer.inlineCallbacks
    def test_txamqp_0_9_tickets_go_with_their_channel(self) -> Any:
        client = yield self.txamqp("app", "secret")
        first, second = yield self.channels(client, 1, 2)
        ticket = (yield first.access_request(realm="/data/app", active=True)).ticket
        yield first.channel_close(reply_code=200, reply_text="done", class_id=0, method_id=0)
        with self.assertRaises(ChannelClosed) as caught:
            yield second.queue_declare(ticket=ticket, queue="app.other")
        self.assertIn(f"access ticket {ticket} is not valid on this connection", str(caught.exception))

    @defer.inlineCallbacks
    def test_txamqp_0_9_request_for_rights_not_held(self) -> Any:
        """app holds no exclusive right: the refusal closes the connection, as 0-9 says."""
        client = yield self.txamqp("app", "secret")
        (channel,) = yield self.channels(client, 1)
        with self.assertRaises(ConnectionClosed) as caught:
            yield channel.access_request(realm="/data/app", exclusive=True)
        self.assertIn("access to realm '/data/app' in vhost '/' refused for user 'app'", str(caught.exception))

    @defer.inlineCallbacks
    def test_ticket_zero_accepted_by_default(self) -> Any:
        client = yield self.txamqp("app", "secret")
        (channel,) = yield self.channels(client, 1)
        yield channel.queue_declare(ticket=0, queue="app.plain")
        self.assertIn("app.plain", self.broker.factory.broker.vhosts["/"].queues)

    # -- definitions ---------------------------------------------------------------------

    @defer.inlineCallbacks
    def test_definitions_loaded_by_the_tap_and_exported_again(self) -> Any:
        """billing-app logs in with the MD5 hash RabbitMQ wrote; the export equals the file."""
        scenario = round_trip("billing.invoices", b"invoice")
        credentials = pika.PlainCredentials("billing-app", "simon")
        self.assertEqual((yield self.pika(scenario, virtual_host="billing", credentials=credentials)), b"invoice")
        self.assertEqual(sorted(self.broker.factory.broker.vhosts), ["/", "billing"])
        exported = self.directory / "exported.json"
        self.broker.options.definitions.write(exported)
        self.assertEqual(json.loads(exported.read_text(encoding="utf-8")), DEFINITIONS)


class TicketsRequiredTests(BrokerTestCase):
    extra_options = ("--require-tickets",)

    @defer.inlineCallbacks
    def test_ticket_zero_refused_on_0_9_only(self) -> Any:
        """0-9 clients must request tickets; 0-9-1 clients never can and need not."""
        client = yield self.txamqp("app", "secret")
        (channel,) = yield self.channels(client, 1)
        with self.assertRaises(ChannelClosed) as caught:
            yield channel.queue_declare(ticket=0, queue="app.plain")
        self.assertIn("this broker requires access tickets: call access.request", str(caught.exception))

        def scenario(connection: pika.BlockingConnection) -> Any:
            return connection.channel().queue_declare("app.pika").method.queue

        self.assertEqual((yield self.pika(scenario, credentials=pika.PlainCredentials("app", "secret"))), "app.pika")


def _database() -> UserDatabase:
    """guest everywhere on /, with every right on realm /data/app; app with a password."""
    database = UserDatabase.default()
    database.add_user("app", "secret")
    database.set_permissions("app", "/", Permissions("^app\\.", "^app\\.", "^app\\."))
    database.add_realm("/", AccessRealm("/data/app", ("app.*",), ("app.*",)))
    database.grant("guest", "/", "/data/app", list(Right))
    return database


class NegotiationSecurityTests(SynchronousTestCase):
    """The server connection's security, frame by frame, on a Clock."""

    def setUp(self) -> None:
        self.clock = Clock()
        self.security = Security(_database(), self.clock)
        self.factory = ServerFactory(self.clock, security=self.security)

    def start(self, host: str = "127.0.0.1", version: ProtocolVersion = AMQP0_9_1) -> ScriptedClient:
        """A client that has sent the protocol header and read connection.start."""
        peer = ScriptedClient(self.factory, version, host=host, handshake=False)
        peer.feed(version.header)
        self.mechanisms = peer.expect(0, "connection.start").mechanisms
        return peer

    def start_ok(self, peer: ScriptedClient, user: str, password: str, mechanism: str = "PLAIN") -> None:
        response = f"\0{user}\0{password}".encode()
        peer.send(0, peer.spec.ConnectionStartOk(client_properties={}, mechanism=mechanism, response=response))

    def refusal(self, peer: ScriptedClient) -> str:
        """The connection.close 403 the peer gets once the throttle's delay is over."""
        self.clock.advance(self.security.throttle.cap)
        close = peer.expect(0, "connection.close")
        self.assertEqual((close.reply_code, close.class_id, close.method_id), (403, 10, 11))
        return str(close.reply_text)

    def test_mechanisms_offered_on_plain_tcp(self) -> None:
        self.start()
        self.assertEqual(self.mechanisms, b"PLAIN AMQPLAIN")

    def test_a_mechanism_not_offered_is_refused(self) -> None:
        self.factory.security = Security(_database(), self.clock, mechanisms=MechanismRegistry(["AMQPLAIN"]))
        self.security = self.factory.security
        peer = self.start()
        self.assertEqual(self.mechanisms, b"AMQPLAIN")
        self.start_ok(peer, "guest", "guest")
        self.assertIn("authentication mechanism 'PLAIN' is not offered on this connection", self.refusal(peer))

    def test_guest_refused_from_a_remote_host(self) -> None:
        peer = self.start(host="10.1.2.3")
        self.start_ok(peer, "guest", "guest")
        self.assertEqual(self.refusal(peer), "ACCESS_REFUSED - user 'guest' can only connect via localhost")
        remote_app = self.start(host="10.1.2.4")
        self.start_ok(remote_app, "app", "secret")
        remote_app.expect(0, "connection.tune")

    def test_wrong_password_refused_without_saying_why(self) -> None:
        for user in ["app", "nobody"]:
            peer = self.start(host=f"10.0.0.{len(user)}")
            self.start_ok(peer, user, "wrong")
            self.assertEqual(self.refusal(peer), refusal_text("PLAIN"))

    def refused_after(self, user: str, host: str = "127.0.0.1") -> float:
        """Seconds of the Clock until a wrong password of *user* from *host* is refused."""
        peer = self.start(host=host)
        self.start_ok(peer, user, "wrong")
        waited = 0.0
        while not peer.transport.value():
            self.clock.advance(0.25)
            waited += 0.25
        close = peer.expect(0, "connection.close")
        self.assertEqual(close.reply_code, 403)
        return waited

    def test_refusals_wait_longer_per_user_and_host(self) -> None:
        """Each failure of a user from a host doubles the wait of its next
        refusal; other users and other hosts keep their own count."""
        self.assertEqual([self.refused_after("app") for _ in range(6)], [0.5, 1.0, 2.0, 4.0, 8.0, 8.0])
        self.assertEqual(self.refused_after("guest"), 0.5)
        self.assertEqual(self.refused_after("app", host="10.9.9.9"), 0.5)

    def test_correct_login_is_not_delayed_by_failures(self) -> None:
        """After failures of another user and of the same user from the same
        host, a correct password is let in with no time passing."""
        for user in ["guest", "app", "app", "app"]:
            self.refused_after(user)
        for user, password in [("guest", "guest"), ("app", "secret")]:
            peer = self.start()
            self.start_ok(peer, user, password)
            peer.expect(0, "connection.tune")

    def test_correct_login_is_let_in_while_refusals_wait(self) -> None:
        waiting = [self.start() for _ in range(3)]
        for peer in waiting:
            self.start_ok(peer, "app", "wrong")
        right = self.start()
        self.start_ok(right, "app", "secret")
        right.expect(0, "connection.tune")
        self.assertEqual([peer.frames() for peer in waiting], [[], [], []])

    def test_refusals_held_per_host_are_bounded(self) -> None:
        """A host holding max_held_per_host refusals still gets its correct
        logins in at once; its wrong ones are refused at once, saying why;
        once the held refusals are answered, the next wrong one waits again."""
        self.security.throttle.max_held_per_host = 2
        for _ in range(2):
            self.start_ok(self.start(), "app", "wrong")
        right = self.start()
        self.start_ok(right, "app", "secret")
        right.expect(0, "connection.tune")
        wrong = self.start()
        self.start_ok(wrong, "app", "wrong")
        close = wrong.expect(0, "connection.close")
        self.assertEqual(
            (close.reply_code, close.reply_text),
            (403, f"{refusal_text('PLAIN')} Answered at once: 2 refused logins from 127.0.0.1 "
                  "are already waiting for their reply."),
        )
        self.clock.advance(self.security.throttle.cap)
        self.assertEqual(self.security.throttle.held("127.0.0.1"), 0)
        held = self.start()
        self.start_ok(held, "app", "wrong")
        self.assertEqual(held.frames(), [])

    def test_refusals_are_logged_with_user_and_host(self) -> None:
        events: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(events.append)
        self.addCleanup(globalLogPublisher.removeObserver, events.append)
        self.refused_after("app", host="10.1.1.1")
        self.refused_after("guest", host="10.1.1.2")
        lines = [formatEvent(event) for event in events if event.get("log_namespace") == "txamqp09.broker"]
        self.assertEqual(
            lines,
            [
                "login refused: user 'app' from 10.1.1.1 using PLAIN: unknown user or wrong password",
                "login refused: user 'guest' from 10.1.1.2 using PLAIN: unknown user or wrong password",
            ],
        )

    def test_second_start_ok_while_the_refusal_waits(self) -> None:
        peer = self.start()
        self.start_ok(peer, "app", "wrong")
        self.start_ok(peer, "app", "secret")
        close = peer.expect(0, "connection.close")
        self.assertEqual((close.reply_code, close.class_id, close.method_id), (503, 10, 11))
        self.clock.advance(self.security.throttle.cap)
        self.assertEqual(peer.frames(), [])
        self.assertEqual(self.security.realm.connections("app"), 0)

    def test_connection_lost_while_the_refusal_waits(self) -> None:
        """The wait is cancelled with the connection's own timers; the host's
        count of waiting refusals goes back down."""
        calls = list(self.clock.getDelayedCalls())
        peer = self.start()
        self.start_ok(peer, "app", "wrong")
        self.assertEqual(self.security.throttle.held("127.0.0.1"), 1)
        peer.server.connectionLost(None)
        self.assertEqual(self.clock.getDelayedCalls(), calls)
        self.assertEqual(self.security.throttle.held("127.0.0.1"), 0)

    def test_logout_when_the_connection_is_lost(self) -> None:
        peer = ScriptedClient(self.factory)
        self.assertEqual(self.security.realm.connections("guest"), 1)
        peer.server.connectionLost(None)
        self.assertEqual(self.security.realm.connections("guest"), 0)

    def publish_refusal(self, peer: ScriptedClient, exchange: str) -> str | None:
        """basic.publish to ``exchange``; the channel.close text if it is refused."""
        peer.publish(1, "k", b"m", exchange=exchange)
        methods = peer.methods()
        if not methods:
            return None
        (_, close), = methods
        self.assertEqual((close.NAME, close.reply_code, close.class_id, close.method_id), ("channel.close", 403, 60, 40))
        peer.send(1, peer.spec.ChannelCloseOk())
        peer.open(1)
        return str(close.reply_text)

    def test_remembered_publish_check_follows_a_permission_change(self) -> None:
        peer = ScriptedClient(self.factory)
        self.assertIsNone(self.publish_refusal(peer, "amq.direct"))
        self.security.database.set_permissions("guest", "/", Permissions(".*", "^amq\\.topic$", ".*"))
        refusal = self.publish_refusal(peer, "amq.direct")
        assert refusal is not None
        self.assertIn("basic.publish needs write permission", refusal)

    def test_remembered_publish_check_follows_tickets_of_other_connections(self) -> None:
        """An exclusive ticket elsewhere locks the realm; closing its channel, or losing its connection, frees it."""
        publisher, holder = ScriptedClient(self.factory, AMQP0_9), ScriptedClient(self.factory, AMQP0_9)
        publisher.send(1, publisher.spec.ExchangeDeclare(exchange="app.x", type="fanout"))
        publisher.expect(1, "exchange.declare-ok")
        self.assertIsNone(self.publish_refusal(publisher, "app.x"))
        holder.send(1, holder.spec.AccessRequest(realm="/data/app", exclusive=True, active=True, write=True))
        holder.expect(1, "access.request-ok")
        refusal = self.publish_refusal(publisher, "app.x")
        assert refusal is not None
        self.assertIn("is in realm '/data/app', which another channel holds exclusively", refusal)
        holder.send(1, holder.spec.ChannelClose(reply_code=200, reply_text="", class_id=0, method_id=0))
        holder.expect(1, "channel.close-ok")
        self.assertIsNone(self.publish_refusal(publisher, "app.x"))
        holder.open(1)
        holder.send(1, holder.spec.AccessRequest(realm="/data/app", exclusive=True, active=True, write=True))
        holder.expect(1, "access.request-ok")
        self.assertIsNotNone(self.publish_refusal(publisher, "app.x"))
        holder.server.connectionLost(None)
        self.assertIsNone(self.publish_refusal(publisher, "app.x"))

    def test_default_security_is_rabbitmqs(self) -> None:
        """A connection made without a factory has guest/guest on / from loopback."""
        connection = ServerConnection(self.clock)
        self.assertEqual(list(connection.security.database.users), ["guest"])
        self.assertEqual(list(self.factory.broker.vhosts), ["/"])
