"""The numbers of the queues messages are stored on (table ``queue_names``).

A message on one queue names its queue by a number rather than by vhost and
name: one small integer in its row, no second table. The writer numbers a
queue when it first writes a message to it.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

__all__ = ["QueueNumbers"]


class QueueNumbers:
    """The numbers of the queues messages are stored on (table
    ``queue_names``), by (vhost, name): the writer thread's once the store
    is open.

    A queue gets a number when a message is first written to it, and loses
    it when it is deleted (or, at the next start, when it holds no message).
    What a transaction changes here is undone when it fails.

    :ivar named: the rows of ``queue_names`` numbered since the last insert
        (their columns one after the other).
    :ivar alone: by number (every number given), how many rows of
        ``messages`` name the queue, or more (a failed insert is not taken
        back): deleting a queue with none needs no scan of the messages.
    :ivar linked: the numbers of queues that may hold messages of several
        queues (rows of ``message_links``): only a removal from one of them
        needs to look at the links.
    :ivar logged: the number of the removal log's latest row (see
        :data:`~txamqp09.store.schema.REMOVALS`): each transaction that
        removes messages takes the next (one that fails leaves its number
        unused).
    """

    __slots__ = ("numbers", "next", "named", "alone", "linked", "logged", "_undo", "_deleted")

    def __init__(self) -> None:
        self.numbers: dict[tuple[str, str], int] = {}
        self.next = 1
        self.named: list[Any] = []
        self.alone: dict[int, int] = {}
        self.linked: set[int] = set()
        self.logged = 0
        #: (key, its number and rows before) for each change since the last commit.
        self._undo: list[tuple[tuple[str, str], Optional[int], int]] = []
        #: (number, what tells the rows deleted) since the last commit.
        self._deleted: list[tuple[int, Callable[[], int]]] = []

    def load(
        self, names: dict[int, tuple[str, str]], alone: dict[int, int], linked: Iterable[int], logged: int
    ) -> None:
        """Take the numbers of the database, the rows naming each, the
        numbers of queues with links and the removal log's latest number
        (at start-up)."""
        self.numbers = {key: number for number, key in names.items()}
        self.next = max(names, default=0) + 1
        self.alone = alone
        self.linked = set(linked)
        self.logged = logged

    def number(self, key: tuple[str, str]) -> int:
        """The number of the queue *key*, given one now if it has none."""
        number = self.numbers.get(key)
        if number is None:
            number = self.numbers[key] = self.next
            self.next += 1
            self.alone[number] = 0
            self.named += (number, *key)
            self._undo.append((key, None, 0))
        return number

    def deleted(self, number: int, rows: Callable[[], int]) -> None:
        """Rows of messages on the queue *number* alone were deleted: as
        many as *rows* tells once the transaction has committed."""
        self._deleted.append((number, rows))

    def forget(self, key: tuple[str, str]) -> tuple[Optional[int], int]:
        """Take the number off the queue *key* (deleted): the number it had,
        and how many rows of messages may name it."""
        number = self.numbers.pop(key, None)
        if number is None:
            return None, 0
        rows = self.alone.pop(number, 0)
        self._undo.append((key, number, rows))
        return number, rows

    def committed(self) -> None:
        """The changes so far are on disk."""
        self._undo.clear()
        alone = self.alone
        for number, rows in self._deleted:
            if number in alone:
                alone[number] -= rows()
        self._deleted.clear()

    def rolled_back(self) -> None:
        """The transaction of the changes since the last commit failed: undo them."""
        for key, number, rows in reversed(self._undo):
            if number is None:
                self.alone.pop(self.numbers.pop(key), None)
            else:
                self.numbers[key] = number
                self.alone[number] = rows
        self._undo.clear()
        self._deleted.clear()
        self.named.clear()
