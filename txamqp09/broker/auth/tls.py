"""TLS listeners: a pyOpenSSL context and a server endpoint from a few settings.

Only TLS 1.2 and 1.3 are accepted. Client certificates are verified against a
CA file when ``verify`` asks for it:

``none``
    No client certificate is requested; clients authenticate with PLAIN or
    AMQPLAIN inside the encrypted connection.
``peer``
    A client certificate is requested and, if one is sent, must be signed by
    the CA; clients without one may still connect (and use PLAIN).
``required``
    Every client must present a certificate signed by the CA, or the
    handshake fails. SASL EXTERNAL then names the user by the certificate.

Twisted's ``ssl:`` endpoint strings (``ssl:5671:privateKey=key.pem:certKey=cert.pem``)
serve the ``none`` case but cannot verify client certificates; for all three,
listen with ``SSL4ServerEndpoint(reactor, port, context_factory(settings))``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from OpenSSL import SSL, crypto
from twisted.internet.ssl import CertificateOptions, TLSVersion

__all__ = ["MINIMUM_VERSION", "TLSSettings", "VerifyMode", "context_factory"]

#: The oldest TLS version a client may use.
MINIMUM_VERSION = TLSVersion.TLSv1_2


class VerifyMode(str, enum.Enum):
    """Whether and how client certificates are verified."""

    NONE = "none"
    PEER = "peer"
    REQUIRED = "required"


@dataclass(frozen=True)
class TLSSettings:
    """Where the server's key, certificate and client CA are, and how to verify.

    :ivar private_key: PEM file with the server's private key.
    :ivar certificate: PEM file with the server's certificate, optionally
        followed by intermediate certificates.
    :ivar ca: PEM file with the CA certificate(s) client certificates must chain to.
    :ivar verify: see :class:`VerifyMode`.
    """

    private_key: Path
    certificate: Path
    ca: Path | None = None
    verify: VerifyMode = VerifyMode.NONE

    def __post_init__(self) -> None:
        if self.verify is not VerifyMode.NONE and self.ca is None:
            raise ValueError(
                f"verifying client certificates ({self.verify.value}) needs a CA file (--ssl-ca)"
            )


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise ValueError(f"cannot read the {what} {path}: {error.strerror}") from None


def _certificates(path: Path, what: str) -> list[crypto.X509]:
    try:
        loaded = x509.load_pem_x509_certificates(_read(path, what))
    except ValueError:
        raise ValueError(f"the {what} {path} holds no PEM certificate") from None
    return [crypto.X509.from_cryptography(certificate) for certificate in loaded]


def _private_key(path: Path) -> crypto.PKey:
    try:
        key = serialization.load_pem_private_key(_read(path, "private key"), password=None)
    except (ValueError, TypeError) as error:
        raise ValueError(f"the private key {path} is not an unencrypted PEM key: {error}") from None
    return crypto.PKey.from_cryptography_key(key)  # type: ignore[arg-type]


def context_factory(settings: TLSSettings) -> CertificateOptions:
    """A server context factory for ``settings``, checked by building a context once.

    :raises ValueError: a file is missing or not PEM, or the key does not
        belong to the certificate.
    """
    chain = _certificates(settings.certificate, "certificate")
    verify = settings.verify is not VerifyMode.NONE
    options = CertificateOptions(
        privateKey=_private_key(settings.private_key),
        certificate=chain[0],
        extraCertChain=chain[1:],
        verify=verify,
        caCerts=_certificates(settings.ca, "CA file") if verify and settings.ca else None,
        requireCertificate=settings.verify is VerifyMode.REQUIRED,
        raiseMinimumTo=MINIMUM_VERSION,
    )
    try:
        options.getContext()
    except SSL.Error as error:
        raise ValueError(f"cannot use {settings.certificate} with {settings.private_key}: {error}") from None
    return options

