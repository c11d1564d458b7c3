"""Throw-away certificates for TLS tests: a CA that signs server and client
certificates on demand, and a ready set of PEM files.

Keys are elliptic-curve P-256, so making them is quick; certificates are valid
from a day ago to a day ahead. The server certificate names ``localhost`` and
``127.0.0.1``::

    from txamqp09.testing.certificates import CertificateAuthority, shared_files

    authority = CertificateAuthority()
    key, certificate = authority.client("alice")     # objects of ``cryptography``
    files = shared_files()                           # PEM files for the whole run
    url = f"amqps://127.0.0.1:5671/?cacertfile={files.ca}"
"""

from __future__ import annotations

import atexit
import datetime
import ipaddress
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertificateAuthority", "CertificateFiles", "shared_files", "pem_key", "pem_certificate"]

_DAY = datetime.timedelta(days=1)
_ORGANIZATION = "txamqp09 tests"


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(*common_names: str) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, _ORGANIZATION)]
    attributes += [x509.NameAttribute(NameOID.COMMON_NAME, name) for name in common_names]
    return x509.Name(attributes)


def pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    """The key as unencrypted PKCS#8 PEM."""
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def pem_certificate(certificate: x509.Certificate) -> bytes:
    """The certificate as PEM."""
    return certificate.public_bytes(serialization.Encoding.PEM)


class CertificateAuthority:
    """A self-signed CA that signs server and client certificates on demand.

    :param name: the CA's common name.
    """

    def __init__(self, name: str = "txamqp09 test CA") -> None:
        self.ca_key = _key()
        now = datetime.datetime.now(datetime.timezone.utc)
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
        names: Optional[list[x509.GeneralName]] = None,
    ) -> x509.Certificate:
        now = datetime.datetime.now(datetime.timezone.utc)
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
        """Write server key, server certificate and CA certificate as PEM files; their paths."""
        key, certificate = self.server()
        paths = directory / "server.key", directory / "server.crt", directory / "ca.crt"
        for path, data in zip(paths, (pem_key(key), pem_certificate(certificate), pem_certificate(self.ca_certificate))):
            path.write_bytes(data)
        return paths


@dataclass(frozen=True)
class CertificateFiles:
    """Paths of PEM files: a CA, a server and a client it signed, and a
    "rogue" CA that signed none of them (a CA a peer must not trust)."""

    directory: str
    ca: str
    rogue_ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str


def write_files(directory: Path) -> CertificateFiles:
    """Make a CA, a rogue CA, a server and a client (CN ``client``) and write them in *directory*."""
    authority = CertificateAuthority()
    rogue = CertificateAuthority("rogue CA")
    server_key, server = authority.server()
    client_key, client = authority.client("client")
    files = {
        "ca.pem": pem_certificate(authority.ca_certificate),
        "rogue-ca.pem": pem_certificate(rogue.ca_certificate),
        "server.pem": pem_certificate(server),
        "server-key.pem": pem_key(server_key),
        "client.pem": pem_certificate(client),
        "client-key.pem": pem_key(client_key),
    }
    for name, data in files.items():
        (directory / name).write_bytes(data)
    path = lambda name: str(directory / name)  # noqa: E731
    return CertificateFiles(
        str(directory), path("ca.pem"), path("rogue-ca.pem"), path("server.pem"), path("server-key.pem"),
        path("client.pem"), path("client-key.pem"),
    )


_shared: Optional[CertificateFiles] = None


def shared_files() -> CertificateFiles:
    """The process's set of :func:`write_files` (made on first use in a
    temporary directory, removed at exit)."""
    global _shared
    if _shared is None:
        directory = tempfile.mkdtemp(prefix="txamqp09-certs-")
        atexit.register(shutil.rmtree, directory, True)
        _shared = write_files(Path(directory))
    return _shared
