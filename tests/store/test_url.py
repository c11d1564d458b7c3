"""Stores named by URL (``--store``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import cast
from unittest.mock import patch

from twisted.internet import reactor as global_reactor
from twisted.internet.interfaces import IReactorFromThreads
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.store.sqlite import SQLiteStore
from txamqp09.store.url import StoreURLError, check_store_url, store_from_url
from txamqp09.testing.postgresql import psycopg_missing
from txamqp09.testing.rabbitmq import free_port

reactor = cast(IReactorFromThreads, global_reactor)


class StoreURLTests(SynchronousTestCase):
    def test_sqlite_names_a_file(self) -> None:
        store = store_from_url("sqlite:data/store.db", reactor)
        self.assertIsInstance(store, SQLiteStore)
        assert isinstance(store, SQLiteStore)
        self.assertEqual(store.path, Path("data/store.db"))
        self.assertFalse(store.path.exists(), "made, not opened")

    def test_a_url_without_a_store_is_refused_in_one_line(self) -> None:
        for url, said in [
            ("sqlite:", "names no file"),
            ("mysql://db/amqp", "use sqlite:PATH or postgresql://"),
            ("store.db", "use sqlite:PATH or postgresql://"),
        ]:
            error = self.assertRaises(StoreURLError, store_from_url, url, reactor)
            self.assertIn(said, str(error))
            self.assertEqual(len(str(error).splitlines()), 1)

    def test_without_psycopg_a_postgresql_url_says_what_to_install(self) -> None:
        with patch.dict(sys.modules, {"psycopg": None}):  # what import finds when psycopg is not installed
            error = self.assertRaises(StoreURLError, check_store_url, "postgresql://db/amqp")
        self.assertEqual(str(error), "the PostgreSQL store needs psycopg 3: install txamqp09[postgresql]")


class PostgreSQLURLTests(SynchronousTestCase):
    skip = psycopg_missing()

    def test_postgresql_names_a_database_without_connecting(self) -> None:
        from txamqp09.store.postgresql import PostgreSQLStore

        hosts = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
        url = f"postgresql://broker:secret@{hosts}/amqp?target_session_attrs=read-write"
        store = store_from_url(url, reactor, application_name="node-1", guard=("SELECT 1", ()))
        self.assertIsInstance(store, PostgreSQLStore)
        assert isinstance(store, PostgreSQLStore)
        self.assertEqual((store.url, store.application_name), (url, "node-1"))
        self.assertNotIn("secret", store.location)
        self.assertIsInstance(store_from_url("postgres://db/amqp", reactor), PostgreSQLStore)

    def test_a_uri_libpq_refuses_is_refused(self) -> None:
        error = self.assertRaises(StoreURLError, check_store_url, "postgresql://db/amqp?no_such_option=1")
        self.assertIn("not a valid libpq URI", str(error))
        self.assertIn("no_such_option", str(error))
