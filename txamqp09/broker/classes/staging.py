"""Staged content: file-class staging and message-class checkpoints.

A :class:`StagingArea` belongs to a virtual host and outlives connections,
so that a sender whose connection broke can resume: file.open-ok answers
with the size already staged under the identifier, message.resume with the
size checkpointed. Content is kept as the chunks that arrived (bytes objects
shared, never copied, by a checkpoint and the reference it was taken of) and
joined once, when the message is published.

The area holds at most *limit* bytes in memory. When new content would
pass the limit, the entries touched longest ago are dropped first; content
that cannot fit even then is refused with 406 precondition-failed. With a
*ttl*, an entry nobody touched for that many seconds is abandoned: it is
dropped at the next use of the area.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Hashable, Optional

from txamqp09.wire.errors import PreconditionFailed

__all__ = ["DEFAULT_STAGING_LIMIT", "DEFAULT_STAGING_TTL", "Staged", "StagingArea"]

#: Bytes of staged content a virtual host holds, by default.
DEFAULT_STAGING_LIMIT = 256 * 1024 * 1024
#: Seconds an untouched staging entry is kept, by default (one hour).
DEFAULT_STAGING_TTL = 3600.0


class Staged:
    """Content staged under one identifier.

    :ivar chunks: the content, in the pieces it arrived in.
    :ivar size: the bytes staged so far.
    :ivar expected: the announced total size (file.open's content-size;
        -1 when not announced, as for message references).
    :ivar raw_properties: the content properties of the latest stage.
    :ivar touched: when the entry was last opened or added to (the area's clock).
    """

    __slots__ = ("chunks", "size", "expected", "raw_properties", "touched")

    def __init__(self, expected: int = -1, chunks: Optional[list[bytes]] = None) -> None:
        self.chunks: list[bytes] = list(chunks or ())
        self.size = sum(len(chunk) for chunk in self.chunks)
        self.expected = expected
        self.raw_properties = b""
        self.touched = 0.0

    @property
    def complete(self) -> bool:
        """Everything announced has arrived."""
        return self.size == self.expected

    def content(self) -> bytes:
        """The staged bytes, joined (no copy for content staged in one piece)."""
        return b"".join(self.chunks)

    def __repr__(self) -> str:
        return f"<Staged {self.size} of {self.expected} bytes>"


class StagingArea:
    """Staged content of one virtual host, by key, within a memory limit.

    The entries are kept in the order they were touched, oldest first.

    :param limit: the bytes the area may hold.
    :param ttl: seconds after which an untouched entry is dropped (0: never).
    :param now: the current time in seconds (the virtual host's clock).
    """

    def __init__(
        self,
        limit: int = DEFAULT_STAGING_LIMIT,
        ttl: float = DEFAULT_STAGING_TTL,
        now: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self.limit = limit
        self.ttl = ttl
        self.now = now
        #: Bytes held by all entries.
        self.size = 0
        self._entries: OrderedDict[Hashable, Staged] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> Optional[Staged]:
        """The content staged under *key*, or None (also once it expired)."""
        self._expire()
        return self._entries.get(key)

    def open(self, key: Hashable, expected: int) -> Staged:
        """The entry for *key*, kept if it announced the same size, else new and empty."""
        staged = self.get(key)
        if staged is not None and staged.expected == expected:
            self._touch(key, staged)
            return staged
        self.remove(key)
        staged = self._entries[key] = Staged(expected)
        staged.touched = self.now()
        return staged

    def put(self, key: Hashable, staged: Staged) -> None:
        """Keep *staged* under *key*, replacing what was there.

        :raises PreconditionFailed: it does not fit in the area.
        """
        self._expire()
        self.remove(key)
        self._make_room(staged.size, None)
        self._entries[key] = staged
        staged.touched = self.now()
        self.size += staged.size

    def append(self, key: Hashable, staged: Staged, chunk: bytes) -> None:
        """Add *chunk* to *staged* (the entry of *key*, or an entry of no key).

        :raises PreconditionFailed: the chunk does not fit in the area.
        """
        self._expire()
        self._make_room(len(chunk), staged)
        staged.chunks.append(chunk)
        staged.size += len(chunk)
        if self._entries.get(key) is staged:
            self.size += len(chunk)
            self._touch(key, staged)

    def _touch(self, key: Hashable, staged: Staged) -> None:
        staged.touched = self.now()
        self._entries.move_to_end(key)

    def _expire(self) -> None:
        """Drop the entries untouched for :attr:`ttl` seconds (the oldest come first)."""
        if self.ttl <= 0:
            return
        oldest = self.now() - self.ttl
        while self._entries:
            key, staged = next(iter(self._entries.items()))
            if staged.touched > oldest:
                return
            self.remove(key)

    def remove(self, key: Hashable) -> Optional[Staged]:
        """Forget the entry of *key*; the entry, or None."""
        staged = self._entries.pop(key, None)
        if staged is not None:
            self.size -= staged.size
        return staged

    def _make_room(self, size: int, keep: Optional[Staged]) -> None:
        """Drop the oldest entries (not *keep*) until *size* more bytes fit."""
        for key in list(self._entries):
            if self.size + size <= self.limit:
                return
            if self._entries[key] is not keep:
                self.remove(key)
        if self.size + size > self.limit:
            raise PreconditionFailed(
                f"staging {size} more bytes would pass the staging limit of {self.limit} bytes"
            )
