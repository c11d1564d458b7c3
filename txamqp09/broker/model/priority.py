"""Ready messages of a priority queue (``x-max-priority``).

:class:`PriorityMessages` keeps one FIFO per priority level and offers the
deque operations a :class:`~txamqp09.broker.model.queue.Queue` uses, so the
queue hands out higher priorities first and arrival order within one. A
message's priority is its ``priority`` property, 0 when absent, and the
queue's maximum when above it (as RabbitMQ does).
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Iterable, Iterator

from txamqp09.broker.model.message import Message
from txamqp09.broker.model.ready import Entry

__all__ = ["PriorityMessages", "merge_entries"]

#: The priority bit in the first byte of the basic property flags.
_PRIORITY_FLAG = 0x08


def merge_entries(entries: list[Entry], messages: deque[Entry]) -> deque[Entry]:
    """*messages* with the sorted *entries* put back in sequence order."""
    if not messages or entries[-1][0] < messages[0][0]:
        messages.extendleft(reversed(entries))
        return messages
    return deque(heapq.merge(entries, messages, key=lambda entry: entry[0]))


class PriorityMessages:
    """Entries by priority level: highest level first, FIFO within a level.

    :param max_priority: the queue's ``x-max-priority``.
    """

    __slots__ = ("levels", "_count")

    def __init__(self, max_priority: int) -> None:
        self.levels: list[deque[Entry]] = [deque() for _ in range(max_priority + 1)]
        self._count = 0

    def level(self, message: Message) -> deque[Entry]:
        """The FIFO *message* belongs in."""
        if not message.raw_properties[0] & _PRIORITY_FLAG:
            return self.levels[0]
        priority = getattr(message.properties, "priority", None) or 0
        return self.levels[min(priority, len(self.levels) - 1)]

    def _head_level(self) -> deque[Entry]:
        for level in reversed(self.levels):
            if level:
                return level
        raise IndexError("no ready messages")

    def append(self, entry: Entry) -> None:
        """Add *entry* at the end of its priority level."""
        self.level(entry[1]).append(entry)
        self._count += 1

    def extend_redelivered(self, entries: Iterable[Entry]) -> None:
        """Add redelivered *entries* at the ends of their levels, in order."""
        for entry in entries:
            self.append(entry)

    def popleft(self) -> Entry:
        """Take the first entry of the highest non-empty level."""
        entry = self._head_level().popleft()
        self._count -= 1
        return entry

    def __getitem__(self, index: int) -> Entry:
        if index == 0:
            return self._head_level()[0]
        for position, entry in enumerate(self):
            if position == index:
                return entry
        raise IndexError(index)

    def __delitem__(self, index: int) -> None:
        for level in reversed(self.levels):
            if index < len(level):
                del level[index]
                self._count -= 1
                return
            index -= len(level)
        raise IndexError(index)

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __iter__(self) -> Iterator[Entry]:
        for level in reversed(self.levels):
            yield from level

    def clear(self) -> None:
        """Forget every entry."""
        for level in self.levels:
            level.clear()
        self._count = 0

    def put_back(self, entries: Iterable[Entry]) -> None:
        """Return sorted requeued *entries* to their original places in their levels."""
        by_level: dict[int, list[Entry]] = {}
        for entry in entries:
            by_level.setdefault(id(self.level(entry[1])), []).append(entry)
            self._count += 1
        for index, level in enumerate(self.levels):
            returned = by_level.get(id(level))
            if returned:
                self.levels[index] = merge_entries(returned, level)
