"""The broker in a child process with its store in PostgreSQL (``--store postgresql://...``)."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import gatherResults, inlineCallbacks

from tests.broker.test_restart import BrokerProcessTestCase
from txamqp09.client import ChannelClosed
from txamqp09.testing.postgresql import psycopg_missing, shared_postgresql


class PostgreSQLStoreRestartTests(BrokerProcessTestCase):
    skip = psycopg_missing()
    timeout = 120

    @inlineCallbacks
    def test_durable_queues_and_confirmed_messages_survive_kill_9(self) -> Any:
        """A broker killed at once, started again with another data
        directory: what it keeps is in the database alone."""
        store = ("--store", shared_postgresql().new_database())
        broker = yield self.started(self.mktemp(), *store)
        channel = yield self.channel(broker)
        yield channel.exchange_declare("events", "topic", durable=True)
        yield channel.queue_declare("q", durable=True)
        yield channel.queue_declare("scratch")
        yield channel.request("queue.bind", queue="q", exchange="events", routing_key="a.#")
        yield channel.confirm_select()
        yield gatherResults([
            channel.basic_publish(b"%d" % n, "events", "a.b", properties={"delivery_mode": 2}) for n in range(500)
        ])
        yield broker.kill()

        broker = yield self.started(self.mktemp(), *store)
        connection = yield self.connected(broker)
        channel = yield connection.channel()
        declared = yield channel.queue_declare("q", passive=True)
        self.assertEqual(declared.message_count, 500)
        with self.assertRaises(ChannelClosed) as missing:
            yield channel.queue_declare("scratch", passive=True)
        self.assertEqual(missing.exception.reply_code, 404)
        channel = yield connection.channel()
        yield channel.confirm_select()
        yield channel.basic_publish(b"500", "events", "a.c", properties={"delivery_mode": 2})
        yield broker.stop()

        recovered = yield self.restarted_contents(self.mktemp(), *store)
        self.assertEqual([int(m.body) for m in recovered], list(range(501)))
        self.assertTrue(all(m.redelivered for m in recovered))
