"""``twistd amqp09`` options for security, to mix into the tap's Options.

::

    class Options(SecurityOptions):
        optParameters = [...]            # the tap's own options, as before
        def postOptions(self) -> None:
            ...
            self.check_security()        # loads files; UsageError with a helpful text

    def makeService(options, clock=None):
        security = options.security(clock)          # -> Security
        tls = options.tls_endpoint(reactor)         # -> endpoint or None
        if tls is not None:
            internet.StreamServerEndpointService(tls, factory).setServiceParent(broker)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from twisted.internet.endpoints import SSL4ServerEndpoint
from twisted.internet.interfaces import IReactorTime
from twisted.internet.ssl import CertificateOptions
from twisted.python import usage

from txamqp09.broker.auth.definitions import (
    Definitions,
    DefinitionsError,
    load_definitions,
)
from txamqp09.broker.auth.sasl import MechanismRegistry
from txamqp09.broker.auth.security import Security
from txamqp09.broker.auth.tls import TLSSettings, VerifyMode, context_factory
from txamqp09.broker.auth.users import UserDatabase

__all__ = ["SecurityOptions", "port_number"]


def port_number(option: str, text: str) -> int:
    """The TCP port *text* names for ``--OPTION``.

    :raises usage.UsageError: it is not a whole number from 0 to 65535.
    """
    if not text.isdigit() or int(text) > 65535:
        raise usage.UsageError(f"--{option} must be a port number from 0 to 65535, not {text!r}")
    return int(text)


class SecurityOptions(usage.Options):
    """Options for users, authentication, access tickets and TLS.

    Subclass it (its options join the subclass's own) and call
    :meth:`check_security` from ``postOptions``.

    :ivar definitions: the ``--definitions`` file as loaded (or RabbitMQ's
        defaults without it), once :meth:`check_security` ran; its database is
        the broker's, so ``definitions.write(path)`` exports what the broker
        has now, with the file's other entries kept.
    :ivar database: the users database (``definitions.database``).
    :ivar tls_context: the TLS context factory, or None without ``--ssl-port``.
    """

    definitions: Definitions
    database: UserDatabase
    tls_context: CertificateOptions | None = None

    optParameters: ClassVar[list[list[Any]]] = [
        ["definitions", None, None,
         ("Load users, vhosts and permissions from FILE, a RabbitMQ definitions export "
          "(rabbitmqctl export_definitions FILE). Without it there is one vhost, /, and "
          "one user, guest/guest, who may connect only from this machine.")],
        ["auth-mechanisms", None, "EXTERNAL PLAIN AMQPLAIN",
         ("SASL mechanisms to offer, space separated, in order of preference. EXTERNAL "
          "is offered only on TLS connections that presented a verified client certificate.")],
        ["loopback-users", None, "guest",
         ("Comma-separated users who may log in only from 127.0.0.0/8 or ::1. "
          "Give an empty string to let guest connect from anywhere (not recommended).")],
        ["ssl-port", None, None,
         ("Also listen for TLS connections on this port (usually 5671). Needs "
          "--ssl-key and --ssl-cert.")],
        ["ssl-interface", None, None,
         "Address the TLS port listens on, e.g. 127.0.0.1 (default: all addresses)."],
        ["ssl-key", None, None, "PEM file with the server's private key (unencrypted)."],
        ["ssl-cert", None, None,
         "PEM file with the server's certificate, followed by any intermediate certificates."],
        ["ssl-ca", None, None,
         "PEM file with the CA certificate(s) that client certificates must be signed by."],
        ["ssl-verify", None, "none",
         ("Client certificates: 'none' (not asked for), 'peer' (verified against --ssl-ca "
          "if sent), 'required' (every client must send one). Clients log in with a "
          "certificate (SASL EXTERNAL) only with peer or required.")],
    ]
    optFlags: ClassVar[list[list[Any]]] = [
        ["require-tickets", None,
         ("Refuse AMQP 0-8/0-9 methods carrying access ticket 0: clients must call "
          "access.request first. By default ticket 0 is accepted and governed by the "
          "user's vhost permissions, because 0-9-1 clients and many 0-8/0-9 clients "
          "never request tickets.")],
    ]

    def postOptions(self) -> None:
        self.check_security()

    def check_security(self) -> None:
        """Validate the options, load the definitions and the TLS files.

        :raises usage.UsageError: with a text saying what to change.
        """
        path = self["definitions"]
        try:
            MechanismRegistry(self["auth-mechanisms"].split())
            self.definitions = load_definitions(path) if path else Definitions(UserDatabase.default())
            self.database = self.definitions.database
            settings = self._tls_settings()
            self.tls_context = context_factory(settings) if settings is not None else None
        except (DefinitionsError, ValueError) as error:
            raise usage.UsageError(str(error)) from None

    def _tls_settings(self) -> TLSSettings | None:
        if self["ssl-port"] is None:
            return None
        port_number("ssl-port", self["ssl-port"])
        if self["ssl-key"] is None or self["ssl-cert"] is None:
            raise ValueError("--ssl-port needs --ssl-key and --ssl-cert")
        try:
            verify = VerifyMode(self["ssl-verify"])
        except ValueError:
            raise ValueError(f"--ssl-verify must be none, peer or required, not {self['ssl-verify']!r}") from None
        ca = Path(self["ssl-ca"]) if self["ssl-ca"] is not None else None
        return TLSSettings(Path(self["ssl-key"]), Path(self["ssl-cert"]), ca, verify)

    def security(self, clock: IReactorTime) -> Security:
        """The broker's :class:`Security` from these options."""
        loopback = [user.strip() for user in self["loopback-users"].split(",") if user.strip()]
        return Security(
            self.database,
            clock,
            mechanisms=MechanismRegistry(self["auth-mechanisms"].split()),
            loopback_users=loopback,
            accept_ticket_zero=not self["require-tickets"],
        )

    def tls_endpoint(self, reactor: object) -> SSL4ServerEndpoint | None:
        """The TLS listening endpoint, or None without ``--ssl-port``."""
        if self.tls_context is None:
            return None
        return SSL4ServerEndpoint(
            reactor, int(self["ssl-port"]), self.tls_context, interface=self["ssl-interface"] or ""
        )
