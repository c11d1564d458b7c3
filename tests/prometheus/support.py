"""A broker with its metrics listener on loopback, and scrapes parsed by prometheus_client."""

from __future__ import annotations

import gzip
from typing import Any, Optional

from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families
from twisted.internet import reactor
from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.internet.endpoints import TCP4ServerEndpoint
from twisted.internet.interfaces import IListeningPort
from twisted.web.client import Agent
from twisted.web.http_headers import Headers

from txamqp09.broker.auth import Security, UserDatabase
from txamqp09.broker.server import ServerFactory
from txamqp09.management import Node
from txamqp09.prometheus import make_metrics_site
from txamqp09.testing.http import read_body


class Scraped:
    """One scrape: status, headers (lower-case names), body and its families by name."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        if headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        self.text = body.decode("utf-8")
        self.families: dict[str, Metric] = {}
        if status == 200:
            openmetrics = headers.get("content-type", "").startswith("application/openmetrics-text")
            parse = openmetrics_families if openmetrics else text_string_to_metric_families
            self.families = {family.name: family for family in parse(self.text)}

    def value(self, name: str, **labels: str) -> Optional[float]:
        """The value of the sample *name* whose labels include *labels* (None if absent)."""
        for family in self.families.values():
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(key) == value for key, value in labels.items()):
                    return float(sample.value)
        return None

    def samples(self, name: str) -> list[Any]:
        """Every sample named *name*."""
        return [sample for family in self.families.values() for sample in family.samples if sample.name == name]


def scrape(port: int, path: str = "/metrics", headers: Optional[dict[str, str]] = None) -> Deferred[Scraped]:
    """GET *path* from the metrics listener on 127.0.0.1:*port*, parsed."""
    sent = Headers()
    for name, value in (headers or {}).items():
        sent.addRawHeader(name, value)
    getting = Agent(reactor).request(b"GET", f"http://127.0.0.1:{port}{path}".encode(), sent)

    def read(response: Any) -> Deferred[Scraped]:
        received = {name.decode().lower(): values[-1].decode() for name, values in response.headers.getAllRawHeaders()}
        return read_body(response).addCallback(lambda body: Scraped(response.code, received, body))

    return getting.addCallback(read)


class MetricsBroker:
    """A broker listening for AMQP and for metrics on 127.0.0.1, free ports."""

    def __init__(self) -> None:
        self.factory = ServerFactory(reactor, security=Security(UserDatabase.default(), reactor))
        self.node = Node(self.factory)
        self.ports: list[IListeningPort] = []
        self.amqp_port = 0
        self.metrics_port = 0

    @inlineCallbacks
    def start(self) -> Any:
        """Listen for AMQP and for scrapes."""
        amqp = yield TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(self.factory)
        metrics = yield TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(
            make_metrics_site(self.node, reactor)
        )
        self.ports = [amqp, metrics]
        self.amqp_port = amqp.getHost().port
        self.metrics_port = metrics.getHost().port

    @inlineCallbacks
    def stop(self) -> Any:
        """Stop listening and close every AMQP connection."""
        for connection in list(self.factory.connections):
            if connection.transport is not None:
                connection.transport.abortConnection()
        for port in self.ports:
            yield port.stopListening()

    @property
    def url(self) -> str:
        """The AMQP URL of guest on /."""
        return f"amqp://guest:guest@127.0.0.1:{self.amqp_port}/"

    def scrape(self, path: str = "/metrics", headers: Optional[dict[str, str]] = None) -> Deferred[Scraped]:
        """GET *path* from this broker's metrics listener."""
        return scrape(self.metrics_port, path, headers)
