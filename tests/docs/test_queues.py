"""Every example of docs/queues.rst runs, and its assertions hold, against
RabbitMQ too (tests/docs/test_guides.py runs them against this broker)."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import TestCase

from tests.docs.guides import DOCS, blocks
from txamqp09.testing.rabbitmq import rabbitmq_missing, shared_rabbitmq


class RabbitMQGuideTests(TestCase):
    skip = rabbitmq_missing()
    timeout = 120

    @inlineCallbacks
    def test_every_example_runs(self) -> Any:
        url = f"amqp://guest:guest@127.0.0.1:{shared_rabbitmq().port}/%2F"
        examples = [block for block in blocks(DOCS / "queues.rst") if block.runs]
        self.assertGreaterEqual(len(examples), 11)
        for example in examples:
            out, err, code = yield example.run({"amqp": url})
            self.assertEqual(code, 0, example.failed({"amqp": url}, out, err))
