"""TLS listeners over 127.0.0.1: handshakes, client certificates, EXTERNAL, old versions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cryptography.x509.oid import NameOID
from OpenSSL import SSL, crypto
from twisted.internet import reactor
from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.internet.endpoints import SSL4ClientEndpoint, SSL4ServerEndpoint
from twisted.internet.interfaces import IHandshakeListener, IOpenSSLContextFactory
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.ssl import Certificate, PrivateCertificate, optionsForClientTLS
from twisted.python import usage
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase, TestCase
from zope.interface import implementer

from txamqp09.testing.certificates import CertificateAuthority, pem_certificate, pem_key
from tests.broker.auth.test_definitions import EXPORT
from txamqp09 import tap
from txamqp09.broker.auth.options import SecurityOptions
from txamqp09.broker.auth.sasl import MechanismRegistry, PeerInfo, parse_external
from txamqp09.broker.auth.tls import TLSSettings, VerifyMode, context_factory


@implementer(IHandshakeListener)
class Endpoint(Protocol):
    """Either side of a test connection: reports the handshake and the loss."""

    def __init__(self) -> None:
        self.handshake: Deferred[PeerInfo] = Deferred()
        self.lost: Deferred[None] = Deferred()
        self.reason: Failure | None = None

    def handshakeCompleted(self) -> None:
        self.handshake.callback(PeerInfo.from_transport(self.transport))  # type: ignore[arg-type]

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self.reason = reason
        if not self.handshake.called:
            self.handshake.errback(reason)
        self.lost.callback(None)


class Recording(Factory):
    """Builds :class:`Endpoint` protocols and keeps them."""

    def __init__(self) -> None:
        self.built: list[Endpoint] = []
        self.first: Deferred[Endpoint] = Deferred()

    def buildProtocol(self, addr: Any) -> Endpoint:
        protocol = Endpoint()
        self.built.append(protocol)
        if not self.first.called:
            self.first.callback(protocol)
        return protocol


@implementer(IOpenSSLContextFactory)
class _RawContext:
    """A context factory around a hand-made pyOpenSSL context."""

    def __init__(self, context: SSL.Context) -> None:
        self.context = context

    def getContext(self) -> SSL.Context:
        return self.context


def pinned(pki: CertificateAuthority, version: int, server: bool) -> _RawContext:
    """A context that speaks only one TLS version (old ones included, as old peers did)."""
    context = SSL.Context(SSL.TLS_METHOD)
    context.set_min_proto_version(version)
    context.set_max_proto_version(version)
    context.set_cipher_list(b"DEFAULT:@SECLEVEL=0")
    if server:
        key, certificate = pki.server()
        context.use_privatekey(crypto.PKey.from_cryptography_key(key))
        context.use_certificate(crypto.X509.from_cryptography(certificate))
    return _RawContext(context)


class TLSTestCase(TestCase):
    """Starts TLS listeners on 127.0.0.1 and connects to them."""

    def setUp(self) -> None:
        self.pki = CertificateAuthority()
        self.directory = Path(self.mktemp())
        self.directory.mkdir()
        self.key, self.certificate, self.ca = self.pki.write_server_files(self.directory)

    def settings(self, verify: VerifyMode) -> TLSSettings:
        return TLSSettings(self.key, self.certificate, self.ca, verify)

    @inlineCallbacks
    def listen(self, context: Any) -> Any:
        factory = Recording()
        port = yield SSL4ServerEndpoint(reactor, 0, context, interface="127.0.0.1").listen(factory)
        self.addCleanup(port.stopListening)
        return factory, port.getHost().port

    def client_options(self, common_name: str | None = None, ca: CertificateAuthority | None = None) -> Any:
        trusted = Certificate.loadPEM(pem_certificate((ca or self.pki).ca_certificate))
        identity = None
        if common_name is not None:
            key, certificate = self.pki.client(common_name)
            identity = PrivateCertificate.loadPEM(pem_key(key) + pem_certificate(certificate))
        return optionsForClientTLS("localhost", trustRoot=trusted, clientCertificate=identity)

    @inlineCallbacks
    def connect(self, port: int, options: Any) -> Any:
        client = yield SSL4ClientEndpoint(reactor, "127.0.0.1", port, options).connect(
            Factory.forProtocol(Endpoint)
        )
        self.addCleanup(lambda: client.lost)
        self.addCleanup(client.transport.loseConnection)
        return client

    @inlineCallbacks
    def handshake(self, verify: VerifyMode, options: Any) -> Any:
        """Connect with ``options``; (client's view, server's view) of a finished handshake."""
        factory, port = yield self.listen(context_factory(self.settings(verify)))
        client = yield self.connect(port, options)
        client_view = yield client.handshake
        server = yield factory.first
        server_view = yield server.handshake
        return client_view, server_view

    @inlineCallbacks
    def assertHandshakeFails(self, server_context: Any, options: Any) -> Any:
        """Neither side completes the handshake; the server side's loss reason."""
        factory, port = yield self.listen(server_context)
        client = yield self.connect(port, options)
        server = yield factory.first
        yield self.assertFailure(server.handshake, SSL.Error)
        yield client.lost
        client.handshake.addErrback(lambda failure: failure.trap(SSL.Error))
        return server


