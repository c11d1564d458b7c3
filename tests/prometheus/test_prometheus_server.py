"""A real Prometheus server scrapes the broker on loopback, and queries from
RabbitMQ's "RabbitMQ-Overview" Grafana dashboard return data."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlencode

from twisted.internet import reactor
from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.internet.task import LoopingCall
from twisted.trial.unittest import TestCase
from twisted.web.client import Agent

from txamqp09.client.connection import connect
from txamqp09.testing.http import read_body
from txamqp09.testing.rabbitmq import free_port
from txamqp09.testing.waiting import eventually
from tests.prometheus.support import MetricsBroker

PROMETHEUS = shutil.which("prometheus")


def _missing() -> Optional[str]:
    if PROMETHEUS is None:
        return "Prometheus is not installed (no prometheus on PATH); install the Debian package prometheus"
    return None


class PrometheusServer:
    """A Prometheus server on 127.0.0.1 scraping one target every second,
    with a data directory of its own.

    :param directory: where its configuration, data and log go.
    :param target: host:port of the metrics listener.
    """

    def __init__(self, directory: Path, target: str) -> None:
        self.directory = directory
        self.port = free_port()
        config = directory / "prometheus.yml"
        config.write_text(json.dumps({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": "txamqp09", "static_configs": [{"targets": [target]}]}],
        }))
        assert PROMETHEUS is not None
        self.log = open(directory / "prometheus.log", "wb")
        self.process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={directory / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, cwd=directory,
        )

    def stop(self) -> None:
        """Stop the server (killed if it lingers)."""
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()

    def query(self, promql: str) -> Deferred[list[Any]]:
        """The instant vector *promql* evaluates to now ([] while it has no data)."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?{urlencode({'query': promql})}"

        def parse(body: bytes) -> list[Any]:
            answer = json.loads(body)
            return answer["data"]["result"] if answer.get("status") == "success" else []

        def unreachable(failure: Any) -> list[Any]:
            if self.process.poll() is not None:
                raise AssertionError(f"Prometheus exited: {(self.directory / 'prometheus.log').read_text()[-2000:]}")
            return []

        return Agent(reactor).request(b"GET", url.encode()).addCallback(read_body).addCallbacks(parse, unreachable)


class PrometheusServerTests(TestCase):
    skip = _missing()
    timeout = 120

    @inlineCallbacks
    def setUp(self) -> Any:
        self.broker = MetricsBroker()
        yield self.broker.start()
        self.addCleanup(self.broker.stop)
        directory = Path(self.mktemp()).absolute()
        directory.mkdir()
        self.server = PrometheusServer(directory, f"127.0.0.1:{self.broker.metrics_port}")
        self.addCleanup(self.server.stop)

    @inlineCallbacks
    def has_data(self, promql: str, positive: bool = True) -> Any:
        """Wait until *promql* returns a sample (a positive one if *positive*)."""

        def ready() -> Deferred[list[Any]]:
            return self.server.query(promql).addCallback(
                lambda result: result if result and (not positive or float(result[0]["value"][1]) > 0) else None)

        result = yield eventually(ready, reactor, timeout=60, interval=0.5, what=f"{promql} returning data")
        return result

    @inlineCallbacks
    def test_dashboard_queries_return_data(self) -> Any:
        connection = yield connect(reactor, self.broker.url)
        self.addCleanup(connection.disconnect)
        channel = yield connection.channel()
        yield channel.queue_declare("dashboard")
        publishing = LoopingCall(channel.basic_publish, b"tick", "", "dashboard")
        publishing.start(0.05)
        self.addCleanup(publishing.stop)
        cluster = self.broker.node.name
        identity = f'rabbitmq_identity_info{{rabbitmq_cluster="{cluster}", namespace=""}}'
        rate = yield self.has_data("sum(rate(rabbitmq_channel_messages_published_total[1m]))")
        self.assertGreater(float(rate[0]["value"][1]), 0)
        yield self.has_data(f"sum(rabbitmq_queue_messages_ready * on(instance) group_left(rabbitmq_cluster) {identity})")
        yield self.has_data(
            f"sum(rate(rabbitmq_global_messages_received_total[60s]) * on(instance) "
            f"group_left(rabbitmq_cluster) {identity})")
        second = yield connection.channel()  # opened while Prometheus scrapes: a channel opening rate
        yield second.close()
        [by_node] = yield self.has_data(
            f"sum(rate(rabbitmq_channels_opened_total[60s]) * on(instance) "
            f"group_left(rabbitmq_cluster, rabbitmq_node) {identity}) by(rabbitmq_node)")
        self.assertEqual(by_node["metric"], {"rabbitmq_node": cluster})
        [free] = yield self.has_data(
            f"(rabbitmq_process_max_fds * on(instance) group_left(rabbitmq_cluster, rabbitmq_node) {identity}) -\n"
            f"(rabbitmq_process_open_fds * on(instance) group_left(rabbitmq_cluster, rabbitmq_node) {identity})")
        self.assertEqual(free["metric"]["rabbitmq_node"], cluster)
