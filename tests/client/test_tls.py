"""amqps:// against this project's broker behind a TLS listener and against RabbitMQ's TLS listener.

Both servers present a certificate for localhost / 127.0.0.1 signed by the
test CA and require a client certificate signed by it.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from typing import TYPE_CHECKING, Optional
from urllib.parse import urlencode

from twisted.internet import reactor
from twisted.internet.ssl import Certificate, PrivateCertificate
from twisted.trial.unittest import TestCase

if TYPE_CHECKING:
    _TestCaseBase = TestCase
else:
    _TestCaseBase = object

from txamqp09.testing.certificates import shared_files
from tests.client.support import fails, inline
from txamqp09.client import ConnectionClosed, TLSFailed, connect
from txamqp09.testing.broker import LoopbackBroker
from txamqp09.testing.rabbitmq import RabbitMQ, TLSFiles, rabbitmq_missing


class TLSTests(_TestCaseBase):
    """Cases for a TLS server on 127.0.0.1:``self.port``."""

    timeout = 30
    port = 0

    def url(self, **options: str) -> str:
        files = shared_files()
        query = {"cacertfile": files.ca, "certfile": files.client_cert, "keyfile": files.client_key}
        query.update(options)
        query = {name: value for name, value in query.items() if value}
        return f"amqps://guest:guest@127.0.0.1:{self.port}/?{urlencode(query)}"

    async def round_trip(self, url: str) -> None:
        connection = await connect(reactor, url)
        try:
            channel = await connection.channel()
            queue = (await channel.queue_declare("", exclusive=True)).queue
            channel.basic_publish(b"secret", routing_key=queue)
            message = await channel.basic_get(queue, no_ack=True)
            assert message is not None
            self.assertEqual(message.body, b"secret")
        finally:
            await connection.disconnect()

    @inline
    async def test_verified_with_client_certificate(self) -> None:
        await self.round_trip(self.url())

    @inline
    async def test_server_name_indication(self) -> None:
        await self.round_trip(self.url(server_name_indication="localhost"))

    @inline
    async def test_untrusted_server_certificate_fails(self) -> None:
        failure = await fails(connect(reactor, self.url(cacertfile=shared_files().rogue_ca)), TLSFailed)
        self.assertIn("certificate verify failed", str(failure))

    @inline
    async def test_wrong_host_name_fails(self) -> None:
        failure = await fails(connect(reactor, self.url(server_name_indication="elsewhere.example")), TLSFailed)
        self.assertIn("elsewhere.example", str(failure))

    @inline
    async def test_missing_client_certificate_fails(self) -> None:
        refused = connect(reactor, self.url(certfile="", keyfile=""))
        await fails(refused, ConnectionClosed)

    @inline
    async def test_verify_none(self) -> None:
        await self.round_trip(self.url(cacertfile="", verify="verify_none"))


class OwnBrokerTLSTests(TLSTests, TestCase):
    """This project's broker behind a Twisted TLS listener."""

    def setUp(self) -> None:
        files = shared_files()
        with open(files.server_key, "rb") as key, open(files.server_cert, "rb") as cert:
            server = PrivateCertificate.loadPEM(key.read() + cert.read())
        with open(files.ca, "rb") as ca:
            authority = Certificate.loadPEM(ca.read())
        options = server.options(authority)
        broker = LoopbackBroker()
        listening = reactor.listenSSL(0, broker.factory, options, interface="127.0.0.1")  # type: ignore[attr-defined]
        self.port = listening.getHost().port
        self.addCleanup(listening.stopListening)
        self.addCleanup(broker.stop)


_rabbitmq: Optional[RabbitMQ] = None


def tls_rabbitmq() -> RabbitMQ:
    """A RabbitMQ node with a TLS listener requiring client certificates (one per run)."""
    global _rabbitmq
    if _rabbitmq is None:
        files = shared_files()
        directory = tempfile.mkdtemp(prefix="txamqp09-rabbitmq-tls-")
        node = RabbitMQ(
            directory,
            tls=TLSFiles(files.ca, files.server_cert, files.server_key, verify_peer=True, require_peer_cert=True),
        )
        node.start()
        atexit.register(shutil.rmtree, directory, True)
        atexit.register(node.stop)
        _rabbitmq = node
    return _rabbitmq


class RabbitMQTLSTests(TLSTests, TestCase):
    """RabbitMQ's own TLS listener."""

    skip = rabbitmq_missing()

    def setUp(self) -> None:
        node = tls_rabbitmq()
        assert node.tls_port is not None
        self.port = node.tls_port
