"""Every guide in docs/ runs as written: its Python blocks, guide after guide
and block after block, against one broker (the rules for blocks are in
:mod:`tests.docs.guides`)."""

from __future__ import annotations

from urllib.parse import urlencode

from twisted.internet import reactor
from twisted.internet.ssl import Certificate, PrivateCertificate
from twisted.trial.unittest import SynchronousTestCase, TestCase

from txamqp09.testing.certificates import shared_files
from tests.client.support import inline
from tests.docs.guides import README, Block, blocks, guides, markup_problems
from txamqp09.management import Node, make_site
from txamqp09.testing.broker import LoopbackBroker


def every_block() -> list[Block]:
    """The blocks of every guide, in the order they run."""
    return [block for guide in guides() for block in blocks(guide)]


class GuideRulesTests(SynchronousTestCase):
    """The guides keep to the rules that let their code be run."""

    def test_every_guide_is_read(self) -> None:
        names = {block.guide for block in every_block() if block.runs}
        for guide in (
            "client.rst", "queues.rst", "streams.rst", "amqp09-classes.rst", "security.rst", "management.rst",
            "testing.rst",
        ):
            self.assertIn(guide, names)

    def test_python_is_in_python_blocks(self) -> None:
        hidden = [block.where for block in every_block() if block.language is None and block.looks_like_python()]
        self.assertEqual(
            hidden, [],
            "literal blocks holding Python: make each a '.. code-block:: python' (then it runs) "
            "or put '.. not-run: REASON' before it (see tests/docs/guides.py)",
        )

    def test_every_opt_out_gives_a_reason(self) -> None:
        self.assertEqual([block.where for block in every_block() if block.not_run == ""], [])

    def test_every_guide_is_valid_restructuredtext(self) -> None:
        problems = [
            f"{path.name}:{line}: {message}"
            for path in [*guides(), README]
            for line, message in markup_problems(path)
        ]
        self.assertEqual(problems, [])


class GuidesRunTests(TestCase):
    """Each runnable block is a program run in a fresh interpreter; they all
    talk to the same broker, so guides cannot contradict one another."""

    timeout = 600

    def setUp(self) -> None:
        self.broker = LoopbackBroker()
        self.broker.start()
        self.addCleanup(self.broker.stop)
        files = shared_files()
        with open(files.server_key, "rb") as key, open(files.server_cert, "rb") as cert:
            server = PrivateCertificate.loadPEM(key.read() + cert.read())
        with open(files.ca, "rb") as ca:
            options = server.options(Certificate.loadPEM(ca.read()))
        listening = reactor.listenSSL(0, self.broker.factory, options, interface="127.0.0.1")  # type: ignore[attr-defined]
        self.addCleanup(listening.stopListening)
        api = reactor.listenTCP(0, make_site(Node(self.broker.factory)), interface="127.0.0.1")  # type: ignore[attr-defined]
        self.addCleanup(api.stopListening)
        query = urlencode({"cacertfile": files.ca, "certfile": files.client_cert, "keyfile": files.client_key})
        self.urls = {
            "amqp": self.broker.url,
            "amqps": f"amqps://guest:guest@127.0.0.1:{listening.getHost().port}/?{query}",
            "api": f"127.0.0.1:{api.getHost().port}",
        }

    @inline
    async def test_every_guide_runs_in_order(self) -> None:
        ran = 0
        for block in every_block():
            if block.runs:
                await self.run_block(block)
                ran += 1
        self.assertGreaterEqual(ran, 25)

    async def run_block(self, block: Block) -> None:
        out, err, code = await block.run(self.urls)
        self.assertEqual(code, 0, block.failed(self.urls, out, err))
