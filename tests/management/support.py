"""A broker with its management API on loopback, and an HTTP client for it."""

from __future__ import annotations

import json
from base64 import b64encode
from io import BytesIO
from typing import Any, Optional

from twisted.internet import reactor
from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.internet.endpoints import TCP4ServerEndpoint
from twisted.internet.interfaces import IListeningPort
from twisted.web.client import Agent, FileBodyProducer
from twisted.trial.unittest import TestCase
from twisted.web.http_headers import Headers

from txamqp09.broker.auth import Security, UserDatabase
from txamqp09.broker.auth.permissions import Permissions
from txamqp09.broker.server import ServerFactory
from txamqp09.management import Node, RecordingEndpoint, make_site
from txamqp09.testing.http import read_body


class Answer:
    """An HTTP answer: status, headers (lower-case names) and the parsed JSON body."""

    def __init__(self, status: int, headers: dict[str, str], raw: bytes) -> None:
        self.status = status
        self.headers = headers
        self.raw = raw
        self.body: Any = json.loads(raw) if raw else None

    def __repr__(self) -> str:
        return f"<Answer {self.status} {self.raw[:200]!r}>"


class ManagementBroker:
    """A broker listening for AMQP and for the API on 127.0.0.1, free ports.

    Users: guest/guest (administrator), and those :meth:`add_user` makes.
    """

    def __init__(self) -> None:
        self.database = UserDatabase.default()
        self.factory = ServerFactory(reactor, security=Security(self.database, reactor))
        self.node = Node(self.factory)
        self.ports: list[IListeningPort] = []
        #: HTTP connections the site accepted (closed by :meth:`stop`).
        self.http_connections: list[Any] = []
        self.amqp_port = 0
        self.http_port = 0

    @inlineCallbacks
    def start(self) -> Any:
        """Listen for AMQP and HTTP."""
        amqp = yield RecordingEndpoint(
            TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1"), self.node, "amqp"
        ).listen(self.factory)
        site = make_site(self.node)
        build = site.buildProtocol

        def remember(address: Any) -> Any:
            protocol = build(address)
            self.http_connections.append(protocol)
            return protocol

        site.buildProtocol = remember  # type: ignore[method-assign]
        http = yield RecordingEndpoint(
            TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1"), self.node, "http"
        ).listen(site)
        self.ports = [amqp, http]
        self.amqp_port = amqp.getHost().port
        self.http_port = http.getHost().port

    @inlineCallbacks
    def stop(self) -> Any:
        """Stop listening and close every AMQP connection."""
        self.node.stop()
        for connection in list(self.factory.connections) + self.http_connections:
            transport = getattr(connection, "transport", None)
            if transport is not None:
                transport.abortConnection()
        for port in self.ports:
            yield port.stopListening()

    def add_user(self, name: str, password: str, tags: tuple[str, ...] = (), vhosts: tuple[str, ...] = ("/",)) -> None:
        """A user with full permissions on *vhosts*."""
        self.database.add_user(name, password, tags=tags)
        for vhost in vhosts:
            self.database.set_permissions(name, vhost, Permissions(".*", ".*", ".*"))

    @property
    def url(self) -> str:
        """The API's base URL."""
        return f"http://127.0.0.1:{self.http_port}"

    def request(self, method: str, path: str, body: Any = None, **options: Any) -> Deferred[Answer]:
        """Send one request to this broker's API (see :func:`http_request`)."""
        return http_request(self.url, method, path, body, **options)


class ManagementTestCase(TestCase):
    """A test with its own :class:`ManagementBroker` (``self.broker``),
    started before each test and stopped after it."""

    @inlineCallbacks
    def setUp(self) -> Any:
        self.broker = ManagementBroker()
        yield self.broker.start()
        self.addCleanup(self.broker.stop)


def http_request(
    url: str,
    method: str,
    path: str,
    body: Any = None,
    *,
    user: Optional[str] = "guest",
    password: str = "guest",
    raw: Optional[bytes] = None,
    headers: Optional[dict[str, str]] = None,
) -> Deferred[Answer]:
    """Send one request to the API at *url*; *body* is sent as JSON, *raw* as it is."""
    sent = Headers({"Content-Type": ["application/json"]})
    if user is not None:
        token = b64encode(f"{user}:{password}".encode()).decode()
        sent.addRawHeader("Authorization", f"Basic {token}")
    for name, value in (headers or {}).items():
        sent.addRawHeader(name, value)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    producer = FileBodyProducer(BytesIO(data)) if data is not None else None
    sending = Agent(reactor).request(method.encode(), (url + path).encode(), sent, producer)

    def read(response: Any) -> Deferred[Answer]:
        received = {
            name.decode().lower(): values[-1].decode() for name, values in response.headers.getAllRawHeaders()
        }
        return read_body(response).addCallback(lambda data: Answer(response.code, received, data))

    return sending.addCallback(read)
