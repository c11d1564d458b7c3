"""A TLS connection's details as the management API shows them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from txamqp09.management.views import tls_details


def transport(version: str, suite: Any) -> Any:
    """A stand-in TLS transport whose OpenSSL connection negotiated *version* and *suite*."""
    handle = SimpleNamespace(get_protocol_version_name=lambda: version, get_cipher_name=lambda: suite)
    return SimpleNamespace(getHandle=lambda: handle)


class TlsDetailsTests(SynchronousTestCase):
    def test_tls_1_3_suite(self) -> None:
        self.assertEqual(
            tls_details(transport("TLSv1.3", "TLS_AES_256_GCM_SHA384")),
            {"ssl_protocol": "tlsv1.3", "ssl_key_exchange": "any", "ssl_cipher": "aes_256_gcm", "ssl_hash": "sha384"},
        )
        self.assertEqual(tls_details(transport("TLSv1.3", "TLS_CHACHA20_POLY1305_SHA256"))["ssl_cipher"], "chacha20_poly1305")

    def test_tls_1_2_suite(self) -> None:
        self.assertEqual(
            tls_details(transport("TLSv1.2", "ECDHE-RSA-AES256-GCM-SHA384")),
            {"ssl_protocol": "tlsv1.2", "ssl_key_exchange": "ecdhe_rsa", "ssl_cipher": "aes256_gcm", "ssl_hash": "sha384"},
        )
        self.assertEqual(tls_details(transport("TLSv1.2", "AES128-SHA256"))["ssl_key_exchange"], "rsa")

    def test_before_the_handshake(self) -> None:
        self.assertEqual(set(tls_details(transport("Unknown", None)).values()), {None})
