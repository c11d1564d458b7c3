"""What a standby holds when it takes over: exactly what the active had
committed, read from the copy of the database it kept while standing by.

Two broker processes of a group on a PostgreSQL primary with a synchronous
standby; a pika client publishes to the active (confirmed), takes messages
(acknowledged, rejected, or left unacknowledged), purges a queue and deletes
another, while the standby follows the database. After kill -9 of the
active, the new active holds every message that was not removed, in order
and redelivered, and none that was.
"""

from __future__ import annotations

import time
from typing import Any

import pika
import pika.exceptions
from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.threads import deferToThread
from twisted.python import log
from twisted.trial.unittest import TestCase

from tests.group.support import SERVING, STANDING_BY, GroupBroker, shared_replicated
from txamqp09.testing.postgresql import psycopg_missing

#: The queues the client leaves messages on, and the one it deletes.
KEPT = ("a", "b", "purged")
DELETED = "deleted"
#: The line of a broker that restored from the copy it kept while standing by.
FOLLOWED = rb"persistent messages in [\d.]+ s \([^)]*read what changed since the copy kept while standing by\)"


def _connection(port: int) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port, heartbeat=0, connection_attempts=1))


def work(port: int) -> tuple[dict[str, list[bytes]], pika.BlockingConnection]:
    """With pika, on the broker at *port*: publish persistent messages with
    confirms to queues a (directly, and with b through a fanout exchange)
    and to the queues purged and deleted; take 60 of a's and 10 of b's,
    acknowledging or rejecting some and leaving the others unacknowledged;
    purge one queue, delete one; publish and acknowledge some more, and
    publish one last message. What each kept queue holds then (bodies in
    publish order), and the connection, left open with its unacknowledged
    messages."""
    connection = _connection(port)
    channel = connection.channel()
    channel.confirm_delivery()
    for name in (*KEPT, DELETED):
        channel.queue_declare(name, durable=True)
    channel.exchange_declare("fan", "fanout", durable=True)
    channel.queue_bind("a", "fan")
    channel.queue_bind("b", "fan")
    persistent = pika.BasicProperties(delivery_mode=2)
    held: dict[str, list[bytes]] = {name: [] for name in KEPT}

    def publish(exchange: str, key: str, body: bytes, *queues: str) -> None:
        channel.basic_publish(exchange, key, body, persistent)
        for queue in queues:
            held[queue].append(body)

    def take(queue: str, count: int, settle: Any) -> None:
        for number in range(count):
            method, _, body = channel.basic_get(queue)
            if settle(number, method.delivery_tag):
                held[queue].remove(body)

    def ack_or_reject(number: int, tag: int) -> bool:
        if number % 2 == 0:
            channel.basic_ack(tag)
        elif number % 3 == 0:
            channel.basic_reject(tag, requeue=False)
        else:
            return False  # left unacknowledged: it comes back
        return True

    def ack(number: int, tag: int) -> bool:
        channel.basic_ack(tag)
        return True

    for number in range(200):
        publish("", "a", b"a-%d" % number, "a")
    for number in range(50):
        publish("fan", "", b"fan-%d" % number, "a", "b")
    for number in range(20):
        publish("", "purged", b"purged-%d" % number)
        publish("", DELETED, b"deleted-%d" % number)
    take("a", 60, ack_or_reject)
    take("b", 10, ack)
    channel.queue_purge("purged")
    channel.queue_delete(DELETED)
    for number in range(200, 220):
        publish("", "a", b"a-%d" % number, "a")
    take("a", 5, ack)
    # Acknowledgements are not confirmed: the confirm of a publish after
    # them says they were committed (the store writes in order).
    publish("", "a", b"last", "a")
    return held, connection


def close(connection: pika.BlockingConnection) -> None:
    """Close *connection*, unless its broker is gone."""
    try:
        connection.close()
    except pika.exceptions.AMQPError:
        pass


def drain(port: int) -> dict[str, list[tuple[bytes, bool]]]:
    """Every message of the kept queues on the broker at *port* (body,
    redelivered), in order, acknowledged; and whether the deleted queue
    exists (its name mapped to an empty list when it does)."""
    connection = _connection(port)
    channel = connection.channel()
    found: dict[str, list[tuple[bytes, bool]]] = {}
    for name in KEPT:
        found[name] = []
        while True:
            method, _, body = channel.basic_get(name)
            if method is None:
                break
            found[name].append((body, method.redelivered))
            channel.basic_ack(method.delivery_tag)
    try:
        channel.queue_declare(DELETED, passive=True)
        found[DELETED] = []
    except pika.exceptions.ChannelClosedByBroker as closed:
        if closed.reply_code != 404:
            raise
    connection.close()
    return found


class TakeoverTests(TestCase):
    """The standby follows the database; kill -9 of the active."""

    skip = psycopg_missing()
    timeout = 180

    @inlineCallbacks
    def broker(self, url: str, node: str, until: bytes) -> Any:
        """A broker of the group, killed at the end."""
        broker = GroupBroker(self.mktemp(), url, node)
        self.addCleanup(lambda: log.msg(f"{node}'s output:\n" + broker.log.decode(errors="replace")))
        self.addCleanup(broker.kill)
        yield broker.start(reactor, until)
        return broker

    @inlineCallbacks
    def test_the_new_active_holds_exactly_what_the_old_one_committed(self) -> Any:
        url = shared_replicated().new_database()
        active = yield self.broker(url, "node-a", SERVING)
        standby = yield self.broker(url, "node-b", STANDING_BY)
        held, connection = yield deferToThread(work, active.port)
        self.addCleanup(close, connection)
        killed_at = time.monotonic()
        yield active.kill()
        yield standby.wait_for(SERVING)
        log.msg(f"the standby served {time.monotonic() - killed_at:.3f} s after kill -9 of the active")
        self.assertRegex(standby.log, FOLLOWED)
        found = yield deferToThread(drain, standby.port)
        self.assertNotIn(DELETED, found)
        self.assertEqual({name: [body for body, _ in found[name]] for name in KEPT}, held)
        self.assertEqual(len(held["a"]), 200 - 30 - 10 + 50 + 20 - 5 + 1)
        self.assertEqual(len(held["b"]), 40)
        self.assertTrue(all(redelivered for name in KEPT for _, redelivered in found[name]))
