"""A queue's ready messages in sequence order, kept compactly.

A queue without priorities holds its ready messages as ``(sequence,
message, redelivered, deadline)`` entries (:data:`Entry`). Most of
them are plain: not redelivered, no deadline, and numbered one after the
other as they arrived. :class:`ReadyMessages` keeps such a run of plain
entries as the bare messages and remembers only the sequence number of
the first: a queued message then costs one slot of a deque instead of a
tuple and an integer (112 bytes less). Any other entry is kept as its
tuple. Callers see entries either way.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Any, Iterable, Iterator, Optional, SupportsIndex

from txamqp09.broker.model.message import Message

__all__ = ["Entry", "ReadyMessages"]

#: A ready message in a queue: (sequence number, message, redelivered,
#: deadline in clock seconds or None when it does not expire).
Entry = tuple[int, Message, bool, Optional[float]]


_append = deque.append
_extend = deque.extend
_popleft = deque.popleft
_getitem = deque.__getitem__
_setitem = deque.__setitem__
_delitem = deque.__delitem__
_iterate = deque.__iter__
_clear = deque.clear


class ReadyMessages(deque[Any]):
    """Entries in sequence order; the plain ones as bare messages.

    The plain entries kept bare have the sequence numbers ``first``,
    ``first + 1``... in the order they are kept, whatever tuples lie
    between them; an entry that would break that run is kept as a tuple.
    It is a deque of bare messages and tuples whose methods take and give
    entries; its length and truth are the deque's own (no Python call on
    the publish path, which asks whether a queue is empty).
    """

    __slots__ = ("_first", "_plain")

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        super().__init__()
        #: The sequence number of the first bare message.
        self._first = 0
        #: How many bare messages there are.
        self._plain = 0
        for entry in entries:
            self.append(entry)

    def append(self, entry: Entry) -> None:
        """Add *entry* at the end (its sequence number follows every other)."""
        sequence, message, redelivered, deadline = entry
        if redelivered or deadline is not None:
            _append(self, entry)
            return
        plain = self._plain
        if not plain:
            self._first = sequence
        elif self._first + plain != sequence:
            _append(self, entry)
            return
        self._plain = plain + 1
        _append(self, message)

    def extend_redelivered(self, entries: list[Entry]) -> None:
        """Add redelivered *entries* at the end, in order (their sequence
        numbers follow every other); such entries are kept as their tuples."""
        _extend(self, entries)

    def popleft(self) -> Entry:
        """Take the first entry.

        :raises IndexError: there is none.
        """
        item = _popleft(self)
        if type(item) is tuple:
            return item
        sequence = self._first
        self._first = sequence + 1
        self._plain -= 1
        return (sequence, item, False, None)  # type: ignore[return-value]

    def __getitem__(self, index: SupportsIndex) -> Entry:  # type: ignore[override]
        """The entry at *index* (0: the first, in constant time).

        :raises IndexError: there is none.
        """
        if index == 0:
            item = _getitem(self, 0)
            if type(item) is tuple:
                return item
            return (self._first, item, False, None)  # type: ignore[return-value]
        for position, entry in enumerate(self):
            if position == index:
                return entry
        raise IndexError(index)

    def __delitem__(self, index: SupportsIndex) -> None:  # type: ignore[override]
        """Remove the entry at *index*.

        The bare messages before it are kept as tuples from then on, so
        that those after it still follow the first one's number.
        """
        index = int(index)
        if type(_getitem(self, index)) is tuple:
            _delitem(self, index)
            return
        sequence = self._first
        for position in range(index):
            item = _getitem(self, position)
            if type(item) is not tuple:
                _setitem(self, position, (sequence, item, False, None))
                sequence += 1
                self._plain -= 1
        _delitem(self, index)
        self._first = sequence + 1
        self._plain -= 1

    def __iter__(self) -> Iterator[Entry]:
        sequence = self._first
        for item in _iterate(self):
            if type(item) is tuple:
                yield item
            else:
                yield (sequence, item, False, None)
                sequence += 1

    def clear(self) -> None:
        """Forget every entry."""
        _clear(self)
        self._plain = 0

    def put_back(self, entries: list[Entry]) -> None:
        """Return sorted requeued *entries* to their places by sequence number."""
        if not self or entries[-1][0] < self[0][0]:
            self.extendleft(reversed(entries))
            return
        merged = list(heapq.merge(entries, self, key=lambda entry: entry[0]))
        self.clear()
        for entry in merged:
            self.append(entry)
