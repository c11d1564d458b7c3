"""Certificates for the TLS tests, made once per test run in a temporary directory.

A CA signs a server certificate for ``localhost`` and 127.0.0.1 and a client
certificate; an unrelated "rogue" CA stands for a CA the client must not
trust.
"""

from __future__ import annotations

import atexit
import ipaddress
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Optional

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Certificates", "certificates"]


@dataclass(frozen=True)
class Certificates:
    """Paths of the PEM files."""

    directory: str
    ca: str
    rogue_ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _issue(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: Optional[tuple[x509.Certificate, ec.EllipticCurvePrivateKey]],
    *,
    ca: bool = False,
    names: tuple[x509.GeneralName, ...] = (),
    usage: Optional[x509.ObjectIdentifier] = None,
) -> x509.Certificate:
    now = datetime.now(timezone.utc)
    issuer_name, signing_key = (issuer[0].subject, issuer[1]) if issuer else (_name(subject), key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(names)), critical=False)
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    return builder.sign(signing_key, hashes.SHA256())


def _write(path: str, *items: bytes) -> str:
    with open(path, "wb") as file:
        file.write(b"".join(items))
    return path


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert_pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _make(directory: str) -> Certificates:
    keys = {name: ec.generate_private_key(ec.SECP256R1()) for name in ("ca", "rogue", "server", "client")}
    ca = _issue("txamqp09 test CA", keys["ca"], None, ca=True)
    rogue = _issue("rogue CA", keys["rogue"], None, ca=True)
    server = _issue(
        "localhost",
        keys["server"],
        (ca, keys["ca"]),
        names=(x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))),
        usage=ExtendedKeyUsageOID.SERVER_AUTH,
    )
    client = _issue("client", keys["client"], (ca, keys["ca"]), usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    path = lambda name: os.path.join(directory, name)  # noqa: E731
    return Certificates(
        directory=directory,
        ca=_write(path("ca.pem"), _cert_pem(ca)),
        rogue_ca=_write(path("rogue-ca.pem"), _cert_pem(rogue)),
        server_cert=_write(path("server.pem"), _cert_pem(server)),
        server_key=_write(path("server-key.pem"), _key_pem(keys["server"])),
        client_cert=_write(path("client.pem"), _cert_pem(client)),
        client_key=_write(path("client-key.pem"), _key_pem(keys["client"])),
    )


_made: Optional[Certificates] = None


def certificates() -> Certificates:
    """The test run's certificates (made on first use, removed at exit)."""
    global _made
    if _made is None:
        directory = tempfile.mkdtemp(prefix="txamqp09-certs-")
        atexit.register(shutil.rmtree, directory, True)
        _made = _make(directory)
    return _made
