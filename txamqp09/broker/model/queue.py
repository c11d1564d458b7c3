"""Queues, their consumers, and the prefetch windows that pace deliveries.

A queue holds ready messages in arrival order as ``(sequence, message,
redelivered)`` entries. A message published while a consumer can take it
goes straight to that consumer; otherwise it waits, and :meth:`Queue.drain`
hands waiting messages out when a consumer gains room. Consumers take turns
(round robin). Requeued messages go back to their original place, which the
per-queue sequence number records.
"""

from __future__ import annotations

import heapq
from collections import deque
from itertools import islice
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Mapping, Optional

from txamqp09.broker.model.arguments import choice_argument, count_argument
from txamqp09.broker.model.message import Message

if TYPE_CHECKING:
    from txamqp09.broker.model.session import Session
    from txamqp09.broker.model.vhost import VirtualHost

__all__ = ["Prefetch", "Consumer", "Delivery", "Queue", "Entry", "Overflow"]

#: A ready message in a queue: (sequence number, message, redelivered).
Entry = tuple[int, Message, bool]
#: Paged-out bodies read back at a time when a queue reaches them.
PAGE_IN_BATCH = 256
#: Ready messages looked at, from the head, for bodies to read back at a time.
PAGE_IN_SCAN = 4 * PAGE_IN_BATCH


class Prefetch:
    """A prefetch window (basic.qos): how much may be delivered but unacked.

    :ivar count: messages allowed in flight, 0 for no limit.
    :ivar size: body bytes allowed in flight, 0 for no limit. As the spec
        says, it never holds back a message when nothing is in flight.
    """

    __slots__ = ("count", "size", "used_count", "used_bytes")

    def __init__(self, count: int = 0, size: int = 0) -> None:
        self.count = count
        self.size = size
        self.used_count = 0
        self.used_bytes = 0

    def room(self, size: int) -> bool:
        """Whether a message of *size* bytes may be sent now."""
        if self.count and self.used_count >= self.count:
            return False
        return not self.size or not self.used_count or self.used_bytes + size <= self.size

    def take(self, size: int) -> None:
        """A message of *size* bytes was sent."""
        self.used_count += 1
        self.used_bytes += size

    def release(self, size: int) -> None:
        """A message of *size* bytes was acknowledged, rejected or recovered."""
        self.used_count -= 1
        self.used_bytes -= size


class Consumer:
    """A subscription of a session to a queue (basic.consume).

    :ivar tag: the consumer tag, unique within its session.
    :ivar limits: the prefetch windows that apply (none when no-ack).
    """

    __slots__ = ("tag", "queue", "session", "no_ack", "no_local", "exclusive", "limits", "_simple")

    def __init__(
        self,
        tag: str,
        queue: Queue,
        session: Session,
        *,
        no_ack: bool = False,
        no_local: bool = False,
        exclusive: bool = False,
        limits: tuple[Prefetch, ...] = (),
    ) -> None:
        self.tag = tag
        self.queue = queue
        self.session = session
        self.no_ack = no_ack
        self.no_local = no_local
        self.exclusive = exclusive
        self.limits = () if no_ack else limits
        self._simple = not self.limits and not no_local

    def can_take(self, message: Message) -> bool:
        """Whether *message* may be delivered to this consumer now."""
        if self._simple:
            return self.session.sending
        if not self.session.sending:
            return False
        if self.no_local and message.publisher is self.session.client:
            return False
        size = message.size
        for limit in self.limits:
            if not limit.room(size):
                return False
        return True

    def start(self) -> None:
        """Deliver what waits in the queue (once the client knows the consumer)."""
        self.queue.drain()

    def deliver(self, queue: Queue, sequence: int, message: Message, redelivered: bool) -> None:
        """Send *message* to the client, remembering it until it is settled."""
        session = self.session
        tag = session.last_tag = session.last_tag + 1
        if not self.no_ack:
            session.unacked[tag] = Delivery(queue, sequence, message, self)
            size = message.size
            for limit in self.limits:
                limit.take(size)
        elif message.store_id:
            queue.discard((message,))
        session.sink.deliver(self, tag, redelivered, message)

    def __repr__(self) -> str:
        return f"<Consumer {self.tag!r} on {self.queue.name!r}>"


class Delivery:
    """A message sent to a client and not yet acknowledged.

    :ivar consumer: the consumer it went to, or None for basic.get.
    """

    __slots__ = ("queue", "sequence", "message", "consumer")

    def __init__(
        self, queue: Queue, sequence: int, message: Message, consumer: Optional[Consumer]
    ) -> None:
        self.queue = queue
        self.sequence = sequence
        self.message = message
        self.consumer = consumer

    def release(self) -> None:
        """Give the consumer's prefetch room back."""
        if self.consumer is not None:
            size = self.message.size
            for limit in self.consumer.limits:
                limit.release(size)


