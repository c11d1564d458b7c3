"""SASL mechanisms: connection.start-ok responses into twisted.cred credentials.

Three mechanisms are known:

``PLAIN`` (RFC 4616)
    ``authzid NUL user NUL password``, UTF-8. The authorization identity must
    be empty or equal to the user: acting as another user is not supported.
``AMQPLAIN``
    A field table without its 4-byte length prefix, holding ``LOGIN`` and
    ``PASSWORD``.
``EXTERNAL`` (RFC 4422)
    The user is the common name (CN) of the subject of the client certificate
    the TLS handshake verified. The response may be empty or repeat that name.

Each produces credentials that also carry the :class:`PeerInfo` (address and
certificate) of the connection, which checkers use for loopback-only users
and the login throttle. :class:`MechanismRegistry` says which mechanisms a
connection is offered in connection.start (EXTERNAL only to TLS connections
that presented a client certificate) and turns a response into credentials.
"""

from __future__ import annotations

import hmac
import ipaddress
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.x509.oid import NameOID
from twisted.cred.credentials import ICredentials, IUsernamePassword
from twisted.internet.address import IPv4Address, IPv6Address, UNIXAddress
from twisted.internet.interfaces import IAddress, ISSLTransport, ITransport
from zope.interface import Attribute, implementer

from txamqp09.broker.auth.errors import LoginRefused, MalformedResponse
from txamqp09.wire.errors import AMQPError
from txamqp09.wire.fields import RABBITMQ

__all__ = [
    "AMQPLAIN",
    "EXTERNAL",
    "MECHANISMS",
    "PLAIN",
    "ExternalCredentials",
    "IAMQPCredentials",
    "IExternalCredentials",
    "Mechanism",
    "MechanismRegistry",
    "PasswordCredentials",
    "PeerInfo",
    "certificate_user",
    "parse_amqplain",
    "parse_external",
    "parse_plain",
]


