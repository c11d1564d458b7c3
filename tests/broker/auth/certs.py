"""A throwaway PKI for the TLS tests: a CA, server and client certificates.

Generated with the ``cryptography`` package at test time; keys are small
(elliptic curve P-256) so that making them is quick.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_DAY = datetime.timedelta(days=1)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(*common_names: str) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "txamqp09 tests")]
    attributes += [x509.NameAttribute(NameOID.COMMON_NAME, name) for name in common_names]
    return x509.Name(attributes)


def pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    """The key as unencrypted PKCS#8 PEM."""
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def pem_certificate(certificate: x509.Certificate) -> bytes:
    """The certificate as PEM."""
    return certificate.public_bytes(serialization.Encoding.PEM)


class TestPKI:
    """A CA that signs server and client certificates on demand."""

    def __init__(self, name: str = "txamqp09 test CA") -> None:
        self.ca_key = _key()
        now = datetime.datetime.now(datetime.UTC)
        self.ca_certificate = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(_name(name))
            .public_key(self.ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _DAY)
            .not_valid_after(now + _DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.ca_key.public_key()), critical=False)
            .sign(self.ca_key, hashes.SHA256())
        )

    def _issue(
        self,
        key: ec.EllipticCurvePrivateKey,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        names: list[x509.GeneralName] | None = None,
    ) -> x509.Certificate:
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.ca_certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _DAY)
            .not_valid_after(now + _DAY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.ca_key.public_key()), critical=False
            )
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return builder.sign(self.ca_key, hashes.SHA256())

    def server(self) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        """A key and certificate for ``localhost`` and ``127.0.0.1``."""
        key = _key()
        names: list[x509.GeneralName] = [
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        ]
        return key, self._issue(key, _name("localhost"), ExtendedKeyUsageOID.SERVER_AUTH, names)

    def client(self, *common_names: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        """A key and a client certificate whose subject has these CNs."""
        key = _key()
        return key, self._issue(key, _name(*common_names), ExtendedKeyUsageOID.CLIENT_AUTH)

    def client_certificate(self, *common_names: str) -> x509.Certificate:
        """Just the client certificate."""
        return self.client(*common_names)[1]

    def write_server_files(self, directory: Path) -> tuple[Path, Path, Path]:
        """Write server key, server certificate and CA certificate as PEM files."""
        key, certificate = self.server()
        paths = directory / "server.key", directory / "server.crt", directory / "ca.crt"
        for path, data in zip(paths, (pem_key(key), pem_certificate(certificate), pem_certificate(self.ca_certificate))):
            path.write_bytes(data)
        return paths
