"""Every complete example of docs/amqp09-classes.rst runs against this project's broker."""

from __future__ import annotations

import os

from tests.docs import test_client as test_docs


class ClassesGuideTests(test_docs.GuideExampleTests):
    guide = os.path.join(test_docs.ROOT, "docs", "amqp09-classes.rst")
    minimum = 6
