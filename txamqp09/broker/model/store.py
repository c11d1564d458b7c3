"""The model's link to durable storage.

Storage has one seam, :class:`~txamqp09.store.interface.IMessageStore`. A
:class:`Persistence` turns the model's changes into its operations:

- durable exchanges, durable queues that are not exclusive, and the bindings
  between such entities (the standard ``amq.*`` exchanges count as durable);
- persistent messages (delivery-mode 2) routed to such queues, written once
  with the list of those queues, and removed from a queue when they leave it
  for good: acknowledged, rejected or nacked without requeue, delivered to a
  no-ack consumer or basic.get, dropped by a length limit, purged.

Store operations return sequence numbers; the model only records them
(:attr:`~txamqp09.broker.model.session.Session.stored_sequence`), and the
server layer waits for them to be durable before it confirms. A broker
without a Persistence (memory only) writes nothing.

Memory budget: message bodies in memory count against
:attr:`Persistence.memory_budget`, for the whole broker. While the broker is
above it (the bodies it tracks, or every ready body in memory as the
publisher throttle samples a few times a second), each message it publishes
becomes a candidate to leave memory, newest first, so the heads of queues
stay in memory:

- a persistent message whose every queue is durable is already in the
  store: its body is dropped once its publish is durable;
- any other message (transient, or on a queue that is not durable) is
  spilled: its body is written to the store's spill area and dropped once
  that write is durable. Spilled bodies are not recovered after a restart.

A persistent message whose write failed (a full disk) keeps its body in
memory until it leaves its queues.

Streams hold their newest chunks in memory for their readers (up to
:data:`~.stream.CACHE_BYTES` of bodies each); those bytes count against the
budget too (:attr:`Persistence.stream_bytes`), and while the broker is above
it streams keep in memory only what is not on disk yet.

A message is tracked from its publish until the last queue holding it lets
it go (:attr:`~.message.Tracking.holders`); then a spilled copy is deleted.
A queue reaching paged-out messages reads the next
:data:`~.queue.PAGE_IN_BATCH` bodies back from the store at once (for every
queue that holds them: a body is in memory once). At start-up only the first
bodies within the budget are read. Transient messages published while the
broker is within its budget are not tracked and cost nothing here.

At start-up :meth:`~txamqp09.broker.model.vhost.Broker.restore` rebuilds what
the store recovered, without writing it again: each message as
:func:`restored_message` makes it, or as a broker standing by in a group
made it ahead of time, while its store followed the database.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional, Protocol

from txamqp09.broker.model.exchange import Exchange
from txamqp09.broker.model.message import (
    PAGED_OUT,
    RESIDENT,
    SPILLED,
    Message,
    Tracking,
    delivery_mode,
    origin,
)
from txamqp09.wire.versions import AMQP0_9_1
from txamqp09.store.interface import (
    DurableBinding,
    DurableExchange,
    DurableQueue,
    IMessageStore,
    StoredMessage,
)

if TYPE_CHECKING:
    from txamqp09.broker.model.clock import Clock
    from txamqp09.broker.model.exchange import Binding

__all__ = ["DEFAULT_MEMORY_BUDGET", "PERSISTENT", "KeptQueue", "Persistence", "StoreHome", "restored_message"]

#: The delivery-mode of a persistent message.
PERSISTENT = 2
#: Bytes of message bodies held in memory, by default.
DEFAULT_MEMORY_BUDGET = 256 * 1024 * 1024
#: The content-property class of recovered messages (basic's, as 0-9-1 has it).
_PROPERTIES = AMQP0_9_1.properties[60]


class StoreHome(Protocol):
    """A virtual host as its persistence sees it (a
    :class:`~.vhost.VirtualHost`)."""

    @property
    def name(self) -> str:
        """Its name."""

    @property
    def clock(self) -> Optional[Clock]:
        """Its time source (publish times are written with a message), if any."""


class KeptQueue(Protocol):
    """A queue as its persistence sees it (a :class:`~.queue.Queue`)."""

    @property
    def vhost(self) -> StoreHome:
        """The virtual host it belongs to."""

    @property
    def name(self) -> str:
        """Its name."""

    @property
    def auto_delete(self) -> bool:
        """Whether it goes with its last consumer."""

    @property
    def arguments(self) -> Mapping[str, Any]:
        """Its declared arguments."""

    @property
    def deleted(self) -> bool:
        """Whether it was deleted."""

    @property
    def kept_as(self) -> tuple[tuple[str, str], ...]:
        """``((vhost name, queue name),)`` when the store keeps its
        persistent messages one by one, else ``()``."""


class Persistence:
    """Writes what must survive a restart to *store*.

    :param memory_budget: bytes of message bodies to hold in memory before
        paging them out (see the module's docstring).
    :ivar next_message_id: the id the next persistent message gets; set from
        the store's :class:`~txamqp09.store.interface.Recovered` at start-up.
    :ivar resident_bytes: bytes of tracked bodies held in memory.
    :ivar paged_bytes: bytes of tracked bodies paged out (on disk only).
    :ivar stream_bytes: bytes of bodies streams hold in memory for their readers.
    """

    def __init__(self, store: IMessageStore, memory_budget: int = DEFAULT_MEMORY_BUDGET) -> None:
        self.store = store
        self.memory_budget = memory_budget
        self.next_message_id = 1
        self.resident_bytes = 0
        self.paged_bytes = 0
        self.stream_bytes = 0
        #: Bytes of ready bodies in memory at the last :meth:`sample`.
        self.sampled_bytes = 0
        #: Whether the bodies in memory exceed the budget (tracked ones, or
        #: every ready one at the last :meth:`sample`).
        self.over_budget = False
        #: Messages published above the budget, to page out once durable:
        #: (store sequence number, message), oldest first.
        self._to_page_out: deque[tuple[int, Message]] = deque()
        #: The :meth:`~.stream.StreamQueue.made_durable` of each stream with
        #: appends not on disk yet.
        self._streams_waiting: dict[Callable[[int], bool], None] = {}
        store.add_durable_listener(self._made_durable)

    # -- topology ------------------------------------------------------------

    def exchange_added(self, vhost: StoreHome, exchange: Exchange) -> None:
        """A durable exchange was declared."""
        self.store.add_exchange(
            DurableExchange(
                vhost.name, exchange.name, exchange.kind, exchange.auto_delete,
                exchange.internal, dict(exchange.arguments),
            )
        )

    def exchange_removed(self, vhost: StoreHome, exchange: Exchange) -> None:
        """A durable exchange was deleted."""
        self.store.remove_exchange(vhost.name, exchange.name)

    def queue_added(self, queue: KeptQueue) -> None:
        """A queue that keeps messages was declared."""
        self.store.add_queue(
            DurableQueue(queue.vhost.name, queue.name, queue.auto_delete, dict(queue.arguments))
        )

    def queue_removed(self, queue: KeptQueue) -> None:
        """A queue that keeps messages was deleted, with its messages."""
        self.store.remove_queue(queue.vhost.name, queue.name)

    def binding_added(self, vhost: StoreHome, binding: Binding) -> None:
        """A binding between durable entities was made."""
        self.store.add_binding(_binding_record(vhost, binding))

    def binding_removed(self, vhost: StoreHome, binding: Binding) -> None:
        """A binding between durable entities was removed."""
        self.store.remove_binding(_binding_record(vhost, binding))

    # -- messages ------------------------------------------------------------

    def publish(self, message: Message, queues: Sequence[KeptQueue]) -> int:
        """Write *message* for the *queues* that keep messages, if it is
        persistent, and track it under the memory budget.

        Gives a written message its :attr:`~.message.Tracking.store_id`.

        :returns: the store's sequence number, or 0 when nothing was written.
        :raises AMQPSyntaxError: the message's property bytes are malformed.
        """
        if not queues:
            return 0
        # One queue (a direct route) is the common case: its key as it is.
        kept = queues[0].kept_as if len(queues) == 1 else [key for queue in queues for key in queue.kept_as]
        sequence = message_id = 0
        if kept and delivery_mode(message.raw_properties) == PERSISTENT:
            message_id = self.next_message_id
            self.next_message_id = message_id + 1
            clock = queues[0].vhost.clock
            origin = message.origin
            sequence = self.store.publish(
                StoredMessage(
                    message_id, origin[0], origin[1], message.raw_properties, message.body, message.size,
                    False, clock.seconds() if clock is not None else 0.0,
                ),
                kept,
            )
        elif not self.over_budget:
            return 0
        self._track(message, message_id, len(queues), not sequence or len(kept) < len(queues), sequence)
        return sequence

    def remove(self, queue: KeptQueue, messages: Iterable[Message]) -> None:
        """*messages* left *queue* for good (written only while the queue exists)."""
        ids = []
        unspilled = []
        stored = bool(queue.kept_as)
        for message in messages:
            tracking = message.tracking
            if tracking is None:
                continue
            if stored and tracking.store_id:
                ids.append(tracking.store_id)
            tracking.holders -= 1
            if not tracking.holders:
                if tracking.paging == SPILLED:
                    unspilled.append(tracking.store_id)
                self._untrack(message)
        if ids and not queue.deleted:
            vhost, name = queue.kept_as[0]
            self.store.remove(vhost, name, ids)
        if unspilled:
            self.store.unspill(unspilled)

    # -- stream logs ---------------------------------------------------------

    def await_durable(self, made_durable: Callable[[int], bool]) -> None:
        """A stream appended to its log: call *made_durable* with the
        store's sequence number each time more is on disk, until it says
        that nothing of the stream waits any more."""
        self._streams_waiting[made_durable] = None

    def stream_cache_changed(self, delta: int) -> None:
        """A stream holds *delta* more bytes of bodies in memory (fewer when negative)."""
        self.stream_bytes += delta
        self._weigh()

    def _made_durable(self, sequence: int) -> None:
        """The store's operations up to *sequence* are on disk."""
        for made_durable in list(self._streams_waiting):
            if not made_durable(sequence):
                del self._streams_waiting[made_durable]

    # -- memory budget -------------------------------------------------------

    def _weigh(self) -> None:
        """Compare the bodies in memory with the budget (after they changed)."""
        budget = self.memory_budget
        self.over_budget = (
            self.resident_bytes + self.stream_bytes > budget or self.sampled_bytes > budget
        )

    def sample(self, in_memory: int) -> None:
        """The bytes of ready message bodies in memory, sampled now."""
        self.sampled_bytes = in_memory
        self._weigh()
        self._page_out()

    def _track(self, message: Message, store_id: int, holders: int, spill: bool, sequence: int) -> None:
        """Count a message held by *holders* queues (written as *store_id*,
        or 0) against the budget; above it, page it out (*spill*: by writing
        a copy of its body)."""
        tracking = message.tracking = Tracking(store_id, RESIDENT, holders)
        self.resident_bytes += message.size
        self._weigh()
        if self.over_budget:
            if spill:
                if not tracking.store_id:
                    tracking.store_id = self.next_message_id
                    self.next_message_id += 1
                assert message.body is not None
                sequence = self.store.spill(tracking.store_id, message.body)
                tracking.paging = SPILLED
            self._to_page_out.append((sequence, message))
            self._page_out()

    def _page_out(self) -> None:
        """Drop the bodies of messages published above the budget that are on disk now."""
        waiting = self._to_page_out
        store = self.store
        durable = store.durable_sequence
        while waiting and waiting[0][0] <= durable and self.over_budget:
            sequence, message = waiting.popleft()
            tracking = message.tracking
            if tracking is not None and message.body is not None and not store.failed_between(sequence - 1, sequence):
                message.body = None
                if tracking.paging == RESIDENT:
                    tracking.paging = PAGED_OUT
                self.resident_bytes -= message.size
                self.paged_bytes += message.size
                self._weigh()
        if not self.over_budget:
            waiting.clear()

    def _untrack(self, message: Message) -> None:
        if message.body is not None:
            self.resident_bytes -= message.size
        else:
            self.paged_bytes -= message.size
        message.tracking = None
        self._weigh()

    def page_in(self, messages: Sequence[Message]) -> None:
        """Read the bodies of paged-out *messages* back from the store."""
        if not messages:
            return
        trackings: list[Tracking] = []
        for message in messages:
            assert message.tracking is not None, "only a tracked message is paged out"
            trackings.append(message.tracking)
        bodies = self.store.read([tracking.store_id for tracking in trackings])
        unspilled = []
        for message, tracking in zip(messages, trackings):
            message.body = bodies[tracking.store_id]
            if tracking.paging == SPILLED:
                unspilled.append(tracking.store_id)
            tracking.paging = RESIDENT
            self.paged_bytes -= message.size
            self.resident_bytes += message.size
        self._weigh()
        if unspilled:
            self.store.unspill(unspilled)

    def restored(self, messages: Sequence[Message]) -> None:
        """Count the bodies of *messages*, recovered at start-up (see
        :func:`restored_message`), against the budget: read, or left on disk."""
        resident = sum(message.size for message in messages if message.body is not None)
        self.resident_bytes += resident
        self.paged_bytes += sum(message.size for message in messages) - resident
        self._weigh()


def restored_message(record: StoredMessage) -> Message:
    """The model message of a message recovered on one queue, tracked as
    written to the store (its body read, or left on disk); its bytes count
    once :meth:`Persistence.restored` sees it."""
    body = record.body
    message = Message(
        origin(record.exchange, record.routing_key), record.raw_properties, b"" if body is None else body,
        _PROPERTIES,
    )
    if body is None:
        message.body, message.size = None, record.size
    message.tracking = Tracking(record.message_id, PAGED_OUT if body is None else RESIDENT, 1)
    return message


def _binding_record(vhost: StoreHome, binding: Binding) -> DurableBinding:
    destination = binding.destination
    return DurableBinding(
        vhost.name,
        binding.source.name,
        destination.name,
        "exchange" if isinstance(destination, Exchange) else "queue",
        binding.routing_key,
        dict(binding.arguments),
    )
