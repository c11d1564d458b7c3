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
that covers it is replaced by what its channel makes of exactly the writes
that failed (a nack for each of their messages, an ack for the others):
each ack names the store sequence numbers of its own channel's writes, so
another channel's failed write never turns it into a nack. An answer whose
method wrote a publish that failed is not sent: the channel is told (see
:class:`~txamqp09.store.interface.WriteFailed`).
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Optional, Sequence

from twisted.python.failure import Failure

from txamqp09.store.interface import IMessageStore, WriteFailed

__all__ = ["HeldOutput", "Settle"]

#: What a held frame becomes once the store operations it waits for are
#: settled: given the store, the bytes to send (the frame, or what replaces
#: it), or None when the channel has been told of a failed write instead.
Settle = Callable[[IMessageStore], Optional[bytes]]


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
        #: (sequence, frame, settle) waiting, in sending order: a frame waits
        #: for the store's operations up to *sequence*; *settle* (None: none)
        #: then says what to send (see :data:`Settle`).
        self.held: deque[tuple[int, bytes, Optional[Settle]]] = deque()
        #: The highest store sequence number known to be settled.
        self._durable = 0
        #: The store's sequence number when the current method arrived.
        self._method_start = 0

    def send_after(self, sequence: int, frame: bytes) -> None:
        """Write *frame* once store operation *sequence* is durable (0: no
        wait), after every frame held before it."""
        self._hold(sequence, frame, None)

    def confirm(
        self, sequence: int, ack: bytes, written: Sequence[tuple[int, int]], failed: Callable[[list[int]], bytes]
    ) -> None:
        """Write the publisher *ack* once the store operations up to
        *sequence* are durable; if some of the publishes it covers could not
        be written, ``failed(tags)`` instead.

        :param written: (delivery tag, store sequence number) of each
            message the ack covers that was written to the store.
        :param failed: the frames confirming what the ack covers when the
            writes of the messages of *tags* failed.
        """

        def settle(store: IMessageStore) -> bytes:
            lost = [tag for tag, stored in written if store.failed_between(stored - 1, stored)]
            return failed(lost) if lost else ack

        self._hold(sequence, ack, settle if written else None)

    def _hold(self, sequence: int, frame: bytes, settle: Optional[Settle]) -> None:
        """Write *frame* (or what replaces it) now if nothing waits, or hold it."""
        if sequence <= self._durable and not self.held:
            settled = self._settled(frame, settle)
            if settled is not None:
                self._write(settled)
            return
        self.held.append((sequence, frame, settle))
        if len(self.held) == 1:
            self._wait(sequence)

    def _settled(self, frame: bytes, settle: Optional[Settle]) -> Optional[bytes]:
        """What to send for a frame whose operations are settled."""
        if settle is None or self._store is None:
            return frame
        return settle(self._store)

    def method_started(self) -> None:
        """A method arrives: what it writes to the store, its answer waits for."""
        if self._store is not None:
            self._method_start = self._store.last_sequence

    def answer(self, frame: bytes) -> None:
        """Send the answer to the current method once what it wrote to the
        store (if anything) is durable; if a publish it wrote failed, the
        channel is told instead."""
        store = self._store
        if store is None or store.last_sequence <= self._method_start:
            self.send_after(0, frame)
            return
        start, end = self._method_start, store.last_sequence

        def settle(settled: IMessageStore) -> Optional[bytes]:
            if not settled.failed_between(start, end):
                return frame
            self._failed(Failure(WriteFailed("the message store could not write what this method changed")))
            return None

        self._hold(end, frame, settle)

    def clear(self) -> None:
        """The channel closed: forget what is held."""
        self.held.clear()

    def _wait(self, sequence: int) -> None:
        assert self._store is not None
        self._store.when_durable(sequence).addCallbacks(
            self._durable_up_to, self._failed, callbackArgs=(sequence,)
        )

    def _durable_up_to(self, result: None, sequence: int) -> None:
        """Operations up to *sequence* are durable: send what waited for them."""
        if self._closed():
            return
        self._durable = max(self._durable, sequence)
        held = self.held
        frames = []
        while held and held[0][0] <= self._durable:
            _, frame, settle = held.popleft()
            settled = self._settled(frame, settle)
            if settled is None:
                held.clear()
                break
            frames.append(settled)
        self._write(b"".join(frames))
        if held:
            self._wait(held[0][0])
