"""The staging area: limits, eviction, no copies."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from txamqp09.broker.classes.staging import Staged, StagingArea
from txamqp09.wire.errors import PreconditionFailed


class StagingAreaTests(SynchronousTestCase):
    def test_open_keeps_content_of_the_same_size(self) -> None:
        area = StagingArea(100)
        staged = area.open("a", 10)
        area.append("a", staged, b"12345")
        self.assertIs(area.open("a", 10), staged)
        self.assertEqual(area.open("a", 11).size, 0)
        self.assertEqual(area.size, 0)

    def test_oldest_entries_make_room(self) -> None:
        area = StagingArea(10)
        for key in ("old", "new"):
            area.append(key, area.open(key, 5), b"x" * 5)
        area.append("third", area.open("third", 5), b"y" * 5)
        self.assertIsNone(area.get("old"))
        self.assertIsNotNone(area.get("new"))
        self.assertEqual(area.size, 10)

    def test_content_larger_than_the_limit_is_refused(self) -> None:
        area = StagingArea(10)
        staged = area.open("big", 20)
        area.append("big", staged, b"x" * 8)
        with self.assertRaises(PreconditionFailed) as raised:
            area.append("big", staged, b"x" * 8)
        self.assertIn("staging limit of 10 bytes", str(raised.exception))
        self.assertEqual(staged.size, 8)

    def test_content_in_one_piece_is_not_copied(self) -> None:
        chunk = b"z" * 1000
        staged = Staged(1000, [chunk])
        self.assertIs(staged.content(), chunk)
        self.assertTrue(staged.complete)

    def test_checkpoint_shares_chunks(self) -> None:
        area = StagingArea(100)
        original = Staged(chunks=[b"ab", b"cd"])
        area.put("cp", Staged(chunks=original.chunks))
        copy = area.get("cp")
        assert copy is not None
        self.assertIsNot(copy.chunks, original.chunks)
        self.assertTrue(all(a is b for a, b in zip(copy.chunks, original.chunks)))
        self.assertEqual(area.size, 4)


class StagingExpiryTests(SynchronousTestCase):
    """Entries nobody touches for the ttl are abandoned."""

    def setUp(self) -> None:
        self.now = 0.0
        self.area = StagingArea(100, ttl=60, now=lambda: self.now)

    def test_untouched_entries_expire(self) -> None:
        self.area.append("old", self.area.open("old", 10), b"12345")
        self.now = 30
        self.area.append("young", self.area.open("young", 10), b"12")
        self.now = 60
        self.assertIsNone(self.area.get("old"))
        self.assertEqual(self.area.get("young").size, 2)  # type: ignore[union-attr]
        self.assertEqual(self.area.size, 2)

    def test_appending_keeps_an_entry_alive(self) -> None:
        staged = self.area.open("busy", 10)
        for _ in range(5):
            self.now += 50
            self.area.append("busy", staged, b"x")
        self.assertIs(self.area.get("busy"), staged)

    def test_zero_ttl_keeps_entries(self) -> None:
        self.area.ttl = 0
        self.area.append("kept", self.area.open("kept", 10), b"1")
        self.now = 10**9
        self.assertIsNotNone(self.area.get("kept"))
