"""Real clients over 127.0.0.1 against the broker wired as docs/security.rst says.

pika over TLS with EXTERNAL, a wrong password, an unknown vhost and permission
denials; py-amqp with AMQPLAIN; txAMQP speaking 0-9 with realm tickets.
"""

from __future__ import annotations

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
from twisted.internet.endpoints import SSL4ServerEndpoint, TCP4ServerEndpoint
from twisted.internet.protocol import ClientCreator
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase
from txamqp.client import Closed, TwistedDelegate
from txamqp.protocol import AMQClient

from txamqp09.broker.auth.permissions import Permissions
from txamqp09.broker.auth.realms import AccessRealm, Right
from txamqp09.broker.auth.security import Security, refusal_text
from txamqp09.broker.auth.tls import TLSSettings, VerifyMode, context_factory
from txamqp09.broker.auth.users import UserDatabase, VirtualHost

from .certs import TestPKI, pem_certificate, pem_key
from .wiring import SecuredFactory

_SPEC_DIR = Path(__file__).parent.parent.parent / "spec"


def database() -> UserDatabase:
    """guest; app (only app.* on /, a realm /data/app); someuser (certificate only)."""
    db = UserDatabase.default()
    db.add_vhost(VirtualHost("billing"))
    db.add_user("app", "secret")
    db.set_permissions("app", "/", Permissions("^app\\.", "^app\\.", "^app\\."))
    db.add_realm("/", AccessRealm("/data/app", ("app.*",), ("app.*",)))
    db.grant("app", "/", "/data/app", [Right.PASSIVE, Right.ACTIVE, Right.WRITE, Right.READ])
    db.add_user("someuser")
    db.set_permissions("someuser", "/", Permissions(".*", ".*", ".*"))
    return db


