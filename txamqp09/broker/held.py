"""Output of a channel that must wait for the message store.

A publisher confirm for a persistent message, tx.commit-ok after a commit
that wrote to the store, and the answer to a method that changed durable
definitions may only be sent once the store operations they follow are on
disk. :class:`HeldOutput` holds such frames, each with the store sequence
number it waits for, and sends them in the order they were made; a frame
that waits for nothing goes out at once unless frames before it are held
(the channel sends deliveries, basic.get answers and returns that way too, so
they never overtake a held answer). It
asks the store about one sequence number at a time (the oldest held), so a
channel costs one Deferred per batch the store writes, not one per message.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Optional

from twisted.python.failure import Failure

from txamqp09.store.interface import MessageStore

__all__ = ["HeldOutput"]


class HeldOutput:
    """Frames of one channel, written once the store operations they follow are durable.

    :param store: the broker's message store (None: nothing is ever held).
    :param write: writes frames to the connection.
    :param closed: tells whether the channel has closed (then nothing more is sent).
    :param failed: called when the store fails: what is held can never be sent.
    """

    def __init__(
        self,
        store: Optional[MessageStore],
        write: Callable[[bytes], None],
        closed: Callable[[], bool],
        failed: Callable[[Failure], None],
    ) -> None:
        self._store = store
        self._write = write
        self._closed = closed
        self._failed = failed
        #: (sequence, frame) waiting, in sending order.
        self.held: deque[tuple[int, bytes]] = deque()
        #: The highest store sequence number known to be durable.
        self._durable = 0
        #: The store's sequence number when the current method arrived.
        self._method_start = 0

    def send_after(self, sequence: int, frame: bytes) -> None:
        """Write *frame* once store operation *sequence* is durable (0: no
        wait), after every frame held before it."""
        if sequence <= self._durable and not self.held:
            self._write(frame)
            return
        self.held.append((sequence, frame))
        if len(self.held) == 1:
            self._wait(sequence)

    def method_started(self) -> None:
        """A method arrives: what it writes to the store, its answer waits for."""
        if self._store is not None:
            self._method_start = self._store.last_sequence

    def answer(self, frame: bytes) -> None:
        """Send the answer to the current method once what it wrote to the
        store (if anything) is durable."""
        store = self._store
        if store is not None and store.last_sequence > self._method_start:
            self.send_after(store.last_sequence, frame)
        else:
            self.send_after(0, frame)

    def clear(self) -> None:
        """The channel closed: forget what is held."""
        self.held.clear()

    def _wait(self, sequence: int) -> None:
        assert self._store is not None
        self._store.when_durable(sequence).addCallbacks(
            self._durable_up_to, self._failed, callbackArgs=(sequence,)
        )

    def _durable_up_to(self, _: None, sequence: int) -> None:
        """Operations up to *sequence* are durable: send what waited for them."""
        if self._closed():
            return
        self._durable = max(self._durable, sequence)
        held = self.held
        frames = []
        while held and held[0][0] <= self._durable:
            frames.append(held.popleft()[1])
        self._write(b"".join(frames))
        if held:
            self._wait(held[0][0])