class Overflow:
    """What a queue at its length limit does with a new message (x-overflow)."""

    DROP_HEAD = "drop-head"
    REJECT_PUBLISH = "reject-publish"
    CHOICES = (DROP_HEAD, REJECT_PUBLISH)


class Queue:
    """A queue of a virtual host.

    Understood arguments: ``x-max-length`` and ``x-max-length-bytes`` (ready
    messages), with ``x-overflow`` ``drop-head`` (default: the oldest ready
    messages are dropped) or ``reject-publish`` (the new message is refused,
    and a confirming publisher receives a nack).

    :ivar exclusive_owner: the client that owns an exclusive queue, or None.
    :ivar stored: the queue and its persistent messages are kept in the
        message store (durable, not exclusive, on a broker with a store).
    """

    #: The x-queue-type clients declare.
    kind: ClassVar[str] = "classic"

    def __init__(
        self,
        vhost: VirtualHost,
        name: str,
        *,
        durable: bool = False,
        exclusive_owner: Any = None,
        auto_delete: bool = False,
        arguments: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self.vhost = vhost
        self.name = name
        self.durable = durable
        self.exclusive_owner = exclusive_owner
        self.auto_delete = auto_delete
        self.arguments = dict(arguments or {})
        self._persistence = vhost.persistence if durable and exclusive_owner is None else None
        self.stored = self._persistence is not None
        self.max_length = count_argument(self.arguments, "x-max-length")
        self.max_length_bytes = count_argument(self.arguments, "x-max-length-bytes")
        self.overflow = choice_argument(
            self.arguments, "x-overflow", Overflow.CHOICES, Overflow.DROP_HEAD
        )
        self._limited = self.max_length is not None or self.max_length_bytes is not None
        self.messages: deque[Entry] = deque()
        #: Body bytes of the ready messages.
        self.ready_bytes = 0
        self.consumers: deque[Consumer] = deque()
        #: Bindings leading here, so that deleting the queue removes them.
        self.bindings: dict[Any, None] = {}
        self.deleted = False
        self._next_sequence = 0
        self._no_local_consumers = 0
        #: Itself as a one-element route (the default exchange's result).
        self.route: tuple[Queue] = (self,)

    @property
    def exclusive(self) -> bool:
        """Owned by one connection and deleted with it."""
        return self.exclusive_owner is not None

    @property
    def message_count(self) -> int:
        """Ready messages (not those delivered and unacknowledged)."""
        return len(self.messages)

    @property
    def consumer_count(self) -> int:
        """Active consumers."""
        return len(self.consumers)

    # -- publishing ----------------------------------------------------------

    def publish(self, message: Message) -> bool:
        """Deliver *message* to a consumer or keep it.

        :returns: False when the queue refused it (``reject-publish``); a
            message that ``drop-head`` cannot fit counts as taken, then dropped.
        """
        sequence = self._next_sequence
        self._next_sequence = sequence + 1
        if self.consumers and not self.messages:
            consumer = self._pick(message)
            if consumer is not None:
                consumer.deliver(self, sequence, message, False)
                return True
        if self._limited and not self._make_room(message.size):
            self.discard((message,))
            return self.overflow == Overflow.DROP_HEAD
        self.messages.append((sequence, message, False))
        self.ready_bytes += message.size
        if self._no_local_consumers:
            self.drain()
        return True

    def publish_immediately(self, message: Message) -> bool:
        """Deliver *message* only if a consumer can take it now (``immediate``)."""
        if not self.consumers or self.messages:
            return False
        consumer = self._pick(message)
        if consumer is None:
            return False
        sequence = self._next_sequence
        self._next_sequence = sequence + 1
        consumer.deliver(self, sequence, message, False)
        return True

    def _make_room(self, size: int) -> bool:
        if self._fits(size, len(self.messages) + 1, self.ready_bytes + size):
            return True
        if self.overflow == Overflow.REJECT_PUBLISH:
            return False
        dropped = []
        while self.messages and not self._fits(size, len(self.messages) + 1, self.ready_bytes + size):
            dropped.append(self._take()[1])
        self.discard(dropped)
        return self._fits(size, 1, size)

    def _fits(self, size: int, count: int, total: int) -> bool:
        if self.max_length is not None and count > self.max_length:
            return False
        return self.max_length_bytes is None or total <= self.max_length_bytes

    def _pick(self, message: Message) -> Optional[Consumer]:
        """The next consumer in turn that can take *message*."""
        consumers = self.consumers
        if len(consumers) == 1:
            only = consumers[0]
            return only if only.can_take(message) else None
        for _ in range(len(consumers)):
            consumer = consumers[0]
            consumers.rotate(-1)
            if consumer.can_take(message):
                return consumer
        return None

    # -- handing out ---------------------------------------------------------

    def drain(self) -> None:
        """Deliver waiting messages while consumers have room."""
        messages = self.messages
        while messages and self.consumers:
            sequence, message, redelivered = messages[0]
            consumer = self._pick(message)
            if consumer is None:
                if self._no_local_consumers and self._deliver_later_one():
                    continue
                return
            if message.body is None:
                self._page_in()
            messages.popleft()
            self.ready_bytes -= message.size
            consumer.deliver(self, sequence, message, redelivered)

    def _deliver_later_one(self) -> bool:
        """Deliver the oldest message some consumer can take, past the head.

        Only needed with no-local consumers: the oldest message may be one
        they must not receive while later ones are theirs to take.
        """
        for index, (sequence, message, redelivered) in enumerate(self.messages):
            consumer = self._pick(message)
            if consumer is not None:
                if message.body is None:
                    self.read_back([message])
                del self.messages[index]
                self.ready_bytes -= message.size
                consumer.deliver(self, sequence, message, redelivered)
                return True
        return False

    def _take(self) -> Entry:
        entry = self.messages.popleft()
        self.ready_bytes -= entry[1].size
        return entry

    def get(self) -> Optional[Entry]:
        """Take the oldest ready message (basic.get), or None."""
        if not self.messages:
            return None
        if self.messages[0][1].body is None:
            self._page_in()
        return self._take()

    def requeue(self, deliveries: Iterable[Delivery]) -> None:
        """Put delivered messages back in their original order, as redelivered."""
        if self.deleted:
            self.discard(delivery.message for delivery in deliveries)
            return
        entries = sorted((d.sequence, d.message, True) for d in deliveries)
        if not entries:
            return
        messages = self.messages
        if not messages or entries[-1][0] < messages[0][0]:
            messages.extendleft(reversed(entries))
        else:
            self.messages = deque(heapq.merge(entries, messages, key=lambda entry: entry[0]))
        self.ready_bytes += sum(entry[1].size for entry in entries)
        self.drain()

    def purge(self) -> int:
        """Drop every ready message; how many there were."""
        count = len(self.messages)
        self.discard(message for _, message, _ in self.messages)
        self.messages.clear()
        self.ready_bytes = 0
        return count

    # -- storage -------------------------------------------------------------

    def discard(self, messages: Iterable[Message]) -> None:
        """*messages* left this queue for good: forget them in the message store."""
        if self._persistence is not None:
            self._persistence.remove(self, messages)

    def _page_in(self) -> None:
        """Read back the bodies of the paged-out messages at the head of the queue."""
        paged = [message for _, message, _ in islice(self.messages, PAGE_IN_SCAN) if message.body is None]
        self.read_back(paged[:PAGE_IN_BATCH])

    def read_back(self, messages: list[Message]) -> None:
        """Read the bodies of paged-out *messages* of this queue back from the store."""
        assert self._persistence is not None, "only stored queues hold paged-out messages"
        self._persistence.page_in(messages)

    def restore(self, messages: Iterable[tuple[Message, bool]]) -> None:
        """Append recovered (message, redelivered) pairs as ready messages, in order."""
        sequence = self._next_sequence
        for message, redelivered in messages:
            self.messages.append((sequence, message, redelivered))
            self.ready_bytes += message.size
            sequence += 1
        self._next_sequence = sequence

    # -- consumers -----------------------------------------------------------

    def new_consumer(
        self,
        tag: str,
        session: Session,
        *,
        no_ack: bool,
        no_local: bool,
        exclusive: bool,
        limits: tuple[Prefetch, ...],
        arguments: Mapping[str, Any],
    ) -> Consumer:
        """A consumer of this queue for basic.consume (*arguments* are its own)."""
        return Consumer(
            tag, self, session, no_ack=no_ack, no_local=no_local, exclusive=exclusive, limits=limits
        )

    def add_consumer(self, consumer: Consumer) -> None:
        """Deliver to *consumer* too, from the next :meth:`drain` on."""
        self.consumers.append(consumer)
        self._no_local_consumers += consumer.no_local

    def remove_consumer(self, consumer: Consumer) -> None:
        """Stop delivering to *consumer*; an auto-delete queue may go with it."""
        self.consumers.remove(consumer)
        self._no_local_consumers -= consumer.no_local
        if self.auto_delete and not self.consumers and not self.deleted:
            self.vhost.delete_queue(self)

    @property
    def has_exclusive_consumer(self) -> bool:
        """A consumer holds the queue exclusively."""
        return any(consumer.exclusive for consumer in self.consumers)

    def __repr__(self) -> str:
        return f"<Queue {self.name!r} ready={len(self.messages)} consumers={len(self.consumers)}>"
