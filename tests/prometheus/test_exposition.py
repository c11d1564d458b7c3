"""Encoding in blocks: the text of unchanged rows is reused, and the answer
is what a fresh encoding gives."""

from __future__ import annotations

from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.broker.server import ServerFactory
from txamqp09.management.direct import DirectSession
from txamqp09.management.node import Node
from txamqp09.prometheus.collector import Scope, Scrape, gather
from txamqp09.prometheus.exposition import BLOCK_ROWS, Exposition

OPENMETRICS = "application/openmetrics-text; version=1.0.0"


def encode(exposition: Exposition, scrape: Scrape, accept: str = "") -> list[bytes]:
    """The pieces of the answer (content type first)."""
    answer: list[bytes] = []
    for _ in exposition.steps(scrape, accept, answer):
        pass
    return answer


class ExpositionTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.node = Node(ServerFactory(Clock()))
        self.vhost = self.node.broker.vhosts["/"]
        self.session = DirectSession(self.vhost)
        self.addCleanup(self.session.close)
        for number in range(BLOCK_ROWS * 2 + 10):
            self.session.declare_queue(f"q{number:05}")

    def test_unchanged_blocks_keep_their_text_and_the_answer_is_a_fresh_ones(self) -> None:
        for number, accept in enumerate(("", OPENMETRICS)):
            exposition = Exposition()
            first = encode(exposition, gather(self.node, Scope.PER_OBJECT), accept)
            changed = f"q{BLOCK_ROWS + number:05}"
            self.session.publish("", changed, b"body")
            scrape = gather(self.node, Scope.PER_OBJECT)
            second = encode(exposition, scrape, accept)
            self.assertTrue(b"".join(second) == b"".join(encode(Exposition(), scrape, accept)), accept)
            self.assertTrue(b"".join(first) != b"".join(second), accept)
            kept = {id(piece) for piece in first}
            self.assertGreater(sum(id(piece) in kept for piece in second), 20)
            line = f'rabbitmq_queue_messages_ready{{queue="{changed}",vhost="/"}} 1.0'.encode()
            self.assertTrue(line in b"".join(second), line)

    def test_openmetrics_ends_once(self) -> None:
        text = b"".join(encode(Exposition(), gather(self.node, Scope.PER_OBJECT), OPENMETRICS)[1:]).decode()
        self.assertEqual(text.count("# EOF"), 1)
        families = {family.name: family for family in openmetrics_families(text)}
        self.assertEqual(len(families["rabbitmq_queue_messages_ready"].samples), BLOCK_ROWS * 2 + 10)
