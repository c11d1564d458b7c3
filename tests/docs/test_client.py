"""Every complete example of docs/client.rst runs against this project's broker."""

from __future__ import annotations

import os
import re
import sys
from typing import Any
from urllib.parse import urlencode

from twisted.internet import reactor
from twisted.internet.ssl import Certificate, PrivateCertificate
from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial.unittest import TestCase

from tests.client.certs import certificates
from tests.client.support import inline
from txamqp09.testing.broker import LoopbackBroker

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUIDE = os.path.join(ROOT, "docs", "client.rst")
_URL_LINE = re.compile(r'^URL = "(amqps?)://[^"]*"$', re.MULTILINE)


def examples(path: str = GUIDE) -> list[str]:
    """The Python blocks of the guide at *path* that set ``URL``: complete programs."""
    with open(path) as guide:
        text = guide.read()
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:    .*\n|\n)+)", text)
    programs = [re.sub(r"^    ", "", block, flags=re.MULTILINE) for block in blocks]
    return [program for program in programs if _URL_LINE.search(program)]


class GuideExampleTests(TestCase):
    timeout = 60
    #: The guide whose examples run, and how many it has at least.
    guide = GUIDE
    minimum = 7

    def setUp(self) -> None:
        self.broker = LoopbackBroker()
        self.broker.start()
        self.addCleanup(self.broker.stop)
        files = certificates()
        with open(files.server_key, "rb") as key, open(files.server_cert, "rb") as cert:
            server = PrivateCertificate.loadPEM(key.read() + cert.read())
        with open(files.ca, "rb") as ca:
            options = server.options(Certificate.loadPEM(ca.read()))
        listening = reactor.listenSSL(0, self.broker.factory, options, interface="127.0.0.1")  # type: ignore[attr-defined]
        self.addCleanup(listening.stopListening)
        query = urlencode({"cacertfile": files.ca, "certfile": files.client_cert, "keyfile": files.client_key})
        self.urls = {
            "amqp": self.broker.url,
            "amqps": f"amqps://guest:guest@127.0.0.1:{listening.getHost().port}/?{query}",
        }

    def test_the_guide_has_examples(self) -> None:
        self.assertGreaterEqual(len(examples(self.guide)), self.minimum)

    @inline
    async def test_every_example_runs(self) -> None:
        for example in examples(self.guide):
            program = _URL_LINE.sub(lambda match: f"URL = {self.urls[match.group(1)]!r}", example)
            await self.runProgram(program)

    async def runProgram(self, program: str) -> None:
        environment: dict[str, Any] = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, environment.get("PYTHONPATH")]))
        out, err, code = await getProcessOutputAndValue(sys.executable, ["-c", program], env=environment, path=ROOT)
        self.assertEqual(code, 0, f"{program}\n--- output:\n{out.decode()}\n--- errors:\n{err.decode()}")
