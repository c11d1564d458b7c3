"""Connection parameters, ``amqp://`` / ``amqps://`` URLs, and the endpoints they name.

:func:`parse_url` reads the URLs RabbitMQ documents
(``amqp://user:pass@host:port/vhost?heartbeat=30``), with its query options
``heartbeat``, ``frame_max``, ``channel_max``, ``connection_timeout``,
``auth_mechanism``, and for ``amqps`` ``cacertfile``, ``certfile``,
``keyfile``, ``verify`` (``verify_peer`` or ``verify_none``) and
``server_name_indication``; ``version`` (``0-9-1``, ``0-9``, ``0-8``) chooses
the protocol version.

:func:`endpoint_for` turns parameters into a Twisted client endpoint, with
TLS through :func:`~twisted.internet.ssl.optionsForClientTLS`: certificate
chain and host name checked (``service_identity``), against a custom CA when
one is named, presenting a client certificate when one is given.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional
from urllib.parse import parse_qsl, unquote, urlsplit

from twisted.internet.endpoints import HostnameEndpoint, wrapClientTLS
from twisted.internet.interfaces import (
    IOpenSSLClientConnectionCreator,
    IStreamClientEndpoint,
)
from twisted.internet.ssl import (
    Certificate,
    CertificateOptions,
    PrivateCertificate,
    optionsForClientTLS,
    platformTrust,
)

from txamqp09.wire.versions import version_named

__all__ = ["TLSOptions", "ConnectionParameters", "parse_url", "endpoint_for", "tls_creator"]

#: Ports of the two schemes.
DEFAULT_PORTS = {"amqp": 5672, "amqps": 5671}
MECHANISMS = ("PLAIN", "AMQPLAIN")


@dataclass(frozen=True)
class TLSOptions:
    """How to secure and check the connection.

    :param ca_file: PEM file of the CA(s) to trust; the platform's trust
        store when None.
    :param cert_file: PEM certificate to present to the server.
    :param key_file: its PEM private key (may be *cert_file* itself).
    :param server_hostname: the name the server's certificate must carry;
        the connection's host when None.
    :param verify: check the server's certificate and name. Turning this off
        makes the connection open to interception; for tests only.
    """

    ca_file: Optional[str] = None
    cert_file: Optional[str] = None
    key_file: Optional[str] = None
    server_hostname: Optional[str] = None
    verify: bool = True


@dataclass(frozen=True)
class ConnectionParameters:
    """Everything needed to open a connection.

    :param heartbeat: seconds between heartbeats to ask for; None accepts the
        server's proposal, 0 turns heartbeats off.
    :param frame_max: the largest frame to accept; the server may lower it.
    :param channel_max: the most channels to use; the server may lower it.
    :param connection_timeout: seconds to connect and open the connection.
    :param close_timeout: seconds to wait for the server's close-ok.
    :param client_properties: entries added to the client-properties table
        (``connection_name`` shows in RabbitMQ's management UI).
    """

    host: str = "localhost"
    port: int = 5672
    virtual_host: str = "/"
    username: str = "guest"
    password: str = "guest"
    version: str = "0-9-1"
    mechanism: str = "PLAIN"
    heartbeat: Optional[int] = None
    frame_max: int = 131072
    channel_max: int = 2047
    locale: str = "en_US"
    connection_timeout: float = 30.0
    close_timeout: float = 10.0
    client_properties: dict[str, Any] = field(default_factory=dict)
    tls: Optional[TLSOptions] = None

    def __post_init__(self) -> None:
        version_named(self.version)
        if self.mechanism not in MECHANISMS:
            raise ValueError(
                f"unsupported SASL mechanism {self.mechanism!r}; choose one of {', '.join(MECHANISMS)}"
            )

    def replace(self, **changes: Any) -> ConnectionParameters:
        """A copy with *changes* applied."""
        return dataclasses.replace(self, **changes)


_INT_OPTIONS = {"heartbeat": "heartbeat", "frame_max": "frame_max", "channel_max": "channel_max"}
_TLS_FILES = {"cacertfile": "ca_file", "certfile": "cert_file", "keyfile": "key_file"}


def parse_url(url: str) -> ConnectionParameters:
    """The parameters an ``amqp://`` or ``amqps://`` URL names.

    An empty path, or ``/``, is the default virtual host ``/``; other paths
    are URL-decoded (``%2F`` is a slash).

    :raises ValueError: another scheme, or an unknown or malformed option.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise ValueError(f"{url!r} is not an amqp:// or amqps:// URL")
    options: dict[str, Any] = {
        "host": parts.hostname or "localhost",
        "port": parts.port or DEFAULT_PORTS[scheme],
        "virtual_host": unquote(parts.path[1:]) if parts.path not in ("", "/") else "/",
    }
    if parts.username is not None:
        options["username"] = unquote(parts.username)
    if parts.password is not None:
        options["password"] = unquote(parts.password)
    tls: dict[str, Any] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        _apply_option(name, value, options, tls)
    if scheme == "amqps":
        options["tls"] = TLSOptions(**tls)
    elif tls:
        raise ValueError(f"TLS options {', '.join(tls)} need an amqps:// URL")
    return ConnectionParameters(**options)


def _apply_option(name: str, value: str, options: dict[str, Any], tls: dict[str, Any]) -> None:
    try:
        if name in _INT_OPTIONS:
            options[_INT_OPTIONS[name]] = int(value)
        elif name == "connection_timeout":
            # RabbitMQ's URLs give this one in milliseconds.
            options["connection_timeout"] = int(value) / 1000
        elif name == "auth_mechanism":
            options["mechanism"] = value.upper()
        elif name == "version":
            options["version"] = value
        elif name in _TLS_FILES:
            tls[_TLS_FILES[name]] = value
        elif name == "server_name_indication":
            tls["server_hostname"] = value
        elif name == "verify":
            if value not in ("verify_peer", "verify_none"):
                raise ValueError("verify must be verify_peer or verify_none")
            tls["verify"] = value == "verify_peer"
        else:
            raise ValueError("unknown option")
    except ValueError as error:
        raise ValueError(f"URL option {name}={value!r}: {error}") from None


def _read(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def tls_creator(host: str, tls: TLSOptions) -> IOpenSSLClientConnectionCreator:
    """The TLS connection creator for *tls*, checking the server as *host*."""
    client_certificate = None
    if tls.cert_file is not None:
        key = _read(tls.key_file or tls.cert_file)
        client_certificate = PrivateCertificate.loadPEM(key + b"\n" + _read(tls.cert_file))
    if not tls.verify:
        extra = {}
        if client_certificate is not None:
            extra = {
                "privateKey": client_certificate.privateKey.original,
                "certificate": client_certificate.original,
            }
        options: IOpenSSLClientConnectionCreator = CertificateOptions(verify=False, **extra)
        return options
    trust = (
        Certificate.loadPEM(_read(tls.ca_file)) if tls.ca_file is not None else platformTrust()
    )
    return optionsForClientTLS(
        tls.server_hostname or host, trustRoot=trust, clientCertificate=client_certificate
    )


def endpoint_for(reactor: Any, parameters: ConnectionParameters) -> IStreamClientEndpoint:
    """The client endpoint that reaches the server *parameters* name."""
    endpoint: IStreamClientEndpoint = HostnameEndpoint(
        reactor, parameters.host, parameters.port, timeout=parameters.connection_timeout
    )
    if parameters.tls is not None:
        endpoint = wrapClientTLS(tls_creator(parameters.host, parameters.tls), endpoint)
    return endpoint
