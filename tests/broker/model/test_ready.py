"""ReadyMessages: a queue's entries, the plain ones kept as bare messages."""

from __future__ import annotations

from collections import deque

from twisted.trial.unittest import SynchronousTestCase

from tests.broker.support import message as _message
from txamqp09.broker.model.message import Message
from txamqp09.broker.model.ready import Entry
from txamqp09.broker.model.ready import ReadyMessages


def message(number: int) -> Message:
    """A message whose body is *number*."""
    return _message(str(number).encode())


def entries(first: int, count: int) -> list[Entry]:
    """*count* plain entries numbered from *first*."""
    return [(sequence, message(sequence), False, None) for sequence in range(first, first + count)]


class ReadyMessagesTests(SynchronousTestCase):
    def test_plain_entries_come_back_as_entries(self) -> None:
        ready = ReadyMessages(entries(5, 3))
        self.assertEqual(len(ready), 3)
        self.assertEqual((ready[0][0], ready[0][2:]), (5, (False, None)))
        self.assertEqual([entry[0] for entry in ready], [5, 6, 7])
        self.assertEqual(ready.popleft()[0], 5)
        self.assertEqual(ready[0][0], 6)
        self.assertEqual([entry[0] for entry in ready], [6, 7])

    def test_plain_entries_hold_no_tuple(self) -> None:
        """A run of plain entries costs a deque slot each: no tuple, no number."""
        plain = entries(1000, 1000)
        ready = ReadyMessages(plain)
        self.assertEqual(list(deque.__iter__(ready)), [entry[1] for entry in plain])

    def test_other_entries_keep_their_fields(self) -> None:
        first, second, third = entries(1, 3)
        redelivered = (first[0], first[1], True, None)
        expiring = (third[0], third[1], False, 12.5)
        ready = ReadyMessages([redelivered, second, expiring])
        self.assertEqual(list(ready), [redelivered, second, expiring])
        self.assertEqual(ready.popleft(), redelivered)
        self.assertEqual(ready.popleft(), second)
        self.assertEqual(ready.popleft(), expiring)
        self.assertFalse(ready)

    def test_a_gap_in_the_numbers_is_kept_as_a_tuple(self) -> None:
        """A plain entry that does not follow the run (a number was taken by
        a message delivered or dropped at once) keeps its own number."""
        ready = ReadyMessages(entries(1, 2) + entries(7, 2))
        self.assertEqual([entry[0] for entry in ready], [1, 2, 7, 8])
        self.assertEqual([ready.popleft()[0] for _ in range(4)], [1, 2, 7, 8])
        ready.append(entries(20, 1)[0])
        self.assertEqual(ready[0][0], 20)

    def test_delete_in_the_middle(self) -> None:
        ready = ReadyMessages(entries(10, 6))
        del ready[2]
        self.assertEqual([entry[0] for entry in ready], [10, 11, 13, 14, 15])
        del ready[0]
        self.assertEqual([entry[0] for entry in ready], [11, 13, 14, 15])
        ready.append(entries(16, 1)[0])
        self.assertEqual([ready.popleft()[0] for _ in range(5)], [11, 13, 14, 15, 16])

    def test_put_back_in_sequence_order(self) -> None:
        ready = ReadyMessages(entries(3, 2) + entries(6, 2))
        returned = [(sequence, message(sequence), True, None) for sequence in (1, 5, 9)]
        ready.put_back(returned)
        self.assertEqual([entry[0] for entry in ready], [1, 3, 4, 5, 6, 7, 9])
        self.assertEqual([entry[2] for entry in ready], [True, False, False, True, False, False, True])
        ready.append(entries(10, 1)[0])
        self.assertEqual([ready.popleft()[0] for _ in range(8)], [1, 3, 4, 5, 6, 7, 9, 10])

    def test_put_back_before_the_head(self) -> None:
        ready = ReadyMessages(entries(5, 2))
        ready.put_back([(2, message(2), True, None), (3, message(3), True, None)])
        self.assertEqual([entry[0] for entry in ready], [2, 3, 5, 6])

    def test_clear(self) -> None:
        ready = ReadyMessages(entries(1, 3))
        ready.clear()
        self.assertEqual((len(ready), list(ready)), (0, []))
        ready.append(entries(9, 1)[0])
        self.assertEqual(ready.popleft()[0], 9)
        self.assertRaises(IndexError, ready.popleft)
