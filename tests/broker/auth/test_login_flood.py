"""Correct logins while one host floods the broker with wrong passwords.

20 threads of pika send 200 wrong passwords for ``guest`` from 127.0.0.1
while a new pika client logs in correctly as ``guest`` every 0.2 s (RabbitMQ
answers the 200 in about 0.6 s: a few logins fall in that time). The
broker runs in a child process and the flood in another, so that the
measuring client competes with neither for this interpreter. The bar is
RabbitMQ 3.10.8's, checked against a private node too: every correct login
gets in, median under 50 ms, the slowest under 250 ms; every wrong one is
refused.
"""

from __future__ import annotations

import statistics
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from tests.broker.process import BrokerProcess
from txamqp09.testing.logins import REFUSED, REFUSED_AT_ONCE, FloodResult, logins_during_flood
from txamqp09.testing.rabbitmq import rabbitmq_missing, shared_rabbitmq

GUESSES, THREADS, INTERVAL = 200, 20, 0.2
MEDIAN_BAR, SLOWEST_BAR = 0.050, 0.250


class LoginFloodTests(TestCase):
    timeout = 180

    def assertWithinTheBar(self, result: FloodResult) -> None:
        """Every correct login got in, fast enough; every wrong one was refused."""
        self.assertGreaterEqual(len(result.latencies), 2, result)
        self.assertNotIn(None, result.latencies, result)
        latencies = [latency for latency in result.latencies if latency is not None]
        self.assertLess(statistics.median(latencies), MEDIAN_BAR, result)
        self.assertLess(max(latencies), SLOWEST_BAR, result)
        self.assertEqual(sum(result.answers.get(kind, 0) for kind in (REFUSED, REFUSED_AT_ONCE)), GUESSES, result)

    def flood(self, port: int) -> Any:
        """The flood against 127.0.0.1:*port*, in a thread; fires with its result."""
        return deferToThread(
            logins_during_flood, port, "guest", "guest", guesses=GUESSES, threads=THREADS, interval=INTERVAL
        )

    @inlineCallbacks
    def test_this_broker(self) -> Any:
        """More threads than the broker holds refusals from one host: some
        wrong passwords are answered at once, the rest held back."""
        broker = BrokerProcess(self.mktemp())
        self.addCleanup(broker.kill)
        port = yield broker.start(reactor)
        result = yield self.flood(port)
        self.assertWithinTheBar(result)
        self.assertGreater(result.answers.get(REFUSED_AT_ONCE, 0), 0, result)
        self.assertGreater(result.answers.get(REFUSED, 0), 0, result)

    @inlineCallbacks
    def test_rabbitmq(self) -> Any:
        """RabbitMQ answers every wrong password at once."""
        missing = rabbitmq_missing()
        if missing:
            raise self.skipTest(missing)
        node = shared_rabbitmq()
        result = yield self.flood(node.port)
        self.assertWithinTheBar(result)
        self.assertEqual(result.answers, {REFUSED: GUESSES})
