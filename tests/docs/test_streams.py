"""Every complete example of docs/streams.rst runs against this project's broker."""

from __future__ import annotations

import os

from tests.docs import test_client as test_docs


class StreamsGuideTests(test_docs.GuideExampleTests):
    guide = os.path.join(test_docs.ROOT, "docs", "streams.rst")
    minimum = 2