class WiredBrokerTests(TestCase):
    timeout = 60

    @defer.inlineCallbacks
    def setUp(self) -> Any:
        self.pki = TestPKI()
        self.directory = Path(self.mktemp())
        self.directory.mkdir()
        key, certificate, self.ca = self.pki.write_server_files(self.directory)
        self.factory = SecuredFactory(reactor, Security(database(), reactor))
        tls = context_factory(TLSSettings(key, certificate, self.ca, VerifyMode.REQUIRED))
        tcp_port = yield TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(self.factory)
        tls_port = yield SSL4ServerEndpoint(reactor, 0, tls, interface="127.0.0.1").listen(self.factory)
        self.port, self.tls_port = tcp_port.getHost().port, tls_port.getHost().port
        self.addCleanup(self.stop, [tcp_port, tls_port])

    def stop(self, ports: list[Any]) -> defer.Deferred[Any]:
        waiting = [connection.whenLost() for connection in list(self.factory.connections)]
        for connection in list(self.factory.connections):
            connection.dropConnection()
        waiting += [defer.maybeDeferred(port.stopListening) for port in ports]
        return defer.gatherResults(waiting)

    def pika(self, scenario: Callable[[pika.BlockingConnection], Any], **parameters: Any) -> defer.Deferred[Any]:
        def in_thread() -> Any:
            connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", **parameters))
            try:
                return scenario(connection)
            finally:
                if connection.is_open:
                    connection.close()

        return deferToThread(in_thread)

    def tls_parameters(self, common_name: str) -> dict[str, Any]:
        key, certificate = self.pki.client(common_name)
        key_file, certificate_file = self.directory / "client.key", self.directory / "client.crt"
        key_file.write_bytes(pem_key(key))
        certificate_file.write_bytes(pem_certificate(certificate))
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(str(certificate_file), str(key_file))
        return {
            "port": self.tls_port,
            "ssl_options": pika.SSLOptions(context, "localhost"),
            "credentials": pika.credentials.ExternalCredentials(),
        }

    def refused(self, error: ChannelClosedByBroker) -> tuple[int, str]:
        return error.reply_code, error.reply_text

    @defer.inlineCallbacks
    def test_pika_external_over_tls(self) -> Any:
        def scenario(connection: pika.BlockingConnection) -> Any:
            channel = connection.channel()
            channel.queue_declare("cert.q")
            channel.basic_publish("", "cert.q", b"signed")
            return channel.basic_get("cert.q", auto_ack=True)[2]

        self.assertEqual((yield self.pika(scenario, **self.tls_parameters("someuser"))), b"signed")
        yield defer.gatherResults([connection.whenLost() for connection in list(self.factory.connections)])
        self.assertEqual(self.factory.security.realm.connections("someuser"), 0)

    @defer.inlineCallbacks
    def test_pika_external_for_an_unknown_user(self) -> Any:
        error = yield self.assertFailure(self.pika(lambda c: None, **self.tls_parameters("stranger")), Exception)
        self.assertIn(refusal_text("EXTERNAL"), str(error))

    @defer.inlineCallbacks
    def test_pika_wrong_password(self) -> Any:
        credentials = pika.PlainCredentials("app", "wrong")
        error = yield self.assertFailure(self.pika(lambda c: None, port=self.port, credentials=credentials), Exception)
        self.assertIn(refusal_text("PLAIN"), str(error))

    @defer.inlineCallbacks
    def test_pika_unknown_vhost(self) -> Any:
        error = yield self.assertFailure(self.pika(lambda c: None, port=self.port, virtual_host="nowhere"), ProbableAccessDeniedError)
        self.assertIn('(402) "virtual host \'nowhere\' does not exist"', str(error))

    @defer.inlineCallbacks
    def test_pika_vhost_without_permissions(self) -> Any:
        error = yield self.assertFailure(self.pika(lambda c: None, port=self.port, virtual_host="billing"), ProbableAccessDeniedError)
        self.assertIn(
            "(403) \"ACCESS_REFUSED - access to vhost 'billing' refused for user 'guest': they have no permissions on it",
            str(error),
        )

    @defer.inlineCallbacks
    def test_pika_permission_denials(self) -> Any:
        credentials = pika.PlainCredentials("app", "secret")

        def scenario(connection: pika.BlockingConnection) -> Any:
            setup = connection.channel()
            setup.queue_declare("app.q")
            setup.exchange_declare("app.x")
            outcomes = []
            for attempt in [
                lambda channel: channel.queue_declare("other.q"),
                lambda channel: channel.exchange_declare("other.x"),
                lambda channel: channel.queue_bind("app.q", "amq.direct"),
                lambda channel: channel.basic_get("amq.gen-foreign"),
                lambda channel: (channel.confirm_delivery(), channel.basic_publish("amq.direct", "k", b"x")),
            ]:
                channel = connection.channel()
                try:
                    attempt(channel)
                except ChannelClosedByBroker as error:
                    outcomes.append(self.refused(error))
            return outcomes

        outcomes = yield self.pika(scenario, port=self.port, credentials=credentials)
        self.assertEqual([code for code, _ in outcomes], [403] * 5)
        for (_, text), needed in zip(outcomes, ["configure", "configure", "read", "read", "write"]):
            self.assertIn(f"needs {needed} permission", text)

    @defer.inlineCallbacks
    def test_py_amqp_amqplain(self) -> Any:
        def scenario() -> Any:
            connection = amqp.Connection(f"127.0.0.1:{self.port}", userid="app", password="secret", login_method="AMQPLAIN")
            connection.connect()
            try:
                channel = connection.channel()
                channel.queue_declare("app.in", auto_delete=False)
                try:
                    connection.channel().queue_purge("elsewhere")
                except amqp.exceptions.AccessRefused as error:
                    return error.reply_code, error.reply_text
            finally:
                connection.close()

        code, text = yield deferToThread(scenario)
        self.assertEqual(code, 403)
        self.assertIn("queue.purge needs read permission", text)

    @defer.inlineCallbacks
    def test_txamqp_0_9_realm_tickets(self) -> Any:
        spec = txamqp.spec.load(os.path.join(_SPEC_DIR, "amqp0-9.xml"))
        client = yield ClientCreator(
            reactor, AMQClient, delegate=TwistedDelegate(), vhost="/", spec=spec, heartbeat=0
        ).connectTCP("127.0.0.1", self.port)
        yield client.authenticate("app", "secret")
        self.addCleanup(client.transport.loseConnection)
        first = yield client.channel(1)
        second = yield client.channel(2)
        yield first.channel_open()
        yield second.channel_open()
        ticket = (yield first.access_request(realm="/data/app", active=True, write=True, read=True)).ticket
        yield first.exchange_declare(ticket=ticket, exchange="app.events", type="topic")
        yield first.queue_declare(ticket=ticket, queue="app.inbox")
        with self.assertRaises(Closed) as caught:
            yield second.queue_declare(ticket=ticket, queue="app.other")
        self.assertIn("530", str(caught.exception))
        self.assertIn("granted on channel 1 and may not be used on channel 2", str(caught.exception))
