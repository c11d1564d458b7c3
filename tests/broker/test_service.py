"""``twistd amqp09`` storage options and the service that opens and closes the store."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.interfaces import IReactorFromThreads
from twisted.internet.task import Clock
from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase, TestCase

from txamqp09.testing.scripted import ScriptedClient
from txamqp09.broker.service import BrokerService
from txamqp09.store.interface import DurableQueue
from txamqp09.store.sqlite import SQLiteStore
from txamqp09.tap import Options, default_data_dir, makeService


def built(*argv: str) -> BrokerService:
    options = Options()
    options.parseOptions(["--listen", "tcp:0:interface=127.0.0.1", *argv])
    service = makeService(options, Clock())
    assert isinstance(service, BrokerService)
    return service


class OptionsTests(SynchronousTestCase):
    def test_sqlite_store_in_the_data_dir_by_default(self) -> None:
        service = built("--data-dir", "/srv/amqp")
        self.assertIsInstance(service.store, SQLiteStore)
        assert isinstance(service.store, SQLiteStore)
        self.assertEqual(service.store.path, Path("/srv/amqp/store.db"))
        self.assertIs(service.factory.broker.persistence.store, service.store)  # type: ignore[union-attr]

    def test_default_data_dir_follows_xdg_state_home(self) -> None:
        self.patch(os, "environ", {**os.environ, "XDG_STATE_HOME": "/state"})
        self.assertEqual(default_data_dir(), Path("/state/txamqp09"))
        self.assertEqual(built().store.path, Path("/state/txamqp09/store.db"))  # type: ignore[union-attr]
        self.patch(os, "environ", {"HOME": "/home/amqp"})
        self.assertEqual(default_data_dir(), Path("/home/amqp/.local/state/txamqp09"))

    def test_transient_broker_keeps_nothing(self) -> None:
        service = built("--transient")
        self.assertIsNone(service.store)
        self.assertIsNone(service.factory.broker.persistence)
        self.assertRaises(
            usage.UsageError, Options().parseOptions, ["--transient", "--data-dir", "/srv/amqp"]
        )


class ServiceTests(TestCase):
    @inlineCallbacks
    def test_store_opened_before_listening_and_closed_after(self) -> Any:
        data_dir = self.mktemp()
        service = built("--data-dir", data_dir)
        store = service.store
        assert isinstance(store, SQLiteStore)
        store.open()
        store.add_queue(DurableQueue("/", "kept"))
        yield store.close()
        service = built("--data-dir", data_dir)
        service.startService()
        self.assertTrue(all(child.running for child in service))
        self.assertIn("kept", service.factory.broker.vhosts["/"].queues)
        peer = ScriptedClient(service.factory)
        yield service.stopService()
        close: Any = peer.expect(0, "connection.close")
        self.assertEqual(close.reply_code, 320)
        self.assertFalse(any(child.running for child in service))
        reopened = SQLiteStore(store.path, cast(IReactorFromThreads, reactor))
        self.assertEqual([q.name for q in reopened.open().queues], ["kept"])
        yield reopened.close()
