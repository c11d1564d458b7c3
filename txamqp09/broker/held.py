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

When the store could not write a publish (a full disk), a publisher ack
whose range of store operations holds it is sent as the matching nack
instead, and an answer whose method wrote it is not sent: the channel is
told (see :class:`~txamqp09.store.interface.WriteFailed`). The range of a
publisher ack is every operation since the previous ack of the channel, so
a failed write can nack messages of the same moment that were written: a
nack only tells the publisher to publish again.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Optional

from twisted.python.failure import Failure

from txamqp09.store.interface import IMessageStore, WriteFailed

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
        store: Optional[IMessageStore],
        write: Callable[[bytes], None],
        closed: Callable[[], bool],
        failed: Callable[[Failure], None],
    ) -> None:
        self._store = store
        self._write = write
        self._closed = closed
        self._failed = failed
        #: (sequence, frame, since, instead) waiting, in sending order: a
        #: frame waits for the store's operations up to *sequence*; if a
        #: publish after *since* among them failed, *instead* is sent (None:
        #: the channel is told instead).
        self.held: deque[tuple[int, bytes, int, Optional[bytes]]] = deque()
        #: The highest store sequence number known to be settled.
        self._durable = 0
        #: The store's sequence number when the current method arrived.
        self._method_start = 0
        #: The store's sequence number when the last publisher ack was made.
        self._confirmed = store.last_sequence if store is not None else 0

    def send_after(self, sequence: int, frame: bytes) -> None:
        """Write *frame* once store operation *sequence* is durable (0: no
        wait), after every frame held before it."""
        self._hold(sequence, frame, sequence, None)

    def confirm(self, sequence: int, ack: bytes, nack: bytes) -> None:
        """Write the publisher *ack* once the store operations up to
        *sequence* are durable, or *nack* if a publish since the previous
        ack failed to be written."""
        since = self._confirmed
        if self._store is not None:
            self._confirmed = self._store.last_sequence
        self._hold(sequence, ack, since, nack)

    def _hold(self, sequence: int, frame: bytes, since: int, instead: Optional[bytes]) -> None:
        """Write *frame* (or what replaces it) now if nothing waits, or hold it."""
        if sequence <= self._durable and not self.held:
            settled = self._settled(sequence, frame, since, instead)
            if settled is not None:
                self._write(settled)
            return
        self.held.append((sequence, frame, since, instead))
        if len(self.held) == 1:
            self._wait(sequence)

    def _settled(self, sequence: int, frame: bytes, since: int, instead: Optional[bytes]) -> Optional[bytes]:
        """What to send for a frame whose operations are settled: the frame,
        or *instead* when a publish in (*since*, *sequence*] failed (None:
        the channel was told)."""
        if since >= sequence or self._store is None or not self._store.failed_between(since, sequence):
            return frame
        if instead is None:
            self._failed(
                Failure(WriteFailed("the message store could not write what this method changed"))
            )
        return instead

    def method_started(self) -> None:
        """A method arrives: what it writes to the store, its answer waits for."""
        if self._store is not None:
            self._method_start = self._store.last_sequence

    def answer(self, frame: bytes) -> None:
        """Send the answer to the current method once what it wrote to the
        store (if anything) is durable."""
        store = self._store
        if store is not None and store.last_sequence > self._method_start:
            self._hold(store.last_sequence, frame, self._method_start, None)
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
            settled = self._settled(*held.popleft())
            if settled is None:
                held.clear()
                break
            frames.append(settled)
        self._write(b"".join(frames))
        if held:
            self._wait(held[0][0])
