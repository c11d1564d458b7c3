"""SASL mechanisms: responses into credentials, and what connection.start offers."""

from __future__ import annotations

import struct
from typing import Any

from twisted.internet.address import IPv4Address, IPv6Address, UNIXAddress
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.testing.certificates import CertificateAuthority
from txamqp09.broker.auth.errors import LoginRefused, MalformedResponse
from txamqp09.broker.auth.sasl import (
    ExternalCredentials,
    IExternalCredentials,
    MechanismRegistry,
    PasswordCredentials,
    PeerInfo,
    parse_amqplain,
    parse_external,
    parse_plain,
)
from txamqp09.wire.fields import RABBITMQ, ShortStr

LOCAL = PeerInfo(IPv4Address("TCP", "127.0.0.1", 50000))


def amqplain(table: dict[str, object]) -> bytes:
    """What py-amqp and pika send: the table without its length prefix."""
    return RABBITMQ.encode_table(table)[4:]  # type: ignore[arg-type]


class PlainTests(SynchronousTestCase):
    def test_user_and_password(self) -> None:
        credentials = parse_plain(b"\x00alice\x00s\xc3\xa9cret", LOCAL)
        self.assertIsInstance(credentials, PasswordCredentials)
        self.assertEqual((credentials.username, credentials.password), ("alice", "sécret"))
        self.assertEqual(credentials.mechanism, "PLAIN")
        self.assertIs(credentials.peer, LOCAL)
        self.assertTrue(credentials.checkPassword("sécret".encode()))

    def test_authzid_equal_to_user_is_accepted(self) -> None:
        self.assertEqual(parse_plain(b"alice\x00alice\x00pw", LOCAL).username, "alice")

    def test_password_may_be_empty_and_may_hold_anything_but_nul(self) -> None:
        self.assertEqual(parse_plain(b"\x00bob\x00", LOCAL).password, "")

    def test_malformed(self) -> None:
        for response, words in [
            (b"alice\x00pw", "found 1 NUL"),
            (b"\x00a\x00b\x00c", "found 3 NUL"),
            (b"\x00\x00pw", "empty user"),
            (b"\x00al\xffice\x00pw", "user is not valid UTF-8"),
            (b"mallory\x00alice\x00pw", "acting as another user"),
        ]:
            with self.assertRaises(MalformedResponse) as caught:
                parse_plain(response, LOCAL)
            self.assertIn(words, caught.exception.reply_text)
            self.assertEqual((caught.exception.reply_code, caught.exception.hard), (403, True))
            self.assertEqual((caught.exception.class_id, caught.exception.method_id), (10, 11))


class AMQPlainTests(SynchronousTestCase):
    def test_login_and_password_as_long_strings(self) -> None:
        credentials = parse_amqplain(amqplain({"LOGIN": b"alice", "PASSWORD": "pw"}), LOCAL)
        self.assertEqual((credentials.username, credentials.password, credentials.mechanism), ("alice", "pw", "AMQPLAIN"))

    def test_short_string_values_and_other_keys(self) -> None:
        response = amqplain({"LOGIN": ShortStr("alice"), "PASSWORD": b"pw", "LOCALE": b"en_US"})
        self.assertEqual(parse_amqplain(response, LOCAL).username, "alice")

    def test_malformed(self) -> None:
        truncated = amqplain({"LOGIN": b"alice", "PASSWORD": b"pw"})[:-1]
        for response, words in [
            (truncated, "not a field table"),
            (b"\x05LOGIN", "not a field table"),
            (amqplain({"LOGIN": b"alice"}), "string PASSWORD"),
            (amqplain({"LOGIN": 7, "PASSWORD": b"pw"}), "string LOGIN"),
            (amqplain({"LOGIN": b"", "PASSWORD": b"pw"}), "empty LOGIN"),
            (amqplain({"LOGIN": b"\xff", "PASSWORD": b"pw"}), "not valid UTF-8"),
            (b"", "string LOGIN"),
        ]:
            with self.assertRaises(MalformedResponse) as caught:
                parse_amqplain(response, LOCAL)
            self.assertIn(words, caught.exception.reply_text)

    def test_length_prefix_is_the_responses_own(self) -> None:
        # A declared inner length past the response's end cannot read beyond it.
        response = b"\x05LOGINS" + struct.pack(">I", 1000) + b"alice"
        with self.assertRaises(MalformedResponse):
            parse_amqplain(response, LOCAL)


class ExternalTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.pki = CertificateAuthority()
        self.peer = PeerInfo(LOCAL.address, self.pki.client_certificate("someuser"))

    def test_user_is_the_certificates_common_name(self) -> None:
        credentials = parse_external(b"", self.peer)
        self.assertTrue(IExternalCredentials.providedBy(credentials))
        assert isinstance(credentials, ExternalCredentials)
        self.assertEqual(credentials.username, "someuser")
        self.assertIs(credentials.certificate, self.peer.certificate)

    def test_response_may_repeat_the_name_but_not_name_another(self) -> None:
        self.assertEqual(parse_external(b"someuser", self.peer).username, "someuser")
        with self.assertRaises(MalformedResponse):
            parse_external(b"admin", self.peer)

    def test_no_certificate(self) -> None:
        with self.assertRaises(LoginRefused) as caught:
            parse_external(b"", LOCAL)
        self.assertIn("client certificate", caught.exception.reply_text)

    def test_subject_without_or_with_two_common_names(self) -> None:
        for names in [(), ("a", "b")]:
            peer = PeerInfo(LOCAL.address, self.pki.client_certificate(*names))
            with self.assertRaises(MalformedResponse) as caught:
                parse_external(b"", peer)
            self.assertIn(f"has {len(names)}", caught.exception.reply_text)


class RegistryTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.registry = MechanismRegistry()
        self.tls_peer = PeerInfo(LOCAL.address, CertificateAuthority().client_certificate("someuser"))

    def test_external_offered_only_with_a_client_certificate(self) -> None:
        self.assertEqual(self.registry.mechanisms_field(LOCAL), b"PLAIN AMQPLAIN")
        self.assertEqual(self.registry.mechanisms_field(self.tls_peer), b"EXTERNAL PLAIN AMQPLAIN")

    def test_enabled_subset_in_the_given_order(self) -> None:
        registry = MechanismRegistry(["AMQPLAIN", "EXTERNAL"])
        self.assertEqual(registry.mechanisms_field(LOCAL), b"AMQPLAIN")
        self.assertEqual(registry.mechanisms_field(self.tls_peer), b"AMQPLAIN EXTERNAL")

    def test_unknown_mechanism_name_is_a_configuration_error(self) -> None:
        with self.assertRaises(ValueError) as caught:
            MechanismRegistry(["PLAIN", "CRAM-MD5"])
        self.assertIn("CRAM-MD5", str(caught.exception))

    def test_credentials_for_an_offered_mechanism(self) -> None:
        credentials = self.registry.credentials("PLAIN", b"\x00a\x00b", LOCAL)
        self.assertEqual(credentials.username, "a")  # type: ignore[attr-defined]
        external = self.registry.credentials("EXTERNAL", b"", self.tls_peer)
        self.assertEqual(external.username, "someuser")  # type: ignore[attr-defined]

    def test_mechanism_not_offered_is_refused(self) -> None:
        for name, peer in [("EXTERNAL", LOCAL), ("CRAM-MD5", LOCAL), ("PLAIN", LOCAL)]:
            registry = MechanismRegistry(["AMQPLAIN", "EXTERNAL"])
            with self.assertRaises(LoginRefused) as caught:
                registry.credentials(name, b"\x00a\x00b", peer)
            self.assertIn(f"{name!r} is not offered", caught.exception.reply_text)
            self.assertIn("use one of: AMQPLAIN", caught.exception.reply_text)


class PeerInfoTests(SynchronousTestCase):
    def test_loopback_addresses(self) -> None:
        for address, loopback in [
            (IPv4Address("TCP", "127.0.0.1", 1), True),
            (IPv4Address("TCP", "127.8.9.10", 1), True),
            (IPv6Address("TCP", "::1", 1), True),
            (IPv6Address("TCP", "::ffff:127.0.0.1", 1), True),
            (UNIXAddress(b"/run/amqp.sock"), True),
            (IPv4Address("TCP", "10.0.0.1", 1), False),
            (IPv4Address("TCP", "128.0.0.1", 1), False),
            (IPv6Address("TCP", "fe80::1%eth0", 1), False),
            (IPv6Address("TCP", "::ffff:10.0.0.1", 1), False),
            (None, False),
        ]:
            self.assertEqual(PeerInfo(address).is_loopback, loopback, address)

    def test_host_key(self) -> None:
        self.assertEqual(PeerInfo(IPv6Address("TCP", "::1", 5)).host, "::1")
        self.assertEqual(PeerInfo(UNIXAddress(b"/s")).host, "unix")
        self.assertEqual(PeerInfo().host, "unknown")

    def test_from_plain_tcp_transport(self) -> None:
        from twisted.internet.testing import StringTransport

        transport = StringTransport(peerAddress=IPv4Address("TCP", "10.1.2.3", 4))
        peer = PeerInfo.from_transport(transport)
        self.assertEqual((peer.host, peer.certificate), ("10.1.2.3", None))


class RealClientResponseTests(SynchronousTestCase):
    """What py-amqp (kombu's transport) and pika put in connection.start-ok parses."""

    def setUp(self) -> None:
        self.peer = PeerInfo(LOCAL.address, CertificateAuthority().client_certificate("someuser"))
        self.registry = MechanismRegistry()

    def test_py_amqp(self) -> None:
        import amqp.sasl

        for mechanism in [amqp.sasl.AMQPLAIN("alice", "pw"), amqp.sasl.PLAIN("alice", "pw")]:
            credentials: Any = self.registry.credentials(mechanism.mechanism.decode(), mechanism.start(None), self.peer)
            self.assertEqual((credentials.username, credentials.password), ("alice", "pw"))
        external: Any = self.registry.credentials("EXTERNAL", amqp.sasl.EXTERNAL().start(None), self.peer)
        self.assertEqual(external.username, "someuser")

    def test_pika(self) -> None:
        import pika.credentials
        import pika.spec

        start = pika.spec.Connection.Start(mechanisms=self.registry.mechanisms_field(self.peer))
        mechanism, response = pika.credentials.PlainCredentials("alice", "pw").response_for(start)
        credentials: Any = self.registry.credentials(mechanism, response, self.peer)
        self.assertEqual((credentials.username, credentials.password), ("alice", "pw"))
        mechanism, response = pika.credentials.ExternalCredentials().response_for(start)
        self.assertEqual(self.registry.credentials(mechanism, response, self.peer).username, "someuser")  # type: ignore[attr-defined]
