"""A trial test case with this project's broker on a loopback port."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from txamqp09.testing.broker import LoopbackBroker

T = TypeVar("T")


class LoopbackTestCase(TestCase):
    """Starts a broker on 127.0.0.1 before each test and stops it after.

    Blocking clients run through :meth:`inThread` while the broker serves
    them from the reactor thread.
    """

    timeout = 60
    #: Options for the broker's connections.
    broker_options: dict[str, Any] = {}

    def setUp(self) -> None:
        self.server = LoopbackBroker(**self.broker_options)
        self.port = self.server.start()
        self.addCleanup(self.server.stop)

    def inThread(self, function: Callable[..., T], *args: Any) -> Deferred[T]:
        """Run a blocking client function in a thread; its result, as a Deferred."""
        return deferToThread(function, *args)

    def queue(self, name: str) -> Any:
        """The model's queue *name* in vhost ``/``."""
        return self.server.broker.vhosts["/"].queues[name]
