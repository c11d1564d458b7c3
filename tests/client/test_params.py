"""URLs, parameters and the endpoints they name."""

from __future__ import annotations

from twisted.internet.endpoints import HostnameEndpoint, _WrapperEndpoint
from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.testing.certificates import shared_files
from txamqp09.client.params import (
    ConnectionParameters,
    TLSOptions,
    endpoint_for,
    parse_url,
)


class URLTests(SynchronousTestCase):
    def test_everything(self) -> None:
        parameters = parse_url(
            "amqp://us%40er:p%3Ass@broker.example:5673/my%2Fvhost"
            "?heartbeat=30&frame_max=8192&channel_max=10&connection_timeout=2500&auth_mechanism=amqplain&version=0-9"
        )
        self.assertEqual(
            parameters,
            ConnectionParameters(
                host="broker.example",
                port=5673,
                virtual_host="my/vhost",
                username="us@er",
                password="p:ss",
                heartbeat=30,
                frame_max=8192,
                channel_max=10,
                connection_timeout=2.5,
                mechanism="AMQPLAIN",
                version="0-9",
            ),
        )

    def test_defaults(self) -> None:
        self.assertEqual(parse_url("amqp://"), ConnectionParameters())
        self.assertEqual(parse_url("amqp://host/").virtual_host, "/")
        self.assertEqual(parse_url("amqps://host").port, 5671)
        self.assertEqual(parse_url("amqps://host").tls, TLSOptions())
        self.assertEqual(parse_url("amqp://[::1]:1234").host, "::1")

    def test_refusals(self) -> None:
        for url, complaint in [
            ("http://host/", "not an amqp:// or amqps:// URL"),
            ("amqp://host/?heartbeat=soon", "heartbeat='soon'"),
            ("amqp://host/?colour=blue", "unknown option"),
            ("amqp://host/?version=1-0", "unknown AMQP version"),
            ("amqp://host/?auth_mechanism=external", "unsupported SASL mechanism"),
            ("amqps://host/?verify=maybe", "verify_peer or verify_none"),
        ]:
            error = self.assertRaises(ValueError, parse_url, url)
            self.assertIn(complaint, str(error), url)

    def test_replace(self) -> None:
        self.assertEqual(ConnectionParameters().replace(port=1).port, 1)


class TLSURLTests(SynchronousTestCase):
    def test_tls_options_from_the_url(self) -> None:
        parameters = parse_url(
            "amqps://u:p@host/?cacertfile=/ca.pem&certfile=/c.pem&keyfile=/k.pem"
            "&server_name_indication=name&verify=verify_none"
        )
        assert parameters.tls is not None
        self.assertEqual(
            (parameters.port, parameters.tls.ca_file, parameters.tls.cert_file, parameters.tls.key_file),
            (5671, "/ca.pem", "/c.pem", "/k.pem"),
        )
        self.assertEqual((parameters.tls.server_hostname, parameters.tls.verify), ("name", False))

    def test_tls_options_need_amqps(self) -> None:
        self.assertRaises(ValueError, parse_url, "amqp://host/?cacertfile=/ca.pem")


class EndpointTests(SynchronousTestCase):
    def test_plain(self) -> None:
        endpoint = endpoint_for(MemoryReactorClock(), parse_url("amqp://h:1/?connection_timeout=3000"))
        self.assertIsInstance(endpoint, HostnameEndpoint)
        self.assertEqual(endpoint._timeout, 3.0)  # type: ignore[attr-defined]

    def test_tls_with_client_certificate(self) -> None:
        files = shared_files()
        url = f"amqps://h/?cacertfile={files.ca}&certfile={files.client_cert}&keyfile={files.client_key}"
        self.assertIsInstance(endpoint_for(MemoryReactorClock(), parse_url(url)), _WrapperEndpoint)

    def test_tls_unverified(self) -> None:
        files = shared_files()
        url = f"amqps://h/?verify=verify_none&certfile={files.client_cert}&keyfile={files.client_key}"
        self.assertIsInstance(endpoint_for(MemoryReactorClock(), parse_url(url)), _WrapperEndpoint)

    def test_missing_ca_file(self) -> None:
        self.assertRaises(OSError, endpoint_for, MemoryReactorClock(), parse_url("amqps://h/?cacertfile=/no/such/file.pem"))
