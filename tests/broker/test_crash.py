"""kill -9 of the broker while it takes and hands out persistent messages.

Each round starts the broker on the same data directory, publishes numbered
persistent messages with confirms (many in flight) while a consumer takes and
acknowledges them, and kills the broker with SIGKILL once a random number of
confirms has arrived. After the last round every message the broker confirmed
and the consumer did not acknowledge must be in the queue exactly once, in
publish order, marked redelivered; a message the consumer acknowledged may be
there (its ack may have died with the broker), but never twice. The broker
runs with a small memory budget, so that most bodies are paged out and read
back meanwhile.
"""

from __future__ import annotations

import os
import random
from typing import Any, Callable, Optional

from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.python.failure import Failure

from tests.broker.test_restart import BrokerProcessTestCase
from txamqp09.client import Channel, ChannelClosed, ConnectionClosed, Message

#: Messages in flight (published, not yet confirmed) at any time.
WINDOW = 100
ROUNDS = 5
PERSISTENT = {"delivery_mode": 2}
#: A memory budget of a few hundred message bodies: most are paged out and
#: read back while the rounds run.
BUDGET = ("--memory-budget", "1000")
#: Seconds allowed for each broker start: about 0.5 s of CPU, which takes
#: many seconds of wall time when the machine's cores are busy elsewhere.
START_SECONDS = 20
#: Seconds allowed for each round's publishing: at most 2,000 confirms, a
#: group commit per 100 at least (a slow disk makes every fsync slow).
ROUND_SECONDS = 15


class Ledger:
    """What the clients know: published, confirmed and acknowledged numbers."""

    def __init__(self) -> None:
        self.published = 0
        self.confirmed: set[int] = set()
        self.acked: set[int] = set()


class Round:
    """One broker lifetime: publish and consume until *kill_after* confirms, then kill.

    :param kill: called once, when the round has seen enough confirms;
        returns a Deferred that fires once the broker has ended.
    :ivar ended: that Deferred, once the round killed the broker.
    """

    def __init__(self, ledger: Ledger, kill_after: int, kill: Callable[[], Deferred[None]]) -> None:
        self.ledger = ledger
        self.kill_after = kill_after
        self.kill = kill
        self.confirms = 0
        self.killed = False
        self.ended: Optional[Deferred[None]] = None

    def publish(self, channel: Channel) -> None:
        """Publish the next message, and another each time one is confirmed."""
        if self.killed:
            return
        number = self.ledger.published
        self.ledger.published += 1
        confirmed = channel.basic_publish(b"%d" % number, routing_key="q", properties=PERSISTENT)
        assert confirmed is not None, "the channel is in confirm mode"
        confirmed.addCallbacks(self._confirmed, _lost, callbackArgs=(number, channel))

    def _confirmed(self, _: Any, number: int, channel: Channel) -> None:
        self.ledger.confirmed.add(number)
        self.confirms += 1
        if self.confirms >= self.kill_after and not self.killed:
            self.killed = True
            self.ended = self.kill()
        self.publish(channel)

    def consumed(self, message: Message) -> None:
        """Acknowledge every delivery and remember it as (perhaps) acknowledged."""
        if not self.killed:
            message.ack()
            self.ledger.acked.add(int(message.body))


def _lost(failure: Failure) -> None:
    """A confirm that never came: the broker died first."""
    failure.trap(ConnectionClosed, ChannelClosed)


class CrashTests(BrokerProcessTestCase):
    #: Every wait below is on a condition; this bounds them all: a start per
    #: round and one to read what is left, and the rounds' publishing.
    timeout = (ROUNDS + 1) * START_SECONDS + ROUNDS * ROUND_SECONDS

    @inlineCallbacks
    def test_kill_9_while_publishing_and_consuming_loses_no_confirmed_message(self) -> Any:
        seed = int.from_bytes(os.urandom(4), "big")
        generator = random.Random(seed)
        data_dir = self.mktemp()
        ledger = Ledger()
        for _ in range(ROUNDS):
            broker = yield self.started(data_dir, *BUDGET)
            publisher_connection = yield self.connected(broker)
            consumer_connection = yield self.connected(broker)
            publisher = yield publisher_connection.channel()
            yield publisher.queue_declare("q", durable=True)
            yield publisher.confirm_select()
            consumer = yield consumer_connection.channel()
            yield consumer.basic_qos(generator.randint(1, 300))
            current = Round(ledger, generator.randint(50, 2000), broker.kill)
            yield consumer.basic_consume("q", current.consumed)
            for _ in range(WINDOW):
                current.publish(publisher)
            yield publisher_connection.whenClosed()
            yield consumer_connection.whenClosed()
            self.assertIsNotNone(current.ended, f"the broker ended before the round killed it (seed {seed})")
            # The next broker opens the same store: only once this one is gone.
            yield current.ended

        recovered = yield self.restarted_contents(data_dir, *BUDGET)
        found = [(int(message.body), message.redelivered) for message in recovered]
        numbers = [number for number, _ in found]
        context = f"(seed {seed}, {ledger.published} published, {len(ledger.confirmed)} confirmed)"
        self.assertEqual(numbers, sorted(set(numbers)), f"duplicates or disorder {context}")
        missing = ledger.confirmed - ledger.acked - set(numbers)
        self.assertEqual(missing, set(), f"confirmed, unacknowledged and lost {context}")
        self.assertLess(max(numbers, default=0), ledger.published, context)
        self.assertTrue(all(redelivered for _, redelivered in found), context)
        self.assertGreater(len(ledger.confirmed), ROUNDS * 50, context)
