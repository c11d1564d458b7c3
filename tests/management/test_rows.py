"""Queue lists made of kept, encoded rows: same answers as building every row,
made once per snapshot, only changed rows built again, big builds in slices."""

from __future__ import annotations

import json
from typing import Any, Mapping

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from tests.broker.support import session
from txamqp09.broker.model import Queue
from txamqp09.broker.server import ServerFactory
from txamqp09.management import rows
from txamqp09.management.api import ApiError, ApiRequest, Encoded, listing
from txamqp09.management.direct import DirectSession
from txamqp09.management.node import Node
from txamqp09.management.rows import QueueRows, sort_keys
from txamqp09.management.views import queue_view


class QueueRowsTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(1000)
        self.node = Node(ServerFactory(self.clock))
        self.vhost = self.node.broker.vhosts["/"]
        self.session = DirectSession(self.vhost)
        for name in ("b", "a", "C", "d0", "d1"):
            self.vhost.declare_queue(name, self.session.client)
        self.built: list[str] = []

        def build(queue: Queue, unacked: tuple[int, int]) -> Mapping[str, Any]:
            self.built.append(queue.name)
            return queue_view(self.node, queue, unacked)

        self.rows = QueueRows(self.node, build)
        self.node.start()
        self.addCleanup(self.node.stop)

    def answer(self, query: dict[str, str]) -> Any:
        keys = sort_keys(query)
        assert keys is not None
        answered = self.rows.answer([self.vhost], query, keys)
        while not answered.called:
            self.clock.advance(0)
        encoded = self.successResultOf(answered)
        self.assertIsInstance(encoded, Encoded)
        return json.loads(encoded.data)

    def built_every_row(self, query: dict[str, str]) -> Any:
        request = ApiRequest(None, "GET", {}, query, {}, b"", self.node)  # type: ignore[arg-type]
        answer = listing(request, [queue_view(self.node, queue, (0, 0)) for queue in self.vhost.queues.values()])
        return json.loads(json.dumps(answer))

    def test_answers_equal_those_built_row_by_row(self) -> None:
        for query in ({}, {"sort": "name"}, {"sort": "name", "sort_reverse": "true"}, {"sort": ""},
                      {"page": "1", "page_size": "2", "sort": "name"}, {"page": "2", "page_size": "2"},
                      {"page": "1", "name": "D"}, {"page": "1", "name": "^[ab]$", "use_regex": "true"}):
            self.assertEqual(self.answer(query), self.built_every_row(query), query)

    def test_bad_pages_are_refused_as_by_listing(self) -> None:
        for query in ({"page": "0"}, {"page": "1", "page_size": "501"}, {"page": "9"},
                      {"page": "1", "name": "(", "use_regex": "true"}):
            with self.assertRaises(ApiError) as ours:
                self.answer(query)
            with self.assertRaises(ApiError) as built:
                self.built_every_row(query)
            self.assertEqual(ours.exception.body(), built.exception.body(), query)

    def test_sorts_other_than_name_or_vhost_are_not_served(self) -> None:
        self.assertIsNone(sort_keys({"sort": "messages"}))
        self.assertEqual(sort_keys({"sort": "name"}), ("name", "vhost", "name"))

    def messages(self) -> dict[str, int]:
        return {row["name"]: row["messages"] for row in self.answer({})}

    def test_the_whole_list_is_made_once_per_snapshot(self) -> None:
        self.answer({})
        self.session.publish("", "a", b"m")
        self.assertEqual(self.messages()["a"], 0)  # the snapshot of the last sample
        self.clock.advance(5)  # a sample: a new snapshot
        self.assertEqual(self.messages()["a"], 1)
        self.session.publish("", "a", b"m")
        self.node.changed()  # a change through the API: a new snapshot
        self.assertEqual(self.messages()["a"], 2)
        self.vhost.declare_queue("new", self.session.client)  # a new queue is listed at once
        self.assertIn("new", [row["name"] for row in self.answer({})])

    def test_only_rows_whose_queue_changed_are_built_again(self) -> None:
        self.answer({})
        self.assertEqual(sorted(self.built), ["C", "a", "b", "d0", "d1"])
        self.built.clear()
        self.session.publish("", "b", b"m")
        self.clock.advance(5)
        self.answer({})
        self.assertEqual(self.built, ["b"])
        self.built.clear()
        self.answer({"page": "1", "page_size": "2", "sort": "name"})
        self.assertEqual(self.built, [])

    def test_consumer_utilisation_is_kept_current(self) -> None:
        """A queue whose consumer stays blocked: its utilisation falls from
        one snapshot to the next although nothing else about it changes."""
        consumer_session, _ = session(self.vhost)
        consumer_session.qos(0, 1, False)
        consumer_session.consume(self.vhost.queues["a"], "c").start()
        for body in (b"1", b"2"):
            self.session.publish("", "a", body)
        utilisations = []
        for _ in range(4):
            self.clock.advance(5)
            (row,) = [row for row in self.answer({}) if row["name"] == "a"]
            utilisations.append(row["consumer_utilisation"])
        # 5, 10, 15, 20 s blocked: halved every second.
        for earlier, later in zip(utilisations, utilisations[1:]):
            self.assertLess(later, earlier / 16)

    def test_a_big_build_leaves_the_reactor_free_between_slices(self) -> None:
        for number in range(200):
            self.vhost.declare_queue(f"many-{number}", self.session.client)
        self.patch(rows, "SLICE_SECONDS", -1.0)
        answered = self.rows.answer([self.vhost], {}, ("vhost", "name"))
        self.assertFalse(answered.called)
        self.assertEqual(len(self.built), 64)
        self.assertEqual(len(self.clock.getDelayedCalls()), 2)  # the next slice and the sampler
        self.clock.advance(0)
        self.assertEqual(len(json.loads(self.successResultOf(answered).data)), 205)
