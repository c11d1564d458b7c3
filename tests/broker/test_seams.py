"""The seams between the broker's model and the layers around it: the model
imports nothing from Twisted, every :class:`~txamqp09.broker.model.ISink`
provides what sessions call, and the clocks the server passes fit the model's."""

from __future__ import annotations

import inspect
import subprocess
import sys

from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyClass, verifyObject

from txamqp09.testing.scripted import ScriptedClient, server_factory
from txamqp09.broker.classes.common import DeliveringState
from txamqp09.broker.classes.file import FileState
from txamqp09.broker.classes.message import MessageState
from txamqp09.broker.classes.registry import channel_classes
from txamqp09.broker.classes.stream import StreamState
from txamqp09.broker.classes.tunnel import TunnelState
from txamqp09.broker.model import Broker, ISink
from txamqp09.broker.model.clock import Clock as ModelClock
from txamqp09.management.direct import DirectSession
from txamqp09.wire.versions import AMQP0_9


class ModelImportsTests(SynchronousTestCase):
    def test_the_model_imports_nothing_from_twisted(self) -> None:
        """Importing the model in a fresh interpreter loads no Twisted module."""
        loaded = subprocess.run(
            [sys.executable, "-c", "import sys, txamqp09.broker.model; print(*sys.modules)"],
            capture_output=True, text=True, check=True,
        ).stdout.split()
        self.assertIn("txamqp09.broker.model.vhost", loaded)
        self.assertEqual([name for name in loaded if name.split(".")[0] == "twisted"], [])


class SinkTests(SynchronousTestCase):
    """Everything a session reports to provides ISink."""

    def test_server_channels(self) -> None:
        """A server channel's session reports to the channel's publisher."""
        peer = ScriptedClient(server_factory())
        sink = peer.server.channels[1].session.sink
        self.assertIs(sink, peer.server.channels[1].publisher)
        verifyObject(ISink, sink)

    def test_class_states_with_deliveries_of_their_own(self) -> None:
        peer = ScriptedClient(server_factory(), AMQP0_9)
        classes = channel_classes(peer.server.channels[1])
        for state_class in (FileState, MessageState, StreamState, TunnelState):
            self.assertTrue(issubclass(state_class, DeliveringState))
            verifyObject(ISink, classes.state(state_class))

    def test_the_management_direct_session(self) -> None:
        with DirectSession(Broker(["/"]).vhosts["/"]) as direct:
            verifyObject(ISink, direct.session.sink)

    def test_an_incomplete_sink_is_caught(self) -> None:
        class Incomplete:
            def deliver(self, consumer: object, delivery_tag: int, redelivered: bool, message: object) -> None:
                """Only one of the four methods."""

        self.assertRaises(Exception, verifyClass, ISink, Incomplete)


class ClockTests(SynchronousTestCase):
    """The model's Clock asks for part of IReactorTime, so that any reactor fits."""

    def test_every_method_is_one_of_ireactortime(self) -> None:
        asked = [name for name, _ in inspect.getmembers(ModelClock, inspect.isfunction) if not name.startswith("_")]
        self.assertEqual(sorted(asked), ["callLater", "seconds"])
        for name in asked:
            ours = tuple(inspect.signature(getattr(ModelClock, name)).parameters)[1:]
            info = IReactorTime[name].getSignatureInfo()
            theirs = info["positional"] + tuple(extra for extra in (info["varargs"], info["kwargs"]) if extra)
            self.assertEqual(ours, theirs)

    def test_twisteds_test_clock_provides_ireactortime(self) -> None:
        verifyObject(IReactorTime, Clock())
