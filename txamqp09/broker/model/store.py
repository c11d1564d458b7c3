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

At start-up :meth:`~txamqp09.broker.model.vhost.Broker.restore` rebuilds what
the store recovered, without writing it again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from txamqp09.broker.model.message import Message, delivery_mode
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
    from txamqp09.broker.model.vhost import VirtualHost

__all__ = ["PERSISTENT", "Persistence"]

#: The delivery-mode of a persistent message.
PERSISTENT = 2


class Persistence:
    """Writes what must survive a restart to *store*.

    :ivar next_message_id: the id the next persistent message gets; set from
        the store's :class:`~txamqp09.store.interface.Recovered` at start-up.
    """

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.next_message_id = 1

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
        kept = [(queue.vhost.name, queue.name) for queue in queues if queue.stored]
        if not kept or delivery_mode(message.raw_properties) != PERSISTENT:
            return 0
        message.store_id = message_id = self.next_message_id
        self.next_message_id = message_id + 1
        return self.store.publish(
            StoredMessage(
                message_id, message.exchange, message.routing_key, message.raw_properties,
                message.body,
            ),
            kept,
        )

    def remove(self, queue: Queue, messages: Iterable[Message]) -> None:
        """*messages* left *queue* for good."""
        ids = [message.store_id for message in messages if message.store_id]
        if ids:
            self.store.remove(queue.vhost.name, queue.name, ids)


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
