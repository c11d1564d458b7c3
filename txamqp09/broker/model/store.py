"""The model's link to durable storage.

Storage has one seam, :class:`~txamqp09.store.interface.MessageStore`. A
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

Memory budget: the bodies of persistent messages routed to one durable queue
count against :attr:`Persistence.memory_budget`. A message published while
the broker is above it has its body dropped from memory once its publish is
durable (newest first, so the heads of queues stay in memory); a queue
reaching paged-out messages reads the next :data:`~.queue.PAGE_IN_BATCH`
bodies back from the store at once. At start-up only the first bodies within
the budget are read. Transient messages and messages on several queues stay
in memory; publishers are held back by the throttle's watermark instead.

At start-up :meth:`~txamqp09.broker.model.vhost.Broker.restore` rebuilds what
the store recovered, without writing it again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from txamqp09.broker.model.message import PAGED_OUT, RESIDENT, UNTRACKED, Message, delivery_mode
from txamqp09.broker.model.queue import Queue
from txamqp09.store.interface import (
    DurableBinding,
    DurableExchange,
    DurableQueue,
    MessageStore,
    StoredMessage,
)

if TYPE_CHECKING:
    from txamqp09.broker.model.exchange import Binding, Exchange
    from txamqp09.broker.model.stream import StreamQueue
    from txamqp09.broker.model.vhost import VirtualHost

__all__ = ["DEFAULT_MEMORY_BUDGET", "PERSISTENT", "Persistence"]

#: The delivery-mode of a persistent message.
PERSISTENT = 2
#: Bytes of persistent message bodies held in memory, by default.
DEFAULT_MEMORY_BUDGET = 256 * 1024 * 1024


class Persistence:
    """Writes what must survive a restart to *store*.

    :param memory_budget: bytes of persistent message bodies to hold in
        memory before paging them out (see the module's docstring).
    :ivar next_message_id: the id the next persistent message gets; set from
        the store's :class:`~txamqp09.store.interface.Recovered` at start-up.
    :ivar resident_bytes: body bytes held in memory under the budget.
    :ivar paged_bytes: body bytes paged out (on disk only).
    """

    def __init__(self, store: MessageStore, memory_budget: int = DEFAULT_MEMORY_BUDGET) -> None:
        self.store = store
        self.memory_budget = memory_budget
        self.next_message_id = 1
        self.resident_bytes = 0
        self.paged_bytes = 0
        #: Messages published above the budget, to page out once durable:
        #: (store sequence number, message), oldest first.
        self._to_page_out: deque[tuple[int, Message]] = deque()
        #: Streams with appends not on disk yet.
        self._streams_waiting: dict[StreamQueue, None] = {}
        store.add_durable_listener(self._made_durable)

    # -- topology ------------------------------------------------------------

    def exchange_added(self, vhost: VirtualHost, exchange: Exchange) -> None:
        """A durable exchange was declared."""
        self.store.add_exchange(
            DurableExchange(
                vhost.name, exchange.name, exchange.kind, exchange.auto_delete,
                exchange.internal, dict(exchange.arguments),
            )
        )

    def exchange_removed(self, vhost: VirtualHost, exchange: Exchange) -> None:
        """A durable exchange was deleted."""
        self.store.remove_exchange(vhost.name, exchange.name)

    def queue_added(self, queue: Queue) -> None:
        """A queue that keeps messages was declared."""
        self.store.add_queue(
            DurableQueue(queue.vhost.name, queue.name, queue.auto_delete, dict(queue.arguments))
        )

    def queue_removed(self, queue: Queue) -> None:
        """A queue that keeps messages was deleted, with its messages."""
        self.store.remove_queue(queue.vhost.name, queue.name)

    def binding_added(self, vhost: VirtualHost, binding: Binding) -> None:
        """A binding between durable entities was made."""
        self.store.add_binding(_binding_record(vhost, binding))

    def binding_removed(self, vhost: VirtualHost, binding: Binding) -> None:
        """A binding between durable entities was removed."""
        self.store.remove_binding(_binding_record(vhost, binding))

    # -- messages ------------------------------------------------------------

    def publish(self, message: Message, queues: Sequence[Queue]) -> int:
        """Write *message* for the *queues* that keep messages, if it is persistent.

        Gives the message its :attr:`~Message.store_id`.

        :returns: the store's sequence number, or 0 when nothing was written.
        :raises AMQPSyntaxError: the message's property bytes are malformed.
        """
        kept = [(queue.vhost.name, queue.name) for queue in queues if queue.stored and queue.kind == "classic"]
        if not kept or delivery_mode(message.raw_properties) != PERSISTENT:
            return 0
        message.store_id = message_id = self.next_message_id
        self.next_message_id = message_id + 1
        sequence = self.store.publish(
            StoredMessage(
                message_id, message.exchange, message.routing_key, message.raw_properties,
                message.body, message.size,
            ),
            kept,
        )
        if len(queues) == 1:
            self._track(message, sequence)
        return sequence

    def remove(self, queue: Queue, messages: Iterable[Message]) -> None:
        """*messages* left *queue* for good (written only while the queue exists)."""
        ids = []
        for message in messages:
            if message.store_id:
                ids.append(message.store_id)
                if message.paging:
                    self._untrack(message)
        if ids and not queue.deleted:
            self.store.remove(queue.vhost.name, queue.name, ids)

    # -- stream logs ---------------------------------------------------------

    def await_durable(self, stream: StreamQueue) -> None:
        """*stream* appended to its log: tell it when its appends are on disk."""
        self._streams_waiting[stream] = None

    def _made_durable(self, sequence: int) -> None:
        """The store's operations up to *sequence* are on disk."""
        for stream in list(self._streams_waiting):
            if not stream.made_durable(sequence):
                del self._streams_waiting[stream]

    # -- memory budget -------------------------------------------------------

    def _track(self, message: Message, sequence: int) -> None:
        """Count a new persistent message against the budget; page out above it."""
        message.paging = RESIDENT
        self.resident_bytes += message.size
        if self.resident_bytes > self.memory_budget:
            self._to_page_out.append((sequence, message))
            self._page_out()

    def _page_out(self) -> None:
        """Drop the bodies of messages published above the budget that are on disk now."""
        waiting = self._to_page_out
        durable = self.store.durable_sequence
        while waiting and waiting[0][0] <= durable and self.resident_bytes > self.memory_budget:
            message = waiting.popleft()[1]
            if message.paging == RESIDENT:
                message.body = None
                message.paging = PAGED_OUT
                self.resident_bytes -= message.size
                self.paged_bytes += message.size
        if self.resident_bytes <= self.memory_budget:
            waiting.clear()

    def _untrack(self, message: Message) -> None:
        if message.paging == RESIDENT:
            self.resident_bytes -= message.size
        else:
            self.paged_bytes -= message.size
        message.paging = UNTRACKED

    def page_in(self, messages: Sequence[Message]) -> None:
        """Read the bodies of paged-out *messages* back from the store."""
        if not messages:
            return
        bodies = self.store.read([message.store_id for message in messages])
        for message in messages:
            message.body = bodies[message.store_id]
            message.paging = RESIDENT
            self.paged_bytes -= message.size
            self.resident_bytes += message.size

    def restored(self, message: Message) -> None:
        """Count a message recovered at start-up (its body read or left on disk)."""
        if message.body is None:
            message.paging = PAGED_OUT
            self.paged_bytes += message.size
        else:
            message.paging = RESIDENT
            self.resident_bytes += message.size


def _binding_record(vhost: VirtualHost, binding: Binding) -> DurableBinding:
    destination = binding.destination
    return DurableBinding(
        vhost.name,
        binding.source.name,
        destination.name,
        "queue" if isinstance(destination, Queue) else "exchange",
        binding.routing_key,
        dict(binding.arguments),
    )