class HandshakeTests(TLSTestCase):
    @inlineCallbacks
    def test_client_verifies_server_and_external_names_the_user(self) -> None:
        client_view, server_view = yield self.handshake(VerifyMode.REQUIRED, self.client_options("someuser"))
        subject = client_view.certificate
        self.assertEqual(subject.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value, "localhost")
        self.assertEqual(MechanismRegistry().mechanisms_field(server_view), b"EXTERNAL PLAIN AMQPLAIN")
        self.assertEqual(parse_external(b"", server_view).username, "someuser")
        self.assertTrue(server_view.is_loopback)

    @inlineCallbacks
    def test_client_refuses_a_server_from_another_ca(self) -> None:
        factory, port = yield self.listen(context_factory(self.settings(VerifyMode.NONE)))
        client = yield self.connect(port, self.client_options(ca=CertificateAuthority("another CA")))
        yield self.assertFailure(client.handshake, SSL.Error)
        server = yield factory.first
        yield self.assertFailure(server.handshake, SSL.Error)

    @inlineCallbacks
    def test_client_without_certificate_refused_when_required(self) -> None:
        yield self.assertHandshakeFails(context_factory(self.settings(VerifyMode.REQUIRED)), self.client_options())

    @inlineCallbacks
    def test_client_certificate_from_another_ca_refused(self) -> None:
        stranger = CertificateAuthority("stranger CA")
        key, certificate = stranger.client("someuser")
        identity = PrivateCertificate.loadPEM(pem_key(key) + pem_certificate(certificate))
        options = optionsForClientTLS(
            "localhost", trustRoot=Certificate.loadPEM(pem_certificate(self.pki.ca_certificate)), clientCertificate=identity
        )
        yield self.assertHandshakeFails(context_factory(self.settings(VerifyMode.PEER)), options)

    @inlineCallbacks
    def test_peer_mode_lets_clients_without_certificate_in(self) -> None:
        _, server_view = yield self.handshake(VerifyMode.PEER, self.client_options())
        self.assertIsNone(server_view.certificate)
        self.assertEqual(MechanismRegistry().mechanisms_field(server_view), b"PLAIN AMQPLAIN")

    @inlineCallbacks
    def test_peer_mode_reads_a_certificate_when_sent(self) -> None:
        _, server_view = yield self.handshake(VerifyMode.PEER, self.client_options("someuser"))
        self.assertEqual(parse_external(b"", server_view).username, "someuser")

    @inlineCallbacks
    def test_no_client_certificate_is_asked_for_without_verification(self) -> None:
        _, server_view = yield self.handshake(VerifyMode.NONE, self.client_options("someuser"))
        self.assertIsNone(server_view.certificate)

    @inlineCallbacks
    def test_tls_1_1_is_refused(self) -> None:
        yield self.assertHandshakeFails(context_factory(self.settings(VerifyMode.NONE)), pinned(self.pki, SSL.TLS1_1_VERSION, False))

    @inlineCallbacks
    def test_the_tls_1_1_client_works_where_tls_1_1_is_allowed(self) -> None:
        """The control for the test above: the old client itself is able to connect."""
        factory, port = yield self.listen(pinned(self.pki, SSL.TLS1_1_VERSION, True))
        client = yield self.connect(port, pinned(self.pki, SSL.TLS1_1_VERSION, False))
        yield client.handshake
        server = yield factory.first
        yield server.handshake
        self.assertEqual(server.transport.getHandle().get_protocol_version_name(), "TLSv1.1")

    @inlineCallbacks
    def test_tls_1_2_is_accepted(self) -> None:
        factory, port = yield self.listen(context_factory(self.settings(VerifyMode.NONE)))
        client = yield self.connect(port, pinned(self.pki, SSL.TLS1_2_VERSION, False))
        yield client.handshake
        server = yield factory.first
        yield server.handshake
        self.assertEqual(server.transport.getHandle().get_protocol_version_name(), "TLSv1.2")


class ContextFactoryTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.pki = CertificateAuthority()
        self.directory = Path(self.mktemp())
        self.directory.mkdir()
        self.key, self.certificate, self.ca = self.pki.write_server_files(self.directory)

    def assertRefused(self, settings: Any, *words: str) -> None:
        with self.assertRaises(ValueError) as caught:
            context_factory(settings() if callable(settings) else settings)
        for word in words:
            self.assertIn(word, str(caught.exception))

    def test_certificate_chain_file(self) -> None:
        chained = self.directory / "chain.crt"
        chained.write_bytes(self.certificate.read_bytes() + self.ca.read_bytes())
        options = context_factory(TLSSettings(self.key, chained))
        self.assertEqual(options.certificate.get_subject().CN, "localhost")
        self.assertEqual([extra.get_subject().CN for extra in options.extraCertChain], ["txamqp09 test CA"])
        alone = context_factory(TLSSettings(self.key, self.certificate))
        self.assertEqual(alone.extraCertChain, [])

    def test_bad_files(self) -> None:
        other_key, _ = self.pki.server()
        wrong = self.directory / "wrong.key"
        wrong.write_bytes(pem_key(other_key))
        missing = self.directory / "missing.pem"
        self.assertRefused(TLSSettings(missing, self.certificate), "cannot read the private key", "missing.pem")
        self.assertRefused(TLSSettings(self.certificate, self.certificate), "not an unencrypted PEM key")
        self.assertRefused(TLSSettings(self.key, self.key), "holds no PEM certificate")
        self.assertRefused(TLSSettings(wrong, self.certificate), "cannot use")
        self.assertRefused(lambda: TLSSettings(self.key, self.certificate, None, VerifyMode.REQUIRED), "needs a CA file (--ssl-ca)")


class OptionsTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.directory = Path(self.mktemp())
        self.directory.mkdir()
        self.key, self.certificate, self.ca = CertificateAuthority().write_server_files(self.directory)

    def parse(self, *arguments: str) -> SecurityOptions:
        options = SecurityOptions()
        options.parseOptions(list(arguments))
        return options

    def test_defaults(self) -> None:
        options = self.parse()
        self.assertIsNone(options.tls_endpoint(reactor))
        security = options.security(reactor)
        self.assertEqual(list(security.database.users), ["guest"])
        self.assertTrue(security.accept_ticket_zero)
        self.assertEqual(security.mechanisms.mechanisms_field(PeerInfo()), b"PLAIN AMQPLAIN")

    def test_everything_set(self) -> None:
        definitions = self.directory / "definitions.json"
        definitions.write_text(__import__("json").dumps(EXPORT), encoding="utf-8")
        options = self.parse(
            "--definitions", str(definitions), "--auth-mechanisms", "AMQPLAIN", "--loopback-users", "",
            "--require-tickets", "--ssl-port", "5671", "--ssl-interface", "127.0.0.1",
            "--ssl-key", str(self.key), "--ssl-cert", str(self.certificate), "--ssl-ca", str(self.ca),
            "--ssl-verify", "required",
        )
        security = options.security(reactor)
        self.assertIn("billing-app", security.database.users)
        self.assertFalse(security.accept_ticket_zero)
        endpoint = options.tls_endpoint(reactor)
        assert endpoint is not None
        self.assertEqual((endpoint._port, endpoint._interface), (5671, "127.0.0.1"))  # type: ignore[attr-defined]

    def test_usage_errors_say_what_to_change(self) -> None:
        for arguments, words in [
            (["--ssl-port", "5671"], "--ssl-port needs --ssl-key and --ssl-cert"),
            (["--ssl-port", "tls"], "--ssl-port must be a port number from 0 to 65535, not 'tls'"),
            (["--ssl-port", "99999"], "--ssl-port must be a port number from 0 to 65535"),
            (["--ssl-port", "5671", "--ssl-key", "k", "--ssl-cert", "c", "--ssl-verify", "yes"], "none, peer or required"),
            (["--ssl-port", "5671", "--ssl-key", str(self.key), "--ssl-cert", str(self.certificate), "--ssl-verify", "peer"], "--ssl-ca"),
            (["--auth-mechanisms", "PLAIN KERBEROS"], "KERBEROS"),
            (["--definitions", str(self.directory / "none.json")], "none.json"),
        ]:
            with self.assertRaises(usage.UsageError) as caught:
                self.parse(*arguments)
            self.assertIn(words, str(caught.exception))

    def test_mixed_into_the_taps_options(self) -> None:
        options = tap.Options()
        options.parseOptions(["--port", "5672", "--require-tickets"])
        self.assertEqual((options["listen"], options["require-tickets"]), (["tcp:5672"], True))
        self.assertEqual(list(options.database.users), ["guest"])
        help_text = str(tap.Options())
        self.assertIn("--port=", help_text)
        self.assertIn("--ssl-verify=", help_text)
        self.assertRaises(usage.UsageError, tap.Options().parseOptions, ["--ssl-port", "5671"])

    def test_help_explains_each_option(self) -> None:
        text = " ".join(str(SecurityOptions()).split())
        for words in ["--definitions", "rabbitmqctl export_definitions", "--ssl-verify", "(SASL EXTERNAL) only with peer or required", "--require-tickets", "never request tickets"]:
            self.assertIn(words, text)
