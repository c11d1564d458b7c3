"""The private PostgreSQL servers of :mod:`txamqp09.testing.postgresql`."""

from __future__ import annotations

import tempfile

from twisted.trial.unittest import TestCase

from txamqp09.testing.postgresql import (
    PostgreSQL,
    PostgreSQLError,
    group_url,
    postgresql_missing,
    shared_postgresql,
)


class SharedServerTests(TestCase):
    """The server a test process shares."""

    skip = postgresql_missing()

    def test_new_databases_are_separate(self) -> None:
        """Each database made for a test is new and empty, and holds what a test writes."""
        server = shared_postgresql()
        first = server.new_database().rsplit("/", 1)[1]
        second = server.new_database().rsplit("/", 1)[1]
        self.assertNotEqual(first, second)
        server.execute("CREATE TABLE t (x int); INSERT INTO t VALUES (7)", first)
        self.assertEqual(server.execute("SELECT x FROM t", first), "7")
        self.assertEqual(server.execute("SELECT count(*) FROM pg_tables WHERE tablename = 't'", second), "0")

    def test_listens_on_loopback_only(self) -> None:
        """The server is configured to listen on 127.0.0.1 and nothing else."""
        self.assertEqual(shared_postgresql().execute("SHOW listen_addresses"), "127.0.0.1")

    def test_failed_statement_raises(self) -> None:
        """A statement that fails raises with PostgreSQL's message."""
        with self.assertRaises(PostgreSQLError) as raised:
            shared_postgresql().execute("SELECT * FROM no_such_table")
        self.assertIn("no_such_table", str(raised.exception))


class ReplicationTests(TestCase):
    """A primary with a synchronous standby, a crash and a promotion."""

    skip = postgresql_missing()

    def setUp(self) -> None:
        self.primary = PostgreSQL(tempfile.mkdtemp(prefix="txamqp09-pg-test-"))
        self.addCleanup(self.primary.remove)
        self.primary.start()
        self.standby = self.primary.add_standby(tempfile.mkdtemp(prefix="txamqp09-pg-test-"))
        self.addCleanup(self.standby.remove)

    def test_synchronous_standby_survives_primary_crash(self) -> None:
        """A row committed on the primary with a synchronous standby is on
        the standby; after SIGKILL of the primary and promotion, the standby
        takes writes; the group URI names both servers."""
        self.primary.make_synchronous()
        self.assertEqual(self.primary.execute("SELECT sync_state FROM pg_stat_replication"), "sync")
        self.primary.execute("CREATE TABLE t (x int); INSERT INTO t VALUES (1)")
        self.assertEqual(self.standby.execute("SELECT pg_is_in_recovery()"), "t")
        self.primary.kill()
        self.assertFalse(self.primary.running)
        self.standby.promote()
        self.assertEqual(self.standby.execute("SELECT pg_is_in_recovery()"), "f")
        self.standby.execute("INSERT INTO t VALUES (2)")
        self.assertEqual(self.standby.execute("SELECT x FROM t ORDER BY x").split(), ["1", "2"])
        url = group_url([self.primary, self.standby], "postgres")
        self.assertIn(f"127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}", url)
        self.assertTrue(url.endswith("?target_session_attrs=read-write"))
