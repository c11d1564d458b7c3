"""Values counted in histogram buckets (the store's commit times and batch sizes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import SynchronousTestCase, TestCase

from txamqp09.store.distribution import Distribution
from txamqp09.store.interface import DurableQueue
from txamqp09.store.sqlite import SQLiteStore
from tests.store.test_stores import message


class DistributionTests(SynchronousTestCase):
    def test_a_value_counts_in_the_first_bucket_that_holds_it_and_every_later_one(self) -> None:
        distribution = Distribution((1, 10))
        for value in (0.5, 1, 3, 10, 11):
            distribution.observe(value)
        self.assertEqual(distribution.cumulative(), ([2, 4, 5], 25.5))

    def test_nothing_observed(self) -> None:
        self.assertEqual(Distribution((1,)).cumulative(), ([0, 0], 0.0))


class SQLiteCommitRecordTests(TestCase):
    @inlineCallbacks
    def test_each_commit_is_timed_and_its_messages_counted(self) -> Any:
        store = SQLiteStore(Path(self.mktemp()) / "store.db", reactor)
        self.addCleanup(store.close)
        store.open()
        store.add_queue(DurableQueue("/", "q"))
        sequences = [store.publish(message(n), [("/", "q")]) for n in range(1, 301)]
        yield store.when_durable(sequences[-1])
        batches, seconds = store.commit_seconds.cumulative()
        sizes, messages = store.batch_messages.cumulative()
        self.assertEqual(batches[-1], store.commits)
        self.assertEqual(sizes[-1], store.commits)
        self.assertEqual(messages, 300)
        self.assertGreater(seconds, 0)