@dataclass(frozen=True)
class PeerInfo:
    """What the security layer knows about the other end of a connection.

    :ivar address: the peer's address (``transport.getPeer()``), if known.
    :ivar certificate: the client certificate TLS verified, or None.
    """

    address: IAddress | None = None
    certificate: x509.Certificate | None = None

    @classmethod
    def from_transport(cls, transport: ITransport) -> PeerInfo:
        """Read the peer's address and, on TLS, its verified certificate."""
        certificate = None
        if ISSLTransport.providedBy(transport):
            peer_certificate: Any = transport.getPeerCertificate()  # type: ignore[attr-defined]
            if peer_certificate is not None:
                certificate = peer_certificate.to_cryptography()
        return cls(transport.getPeer(), certificate)

    @property
    def host(self) -> str:
        """A key naming the peer's host: its IP address, ``unix``, or ``unknown``."""
        if isinstance(self.address, (IPv4Address, IPv6Address)):
            return self.address.host
        if isinstance(self.address, UNIXAddress):
            return "unix"
        return "unknown"

    @property
    def is_loopback(self) -> bool:
        """Whether the peer is on this machine: 127.0.0.0/8, ::1 (also IPv4-mapped), a UNIX socket."""
        if isinstance(self.address, UNIXAddress):
            return True
        if not isinstance(self.address, (IPv4Address, IPv6Address)):
            return False
        address = ipaddress.ip_address(self.address.host.split("%")[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return address.is_loopback


class IAMQPCredentials(ICredentials):
    """Credentials from an AMQP connection."""

    mechanism = Attribute("The SASL mechanism's name, e.g. 'PLAIN'.")
    peer = Attribute("The PeerInfo of the connection.")


class IExternalCredentials(IAMQPCredentials):
    """A TLS client certificate standing for a user (SASL EXTERNAL)."""

    username = Attribute("The user the certificate names (its subject's CN).")
    certificate = Attribute("The verified cryptography.x509.Certificate.")


@implementer(IUsernamePassword, IAMQPCredentials)
class PasswordCredentials:
    """A user name and password from PLAIN or AMQPLAIN (both ``str``).

    :ivar username: the login name.
    :ivar password: the clear-text password.
    """

    def __init__(self, username: str, password: str, mechanism: str, peer: PeerInfo) -> None:
        self.username = username
        self.password = password
        self.mechanism = mechanism
        self.peer = peer

    def checkPassword(self, password: bytes) -> bool:
        """Whether ``password`` (UTF-8) equals the one given (IUsernamePassword)."""
        return hmac.compare_digest(self.password.encode("utf-8"), password)


@implementer(IExternalCredentials)
class ExternalCredentials:
    """A verified client certificate and the user its subject names."""

    mechanism = "EXTERNAL"

    def __init__(self, username: str, certificate: x509.Certificate, peer: PeerInfo) -> None:
        self.username = username
        self.certificate = certificate
        self.peer = peer


def _utf8(value: bytes, what: str, mechanism: str) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedResponse(f"{mechanism} {what} is not valid UTF-8") from None


def _no_proxy(authzid: str, user: str, mechanism: str) -> None:
    if authzid and authzid != user:
        raise MalformedResponse(
            f"{mechanism} authorization identity {authzid!r} differs from the user; "
            "acting as another user is not supported: leave it empty"
        )


def parse_plain(response: bytes, peer: PeerInfo) -> PasswordCredentials:
    """Read ``authzid NUL user NUL password``.

    :raises MalformedResponse: not exactly three NUL-separated UTF-8 parts, an
        empty user, or an authorization identity naming someone else.
    """
    parts = response.split(b"\x00")
    if len(parts) != 3:
        raise MalformedResponse(
            "PLAIN response must be authzid NUL user NUL password "
            f"(found {len(parts) - 1} NUL separators instead of 2)"
        )
    authzid, user, password = (_utf8(part, what, "PLAIN") for part, what in zip(parts, ("authzid", "user", "password")))
    if not user:
        raise MalformedResponse("PLAIN response has an empty user name")
    _no_proxy(authzid, user, "PLAIN")
    return PasswordCredentials(user, password, "PLAIN", peer)


def parse_amqplain(response: bytes, peer: PeerInfo) -> PasswordCredentials:
    """Read a length-less field table holding ``LOGIN`` and ``PASSWORD`` strings.

    :raises MalformedResponse: not a field table, or LOGIN / PASSWORD missing,
        not strings, or not UTF-8.
    """
    try:
        table, _ = RABBITMQ.decode_table(struct.pack(">I", len(response)) + response, 0)
    except AMQPError as error:
        raise MalformedResponse(f"AMQPLAIN response is not a field table: {error.reply_text}") from None
    fields = []
    for key in ("LOGIN", "PASSWORD"):
        value = table.get(key)
        if isinstance(value, bytes):
            value = _utf8(value, key, "AMQPLAIN")
        if not isinstance(value, str):
            raise MalformedResponse(f"AMQPLAIN response needs a string {key} field")
        fields.append(value)
    if not fields[0]:
        raise MalformedResponse("AMQPLAIN response has an empty LOGIN")
    return PasswordCredentials(fields[0], fields[1], "AMQPLAIN", peer)


def certificate_user(certificate: x509.Certificate) -> str:
    """The user a client certificate names: its subject's single common name.

    :raises MalformedResponse: the subject has no CN, or more than one.
    """
    names = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if len(names) != 1:
        raise MalformedResponse(
            f"EXTERNAL needs a client certificate whose subject has exactly one CN; "
            f"{certificate.subject.rfc4514_string()!r} has {len(names)}"
        )
    value = names[0].value
    return value if isinstance(value, str) else _utf8(value, "certificate CN", "EXTERNAL")


def parse_external(response: bytes, peer: PeerInfo) -> ExternalCredentials:
    """Name the user by the verified client certificate.

    :raises LoginRefused: the connection has no verified client certificate.
    :raises MalformedResponse: the certificate names no single user, or the
        response names someone else.
    """
    if peer.certificate is None:
        raise LoginRefused("EXTERNAL needs a TLS connection with a verified client certificate")
    user = certificate_user(peer.certificate)
    _no_proxy(_utf8(response, "authorization identity", "EXTERNAL"), user, "EXTERNAL")
    return ExternalCredentials(user, peer.certificate, peer)


@dataclass(frozen=True)
class Mechanism:
    """A SASL mechanism the broker can offer.

    :ivar name: as written in connection.start's mechanisms field.
    :ivar parse: turns a response into credentials, or raises MalformedResponse.
    :ivar needs_certificate: offered only to peers with a verified client certificate.
    """

    name: str
    parse: Callable[[bytes, PeerInfo], ICredentials]
    needs_certificate: bool = False

    def available(self, peer: PeerInfo) -> bool:
        """Whether this mechanism can be offered to ``peer``."""
        return not self.needs_certificate or peer.certificate is not None


PLAIN = Mechanism("PLAIN", parse_plain)
AMQPLAIN = Mechanism("AMQPLAIN", parse_amqplain)
EXTERNAL = Mechanism("EXTERNAL", parse_external, needs_certificate=True)

#: Every known mechanism by name.
MECHANISMS = {mechanism.name: mechanism for mechanism in (EXTERNAL, PLAIN, AMQPLAIN)}


class MechanismRegistry:
    """The mechanisms enabled on a broker, in the order they are offered.

    :raises ValueError: a name is not a known mechanism.
    """

    def __init__(self, names: Iterable[str] = ("EXTERNAL", "PLAIN", "AMQPLAIN")) -> None:
        unknown = [name for name in names if name not in MECHANISMS]
        if unknown:
            raise ValueError(f"unknown SASL mechanisms {unknown}; known: {sorted(MECHANISMS)}")
        self.enabled = [MECHANISMS[name] for name in names]

    def offered(self, peer: PeerInfo) -> list[Mechanism]:
        """The enabled mechanisms ``peer`` can use."""
        return [mechanism for mechanism in self.enabled if mechanism.available(peer)]

    def mechanisms_field(self, peer: PeerInfo) -> bytes:
        """connection.start's space-separated ``mechanisms`` value for ``peer``."""
        return " ".join(mechanism.name for mechanism in self.offered(peer)).encode("ascii")

    def credentials(self, name: str, response: bytes, peer: PeerInfo) -> ICredentials:
        """Parse a start-ok ``response`` for mechanism ``name``.

        :raises LoginRefused: ``name`` was not offered to this peer.
        :raises MalformedResponse: the response is not in the mechanism's form.
        """
        for mechanism in self.offered(peer):
            if mechanism.name == name:
                return mechanism.parse(response, peer)
        offered = self.mechanisms_field(peer).decode("ascii")
        raise LoginRefused(
            f"ACCESS_REFUSED - authentication mechanism {name!r} is not offered "
            f"on this connection; use one of: {offered}"
        )
