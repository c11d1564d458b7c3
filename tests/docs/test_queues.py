"""Every example of docs/queues.rst runs, and its assertions hold, against
this project's broker and against RabbitMQ."""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from twisted.internet.defer import inlineCallbacks
from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial.unittest import TestCase

from tests.docs.test_client import examples as guide_examples
from txamqp09.testing.broker import LoopbackBroker
from txamqp09.testing.rabbitmq import rabbitmq_missing, shared_rabbitmq

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUIDE = os.path.join(ROOT, "docs", "queues.rst")
_URL_LINE = re.compile(r'^URL = "amqp://[^"]*"$', re.MULTILINE)


def examples() -> list[str]:
    """The guide's complete programs."""
    return guide_examples(GUIDE)


class GuideExamples:
    """Runs the examples against the broker at :attr:`port`."""

    timeout = 120
    port: int

    def test_the_guide_has_an_example_per_feature(self: Any) -> None:
        self.assertGreaterEqual(len(examples()), 11)

    @inlineCallbacks
    def test_every_example_runs(self: Any) -> Any:
        url = f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"
        for example in examples():
            program = _URL_LINE.sub(f"URL = {url!r}", example)
            environment: dict[str, Any] = dict(os.environ)
            environment["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, environment.get("PYTHONPATH")]))
            out, err, code = yield getProcessOutputAndValue(
                sys.executable, ["-c", program], env=environment, path=ROOT
            )
            self.assertEqual(code, 0, f"{program}\n--- output:\n{out.decode()}\n--- errors:\n{err.decode()}")


class OwnBrokerGuideTests(GuideExamples, TestCase):
    def setUp(self) -> None:
        self.broker = LoopbackBroker()
        self.port = self.broker.start()
        self.addCleanup(self.broker.stop)


class RabbitMQGuideTests(GuideExamples, TestCase):
    skip = rabbitmq_missing()

    def setUp(self) -> None:
        self.port = shared_rabbitmq().port
