"""Queues, their consumers, and the prefetch windows that pace deliveries.

A queue holds ready messages in arrival order as ``(sequence, message,
redelivered, deadline)`` entries (kept compactly, see :mod:`.ready`). A message published while a consumer can
take it goes straight to that consumer; otherwise it waits, and
:meth:`Queue.drain` hands waiting messages out when a consumer gains room.
Consumers take turns (round robin), higher ``x-priority`` ones first.
Requeued messages go back to their original place, which the per-queue
sequence number records.

The queue arguments (see :class:`~.arguments.QueueArguments`) are read once
at declaration; a queue that uses none of them, publishing a message
without an ``expiration``, takes the same short path as before they
existed. With arguments:

- TTL (``x-message-ttl``, the ``expiration`` property): the entry's
  deadline is set when the message enters the queue. Expired messages are
  removed at the head only, by one timer per queue set for the head's
  deadline and whenever the head is looked at, so that no expired message
  is delivered and no tick scans the queue. A message with a short TTL
  behind one with a longer TTL leaves when it reaches the head, as in
  RabbitMQ.
- ``x-expires``: the queue is deleted once it has had no consumer, no
  basic.get and no redeclaration for that long.
- length limits with ``x-overflow``; priorities (``x-max-priority``, see
  :mod:`.priority`); single active consumer; dead-lettering (see
  :mod:`.deadletter`) of rejected, expired and overflowing messages.
"""

from __future__ import annotations

from datetime import datetime, timezone
from itertools import count, islice
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Protocol, Sequence, Union

from txamqp09.broker.model.arguments import (
    QUORUM,
    STREAM,
    Overflow,
    QueueArguments,
    check_quorum_properties,
    count_argument,
    refused_arguments,
)
from txamqp09.broker.model.deadletter import DELIVERY_LIMIT, EXPIRED, MAXLEN, dead_letter_copy, is_cycle
from txamqp09.broker.model.message import EXPIRATION_FLAG, Message, message_ttl
from txamqp09.broker.model.policy import queue_arguments
from txamqp09.broker.model.priority import PriorityMessages
from txamqp09.broker.model.ready import Entry, ReadyMessages
from txamqp09.broker.model.stats import QueueCounters
from txamqp09.broker.model.utilisation import ConsumerUse
from txamqp09.wire.fields import Int64

if TYPE_CHECKING:
    from txamqp09.broker.model.clock import Call, Clock
    from txamqp09.broker.model.exchange import Exchange
    from txamqp09.broker.model.store import Persistence

__all__ = [
    "Prefetch", "Consumer", "ConsumerSession", "CountedDelivery", "Delivery", "Queue", "QueueHost", "QueueOwner", "Overflow",
    "DELIVERY_COUNT", "with_delivery_count",
]

#: The header a quorum queue's redeliveries carry: how often the message came back.
DELIVERY_COUNT = "x-delivery-count"
#: Return counts of ready messages a queue keeps beyond twice their number
#: before it forgets those of messages no longer ready.
_RETURNS_SLACK = 64
#: Paged-out bodies read back at a time when a queue reaches them.
PAGE_IN_BATCH = 256
#: Ready messages looked at, from the head, for bodies to read back at a time.
PAGE_IN_SCAN = 4 * PAGE_IN_BATCH
#: The range of consumer priorities (x-priority): what a signed 64-bit
#: table integer holds.
_CONSUMER_PRIORITY_RANGE = (-(2**63), 2**63 - 1)


class QueueHost(Protocol):
    """A virtual host as its queues see it (a :class:`~.vhost.VirtualHost`,
    which stands above this module and makes the queues)."""

    @property
    def name(self) -> str:
        """Its name."""

    @property
    def clock(self) -> Optional[Clock]:
        """Its time source (TTLs, x-expires and streams need one)."""

    @property
    def persistence(self) -> Optional[Persistence]:
        """What keeps durable queues and persistent messages, or None."""

    @property
    def exchanges(self) -> Mapping[str, Exchange]:
        """Its exchanges by name (a dead-letter exchange is looked up there)."""

    def route(self, exchange: Exchange, message: Message) -> Sequence[Queue]:
        """The queues *message* published to *exchange* reaches."""

    def delete_queue(self, queue: Queue) -> int:
        """Remove *queue* (it expired, or lost its last consumer)."""


class ConsumerSession(Protocol):
    """A channel's session as its consumers and their queues see it (a
    :class:`~.session.Session`, which stands above this module and makes
    the consumers)."""

    @property
    def sending(self) -> bool:
        """Deliveries may be sent now."""

    @property
    def flowing(self) -> bool:
        """The channel is open with its flow on (see :meth:`Consumer.can_take`)."""

    @property
    def client(self) -> object:
        """Its connection (a no-local consumer skips what that published)."""

    def deliver(
        self, consumer: Consumer, queue: Queue, sequence: int, message: Message, redelivered: bool,
        deadline: Optional[float] = None,
    ) -> None:
        """Send *message* from *queue* to *consumer* under the next delivery tag."""

    def queue_deleted(self, consumer: Consumer) -> None:
        """*consumer*'s queue was deleted."""


class QueueOwner(Protocol):
    """A connection as a virtual host sees it when it declares, uses and
    deletes that connection's exclusive queues (a :class:`~.session.Client`)."""

    @property
    def exclusive_queues(self) -> dict[Queue, None]:
        """Its exclusive queues (deleted with it)."""


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


class Delivery:
    """A message sent to a client and not yet acknowledged.

    :ivar consumer: the consumer it went to, or None for basic.get.
    :ivar deadline: when it expires if requeued (clock seconds), or None.
    """

    __slots__ = ("queue", "sequence", "message", "consumer", "deadline")

    def __init__(
        self, queue: Queue, sequence: int, message: Message, consumer: Optional[Consumer],
        deadline: Optional[float] = None,
    ) -> None:
        self.queue = queue
        self.sequence = sequence
        self.message = message
        self.consumer = consumer
        self.deadline = deadline

    def release(self) -> None:
        """Give the consumer's prefetch room back."""
        if self.consumer is not None:
            size = self.message.size
            for limit in self.consumer.limits:
                limit.release(size)

    def resent(self) -> Message:
        """The message as it is sent again to the same consumer (basic.recover without requeue)."""
        return self.message


class CountedDelivery(Delivery):
    """A delivery from a quorum queue, which counts returns for
    ``x-delivery-count`` and ``x-delivery-limit``.

    :ivar returns: how often its message came back to the queue before.
    """

    __slots__ = ("returns",)

    def __init__(
        self, queue: Queue, sequence: int, message: Message, consumer: Optional[Consumer],
        deadline: Optional[float] = None,
    ) -> None:
        super().__init__(queue, sequence, message, consumer, deadline)
        self.returns = queue.take_returns(sequence)

    def resent(self) -> Message:
        """The message with its ``x-delivery-count``, when it came back before."""
        return with_delivery_count(self.message, self.returns) if self.returns else self.message


def with_delivery_count(message: Message, returns: int) -> Message:
    """*message* as a quorum queue sends it after *returns* returns: with
    RabbitMQ's ``x-delivery-count`` header, a ``long``."""
    return message.with_header(DELIVERY_COUNT, Int64(returns))


class Consumer:
    """A subscription of a session to a queue (basic.consume).

    :ivar tag: the consumer tag, unique within its session.
    :ivar limits: the prefetch windows that apply (none when no-ack).
    :ivar priority: its ``x-priority``: consumers of a higher priority get
        messages first; lower ones only while the higher ones have no room.
    """

    __slots__ = (
        "tag", "queue", "session", "no_ack", "no_local", "exclusive", "limits", "priority", "arguments",
        "_simple",
    )

    #: What a delivery to this consumer is kept as until it is settled.
    delivery_type: type[Delivery] = Delivery

    def __init__(
        self,
        tag: str,
        queue: Queue,
        session: ConsumerSession,
        *,
        no_ack: bool = False,
        no_local: bool = False,
        exclusive: bool = False,
        limits: tuple[Prefetch, ...] = (),
        priority: int = 0,
        arguments: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self.tag = tag
        self.queue = queue
        self.session = session
        self.no_ack = no_ack
        self.no_local = no_local
        self.exclusive = exclusive
        self.limits = () if no_ack else limits
        self.priority = priority
        #: basic.consume's arguments, as given.
        self.arguments = dict(arguments or {})
        self._simple = not self.limits and not no_local

    def can_take(self, message: Message) -> bool:
        """Whether *message* may be delivered to this consumer now: the
        channel open with its flow on, the connection's transport not paused
        unless a prefetch window bounds the consumer (:attr:`windowed`), and
        *message* fits the windows.

        A windowed consumer is not held back while the transport has more to
        write than it buffers before it pauses its producer: what it can have
        unsent is bounded by its window already (each delivery stays
        unacknowledged at least until the client has read it), as RabbitMQ
        bounds what a channel has unsent; holding the room acknowledgements
        make until the transport had written everything would leave the
        client with nothing to read while the next deliveries are made.
        """
        if self._simple:
            return self.session.sending
        session = self.session
        if not session.sending and not (session.flowing and self.windowed):
            return False
        if self.no_local and message.origin[3] is session.client:  # the publisher
            return False
        return self.fits(message)

    @property
    def windowed(self) -> bool:
        """A prefetch window (count or size) bounds what this consumer has
        unacknowledged (never one that does not acknowledge)."""
        return any(limit.count or limit.size for limit in self.limits)

    def fits(self, message: Message) -> bool:
        """Whether *message* fits every prefetch window of this consumer."""
        size = message.size
        for limit in self.limits:
            if not limit.room(size):
                return False
        return True

    def start(self) -> None:
        """Deliver what waits in the queue (once the client knows the consumer)."""
        self.queue.drain()

    def __repr__(self) -> str:
        return f"<Consumer {self.tag!r} on {self.queue.name!r}>"


class QuorumConsumer(Consumer):
    """A consumer of a quorum queue: its deliveries count returns."""

    __slots__ = ()

    delivery_type = CountedDelivery


def consumer_priority(arguments: Mapping[str, Any], queue: Queue) -> int:
    """The ``x-priority`` of basic.consume *arguments* on *queue* (0 when absent).

    :raises PreconditionFailed: not an integer (406).
    """
    low, high = _CONSUMER_PRIORITY_RANGE
    subject = f"queue {queue.name!r} in vhost {queue.vhost.name!r}"
    return count_argument(arguments, "x-priority", subject, minimum=low, maximum=high) or 0


class Queue:
    """A queue of a virtual host.

    :ivar settings: the queue arguments the broker acts on: the declared
        ones with the effective policy folded in (see :meth:`apply_policy`).
    :ivar policy: the name of the policy that applies, or None.
    :ivar operator_policy: the name of the operator policy that applies, or None.
    :ivar effective_policy: the definition of both merged (empty without).
    :ivar exclusive_owner: the client that owns an exclusive queue, or None.
    :ivar stored: the queue and its persistent messages are kept in the
        message store (durable, not exclusive, on a broker with a store).
    :ivar kept_as: ``((vhost name, queue name),)``, the store's key of the
        queue's persistent messages, when it keeps them one by one (a
        stored queue that is not a stream: a stream's log is written as
        chunks); else ``()``.
    """

    # A fixed layout: these attributes are read on every publish and delivery.
    __slots__ = (
        "arguments",
        "auto_delete",
        "bindings",
        "consumers",
        "deleted",
        "durable",
        "effective_policy",
        "exclusive_owner",
        "kept_as",
        "max_length",
        "max_length_bytes",
        "messages",
        "name",
        "operator_policy",
        "overflow",
        "policy",
        "ready_bytes",
        "route",
        "settings",
        "state_watchers",
        "stats",
        "stored",
        "vhost",
        "_expiring",
        "_expiry_at",
        "_expiry_call",
        "_featured",
        "_idle_call",
        "_limited",
        "_next_sequence",
        "_no_local_consumers",
        "_persistence",
        "_ranked_consumers",
        "_restored",
        "_returns",
        "_single_active",
        "_ttl",
        "_use",
    )

    def __init__(
        self,
        vhost: QueueHost,
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
        subject = f"queue {name!r} in vhost {vhost.name!r}"
        settings = QueueArguments(self.arguments, subject)
        if settings.queue_type == QUORUM:
            check_quorum_properties(subject, durable, exclusive_owner is not None, auto_delete)
        self._configure(settings)
        self.policy: Optional[str] = None
        self.operator_policy: Optional[str] = None
        self.effective_policy: dict[str, Any] = {}
        self._persistence = vhost.persistence
        self.stored = self._persistence is not None and durable and exclusive_owner is None
        self.kept_as: tuple[tuple[str, str], ...] = (
            ((vhost.name, name),) if self.stored and settings.queue_type != STREAM else ()
        )
        self.messages: Union[ReadyMessages, PriorityMessages] = (
            ReadyMessages() if settings.max_priority is None else PriorityMessages(settings.max_priority)
        )
        #: Body bytes of the ready messages.
        self.ready_bytes = 0
        #: In turn order (a list: an idle queue's empty deque would cost 600 bytes).
        self.consumers: list[Consumer] = []
        #: Bindings leading here, so that deleting the queue removes them.
        self.bindings: dict[Any, None] = {}
        self.deleted = False
        self._next_sequence = 0
        self._no_local_consumers = 0
        #: Consumers with a non-zero x-priority: picking follows priorities.
        self._ranked_consumers = 0
        self._single_active = settings.single_active_consumer
        #: Some entry has had a deadline: heads are checked for expiry.
        self._expiring = False
        self._expiry_call: Optional[Call] = None
        self._expiry_at = 0.0
        self._idle_call: Optional[Call] = None
        #: How often each ready message (by sequence number) was returned, for
        #: x-delivery-limit; its next delivery takes the count along (see
        #: :class:`CountedDelivery`). Made at the first return.
        self._returns: Optional[dict[int, int]] = None
        #: Itself as a one-element route (the default exchange's result).
        self.route: tuple[Queue] = (self,)
        #: Sequence numbers taken by messages restored at start-up.
        self._restored = 0
        #: What happened to its messages (see :mod:`.stats`).
        self.stats = QueueCounters(self.published)
        #: Whether its consumers could take messages, over time (made with
        #: the first consumer on a broker with a clock).
        self._use: Optional[ConsumerUse] = None
        #: Called when a consumer comes or goes, and when messages start or
        #: stop waiting for its consumers (federated queue links).
        self.state_watchers: tuple[Callable[[], None], ...] = ()
        self.used()

    def _configure(self, settings: QueueArguments) -> None:
        """Act on *settings* from now on."""
        self.settings = settings
        self.max_length = settings.max_length
        self.max_length_bytes = settings.max_length_bytes
        self.overflow = settings.overflow
        self._limited = self.max_length is not None or self.max_length_bytes is not None
        self._ttl = settings.message_ttl
        #: Whether publishing needs more than the short path (arguments in use).
        self._featured = (
            self._limited or self._ttl is not None or settings.max_priority is not None
        )

    def apply_policy(
        self, policy: Optional[str], operator_policy: Optional[str], effective: Mapping[str, Any]
    ) -> None:
        """Apply the policy and operator policy named (None: none) whose
        merged definition is *effective* (see :mod:`.policy`).

        The declared arguments take precedence as RabbitMQ's do; keys the
        queue's type does not take are left out. Length limits apply at
        once (the oldest messages beyond them are dropped, or dead-lettered);
        a message TTL applies to messages that enter from now on; an
        ``expires`` restarts the queue's idle time.
        """
        self.policy, self.operator_policy = policy, operator_policy
        self.effective_policy = dict(effective)
        arguments = queue_arguments(self.arguments, effective, self.ignored_policy_keys())
        self._configure(QueueArguments(arguments, f"queue {self.name!r} in vhost {self.vhost.name!r}"))
        if self._idle_call is not None:
            self._idle_call.cancel()
            self._idle_call = None
        self.used()
        if self._limited and not self._fits(len(self.messages), self.ready_bytes):
            dropped = []
            while self.messages and not self._fits(len(self.messages), self.ready_bytes):
                dropped.append(self._take()[1])
            self.drop(dropped, MAXLEN)

    def ignored_policy_keys(self) -> tuple[str, ...]:
        """The ``x-`` arguments this queue's type does not take from a policy."""
        return refused_arguments(self.settings.queue_type)

    @property
    def clock(self) -> Clock:
        """The virtual host's clock (queues with TTLs or x-expires need one)."""
        clock = self.vhost.clock
        if clock is None:
            raise RuntimeError("the broker has no clock: message TTLs and x-expires need one")
        return clock

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

    def published(self) -> int:
        """How many messages entered the queue since it was made or restored."""
        return self._next_sequence - self._restored

    def publish(self, message: Message) -> bool:
        """Deliver *message* to a consumer or keep it.

        :returns: False when the queue refused it (``reject-publish`` and
            ``reject-publish-dlx``); a message that ``drop-head`` cannot fit
            counts as taken, then dropped.
        """
        if self._featured or message.raw_properties[0] & EXPIRATION_FLAG:
            return self._publish_featured(message)
        sequence = self._next_sequence
        self._next_sequence = sequence + 1
        if self.consumers and not self.messages:
            consumer = self._pick(message)
            if consumer is not None:
                consumer.session.deliver(consumer, self, sequence, message, False, None)
                return True
        self.messages.append((sequence, message, False, None))
        self.ready_bytes += message.size
        if self.consumers and len(self.messages) == 1:
            self._blocked()
        if self._no_local_consumers:
            self.drain()
        return True

    def _publish_featured(self, message: Message) -> bool:
        """:meth:`publish` for a queue with arguments or a message with a TTL."""
        sequence = self._next_sequence
        self._next_sequence = sequence + 1
        deadline = self._deadline(message)
        if deadline is not None:
            self._expiring = True
        if self.consumers and not self.messages:
            consumer = self._pick(message)
            if consumer is not None:
                consumer.session.deliver(consumer, self, sequence, message, False, deadline)
                return True
        if deadline is not None and deadline <= self.clock.seconds():
            self.drop((message,), EXPIRED)
            return True
        if self._limited and not self._make_room(message.size):
            return self._refuse(message)
        self.messages.append((sequence, message, False, deadline))
        self.ready_bytes += message.size
        if self.consumers and len(self.messages) == 1:
            self._blocked()
        if deadline is not None:
            self._schedule_expiry()
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
        consumer.session.deliver(consumer, self, sequence, message, False, self._deadline(message))
        return True

    def _deadline(self, message: Message, entered: Optional[float] = None) -> Optional[float]:
        """When *message* expires if it entered the queue at *entered* (now
        if None), or None."""
        ttl = self._ttl
        own = message_ttl(message)
        if own is not None and (ttl is None or own < ttl):
            ttl = own
        if ttl is None:
            return None
        return (self.clock.seconds() if entered is None else entered) + ttl / 1000

    def _make_room(self, size: int) -> bool:
        if self._fits(len(self.messages) + 1, self.ready_bytes + size):
            return True
        if self.overflow != Overflow.DROP_HEAD:
            return False
        dropped = []
        while self.messages and not self._fits(len(self.messages) + 1, self.ready_bytes + size):
            dropped.append(self._take()[1])
        self.drop(dropped, MAXLEN)
        return self._fits(1, size)

    def _refuse(self, message: Message) -> bool:
        """*message* does not fit: refuse it, or drop it for drop-head."""
        if self.overflow == Overflow.REJECT_PUBLISH:
            self.discard((message,))
            return False
        self.drop((message,), MAXLEN)
        return self.overflow == Overflow.DROP_HEAD

    def _fits(self, count: int, total: int) -> bool:
        if self.max_length is not None and count > self.max_length:
            return False
        return self.max_length_bytes is None or total <= self.max_length_bytes

    def _pick(self, message: Message) -> Optional[Consumer]:
        """The next consumer in turn that can take *message*."""
        consumers = self.consumers
        if len(consumers) == 1 or self._single_active:
            active = consumers[0]
            return active if active.can_take(message) else None
        if self._ranked_consumers:
            return self._pick_ranked(message)
        for _ in range(len(consumers)):
            consumer = consumers.pop(0)
            consumers.append(consumer)
            if consumer.can_take(message):
                return consumer
        return None

    def _pick_ranked(self, message: Message) -> Optional[Consumer]:
        """The first consumer, by priority, that can take *message*; it
        moves behind the others of its priority (round robin within one)."""
        consumers = self.consumers
        for index, consumer in enumerate(consumers):
            if consumer.can_take(message):
                last = index
                while last + 1 < len(consumers) and consumers[last + 1].priority == consumer.priority:
                    last += 1
                if last != index:
                    del consumers[index]
                    consumers.insert(last, consumer)
                return consumer
        return None

    # -- handing out ---------------------------------------------------------

    def drain(self) -> None:
        """Deliver waiting messages while consumers have room."""
        messages = self.messages
        while messages and self.consumers:
            sequence, message, redelivered, deadline = messages[0]
            if deadline is not None and self._expire_head():
                continue
            consumer = self._pick(message)
            if consumer is None:
                if self._no_local_consumers and self._deliver_later_one():
                    continue
                break
            if message.body is None:
                self._page_in()
            messages.popleft()
            self.ready_bytes -= message.size
            consumer.session.deliver(consumer, self, sequence, message, redelivered, deadline)
        if self._use is not None and self.consumers:
            self._set_blocked(bool(messages))
        if self._expiring:
            self._schedule_expiry()

    def _blocked(self) -> None:
        """A message waits although the queue has consumers (none could take it)."""
        if self._use is not None:
            self._set_blocked(True)

    def _drained(self) -> None:
        """Messages left other than through consumers: none waiting, none blocked."""
        if self._use is not None and not self.messages:
            self._set_blocked(False)

    def _set_blocked(self, blocked: bool) -> bool:
        """Messages wait for the consumers (*blocked*) or not: tell the
        consumer use, and the watchers when that changed; whether it did."""
        assert self._use is not None
        changed = self._use.block() if blocked else self._use.unblock()
        if changed:
            self._tell_watchers()
        return changed

    def _tell_watchers(self) -> None:
        for watcher in self.state_watchers:
            watcher()

    def consumer_utilisation(self) -> float:
        """RabbitMQ's ``consumer_utilisation``: the share of time, averaged
        with a one-second half-life, in which a waiting message could go to a
        consumer at once (see :mod:`.utilisation`); 1.0 before the first
        consumer, or on a broker without a clock."""
        return 1.0 if self._use is None else self._use.utilisation()

    def _deliver_later_one(self) -> bool:
        """Deliver the oldest message some consumer can take, past the head.

        Only needed with no-local consumers: the oldest message may be one
        they must not receive while later ones are theirs to take.
        """
        for index, (sequence, message, redelivered, deadline) in enumerate(self.messages):
            consumer = self._pick(message)
            if consumer is not None:
                if message.body is None:
                    self.read_back([message])
                del self.messages[index]
                self.ready_bytes -= message.size
                consumer.session.deliver(consumer, self, sequence, message, redelivered, deadline)
                return True
        return False

    def _take(self) -> Entry:
        entry = self.messages.popleft()
        self.ready_bytes -= entry[1].size
        return entry

    def get(self) -> Optional[Entry]:
        """Take the oldest ready message (basic.get), or None."""
        self.used()
        if self._expiring:
            self._expire_head()
        if not self.messages:
            return None
        if self.messages[0][1].body is None:
            self._page_in()
        entry = self._take()
        if self._expiring:
            self._schedule_expiry()
        self._drained()
        return entry

    def requeue(self, deliveries: Iterable[Delivery]) -> None:
        """Put delivered messages back in their original order, as redelivered.

        A quorum queue counts each message's returns (its
        ``x-delivery-count``), and with ``x-delivery-limit`` dead-letters (or
        drops) a message returned more often than the limit.
        """
        if self.deleted:
            self.discard(delivery.message for delivery in deliveries)
            return
        if self.settings.queue_type == QUORUM:
            deliveries = self._count_returns(deliveries)
        entries = sorted((d.sequence, d.message, True, d.deadline) for d in deliveries)
        if not entries:
            return
        self.messages.put_back(entries)
        self.ready_bytes += sum(entry[1].size for entry in entries)
        self.drain()

    def _count_returns(self, deliveries: Iterable[Delivery]) -> list[Delivery]:
        """Count a return of each of *deliveries*; those that may be delivered
        again (all, without a delivery limit); the others are dropped."""
        limit = self.settings.delivery_limit
        kept: list[Delivery] = []
        exhausted: list[Delivery] = []
        counts = self._returns
        if counts is None:
            counts = self._returns = {}
        elif len(counts) > 2 * len(self.messages) + _RETURNS_SLACK:
            # Forget the counts of messages dropped while ready.
            ready = {entry[0] for entry in self.messages}
            counts = self._returns = {sequence: n for sequence, n in counts.items() if sequence in ready}
        for delivery in deliveries:
            assert isinstance(delivery, CountedDelivery), "a quorum queue's deliveries count returns"
            returns = delivery.returns + 1
            if limit is not None and returns > limit:
                exhausted.append(delivery)
            else:
                counts[delivery.sequence] = returns
                kept.append(delivery)
        if exhausted:
            self.drop([delivery.message for delivery in exhausted], DELIVERY_LIMIT)
        return kept

    def take_returns(self, sequence: int) -> int:
        """How often the ready message *sequence* was returned (counted by
        quorum queues only), as it is delivered again."""
        counts = self._returns
        return counts.pop(sequence, 0) if counts is not None else 0

    def as_sent(self, sequence: int, message: Message, *, settled: bool, got: bool) -> Message:
        """The ready *message* (number *sequence*) as a client receives it.

        A quorum queue's carries RabbitMQ 3.10's ``x-delivery-count``, how
        often it came back before: always for basic.get (*got*), only once
        it came back for a consumer. Other queues send it as it is.

        :param settled: it cannot come back (no-ack): its count is forgotten.
        """
        if self.settings.queue_type != QUORUM:
            return message
        counts = self._returns
        if counts is None:
            returns = 0
        else:
            returns = counts.pop(sequence, 0) if settled else counts.get(sequence, 0)
        return with_delivery_count(message, returns) if returns or got else message

    @property
    def delivery_type(self) -> type[Delivery]:
        """What a basic.get from this queue is kept as until it is settled."""
        return CountedDelivery if self.settings.queue_type == QUORUM else Delivery

    def purge(self) -> int:
        """Drop every ready message; how many there were."""
        count = len(self.messages)
        self.discard(entry[1] for entry in self.messages)
        self.messages.clear()
        self.ready_bytes = 0
        self._drained()
        return count

    # -- expiry --------------------------------------------------------------

    def _expire_head(self, now: Optional[float] = None) -> bool:
        """Drop (or dead-letter) the expired messages at the head; whether there were any."""
        if now is None:
            now = self.clock.seconds()
        messages = self.messages
        expired = []
        while messages:
            deadline = messages[0][3]
            if deadline is None or deadline > now:
                break
            expired.append(self._take()[1])
        if expired:
            self.drop(expired, EXPIRED)
            self._drained()
        return bool(expired)

    def _schedule_expiry(self) -> None:
        """Have the timer due when the head expires (never later)."""
        messages = self.messages
        if not messages:
            return
        deadline = messages[0][3]
        if deadline is None:
            return
        if self._expiry_call is not None:
            if self._expiry_at <= deadline:
                return
            self._expiry_call.cancel()
        clock = self.clock
        self._expiry_at = deadline
        self._expiry_call = clock.callLater(max(0.0, deadline - clock.seconds()), self._expiry_due)

    def _expiry_due(self) -> None:
        self._expiry_call = None
        if not self.deleted:
            self._expire_head(max(self.clock.seconds(), self._expiry_at))
            self._schedule_expiry()

    def used(self) -> None:
        """The queue was declared or read (basic.get): restart its x-expires time."""
        expires = self.settings.expires
        if expires is None or self.consumers or self.deleted:
            return
        if self._idle_call is not None:
            self._idle_call.cancel()
        self._idle_call = self.clock.callLater(expires / 1000, self._idle_due)

    def _idle_due(self) -> None:
        self._idle_call = None
        if not self.consumers and not self.deleted:
            self.vhost.delete_queue(self)

    def stop(self) -> None:
        """The queue was deleted: cancel its timers."""
        for call in (self._expiry_call, self._idle_call):
            if call is not None:
                call.cancel()
        self._expiry_call = self._idle_call = None

    # -- leaving -------------------------------------------------------------

    def drop(self, messages: Iterable[Message], reason: str) -> None:
        """*messages* left this queue for good for *reason* (see
        :mod:`.deadletter`): dead-letter them if the queue has a dead-letter
        exchange, and forget them in the message store."""
        messages = list(messages)
        if reason == EXPIRED:
            self.stats.expired += len(messages)
        exchange = self.settings.dead_letter_exchange
        if exchange is not None and messages and not self.deleted:
            paged = [message for message in messages if message.body is None]
            if paged:
                self.read_back(paged)
            self.stats.dead_lettered += len(messages)
            self._dead_letter(messages, reason, exchange)
        self.discard(messages)

    def _dead_letter(self, messages: list[Message], reason: str, exchange_name: str) -> None:
        """Republish *messages* (their bodies in memory), which left for
        *reason*, to the dead-letter exchange *exchange_name*, if it exists,
        except to the queues they would reach in a cycle."""
        vhost = self.vhost
        exchange = vhost.exchanges.get(exchange_name)
        if exchange is None:
            return
        routing_key = self.settings.dead_letter_routing_key
        now = datetime.fromtimestamp(int(self.clock.seconds()), timezone.utc)
        persistence = vhost.persistence
        for message in messages:
            copy, deaths = dead_letter_copy(message, self.name, reason, now, exchange_name, routing_key)
            targets = [target for target in vhost.route(exchange, copy) if not is_cycle(target.name, deaths, reason)]
            if persistence is not None and targets:
                persistence.publish(copy, targets)
            for target in targets:
                target.publish(copy)

    # -- storage -------------------------------------------------------------

    def discard(self, messages: Iterable[Message]) -> None:
        """*messages* left this queue for good: forget them in the message store."""
        if self._persistence is not None:
            self._persistence.remove(self, messages)

    def _page_in(self) -> None:
        """Read back the bodies of the paged-out messages at the head of the queue."""
        paged = [entry[1] for entry in islice(self.messages, PAGE_IN_SCAN) if entry[1].body is None]
        self.read_back(paged[:PAGE_IN_BATCH])

    def read_back(self, messages: list[Message]) -> None:
        """Read the bodies of paged-out *messages* of this queue back from the store."""
        assert self._persistence is not None, "only a broker with a store pages messages out"
        self._persistence.page_in(messages)

    def restore(self, messages: Sequence[Message], published: Iterable[float]) -> None:
        """Append recovered *messages* as ready ones, redelivered (as stores
        recover them), in order; *published*: when each was published (0:
        unknown), read only when the queue or a message has a TTL.

        Their TTLs count from their publish time (from now when it is
        unknown), as RabbitMQ keeps expiry times across restarts.
        """
        first = self._next_sequence
        if self._ttl is None and not any(message.raw_properties[0] & EXPIRATION_FLAG for message in messages):
            entries: list[Entry] = [(sequence, message, True, None) for sequence, message in enumerate(messages, first)]
        else:
            entries = [
                (sequence, message, True, self._deadline(message, when or None))
                for sequence, message, when in zip(count(first), messages, published)
            ]
            self._expiring = self._expiring or any(entry[3] is not None for entry in entries)
        self.messages.extend_redelivered(entries)
        self.ready_bytes += sum(message.size for message in messages)
        self._next_sequence = self._restored = first + len(entries)
        if self._expiring:
            self._schedule_expiry()

    # -- consumers -----------------------------------------------------------

    def new_consumer(
        self,
        tag: str,
        session: ConsumerSession,
        *,
        no_ack: bool,
        no_local: bool,
        exclusive: bool,
        limits: tuple[Prefetch, ...],
        arguments: Mapping[str, Any],
    ) -> Consumer:
        """A consumer of this queue for basic.consume (*arguments* are its own: ``x-priority``).

        :raises PreconditionFailed: an invalid argument (406).
        """
        consumer_type = QuorumConsumer if self.settings.queue_type == QUORUM else Consumer
        return consumer_type(
            tag, self, session, no_ack=no_ack, no_local=no_local, exclusive=exclusive,
            limits=limits, priority=consumer_priority(arguments, self), arguments=arguments,
        )

    def add_consumer(self, consumer: Consumer) -> None:
        """Deliver to *consumer* too, from the next :meth:`drain` on.

        Consumers are kept by priority, highest first; with a single active
        consumer the first one stays active and the others wait in that order.
        """
        consumers = self.consumers
        if consumer.priority or self._ranked_consumers:
            position = len(consumers)
            for index, other in enumerate(consumers):
                if other.priority < consumer.priority and not (index == 0 and self._single_active):
                    position = index
                    break
            consumers.insert(position, consumer)
        else:
            consumers.append(consumer)
        self._ranked_consumers += consumer.priority != 0
        self._no_local_consumers += consumer.no_local
        if self._use is None and self.vhost.clock is not None:
            self._use = ConsumerUse(self.vhost.clock)
        # Waiting messages wait until the consumer's start drains them.
        if self._use is None or not self._set_blocked(bool(self.messages)):
            self._tell_watchers()
        if self._idle_call is not None:
            self._idle_call.cancel()
            self._idle_call = None

    def remove_consumer(self, consumer: Consumer) -> None:
        """Stop delivering to *consumer*; an auto-delete queue may go with it.

        With a single active consumer, the next waiting one takes over.
        """
        handover = self._single_active and self.consumers[0] is consumer
        self.consumers.remove(consumer)
        self._ranked_consumers -= consumer.priority != 0
        self._no_local_consumers -= consumer.no_local
        self._tell_watchers()
        if self.auto_delete and not self.consumers and not self.deleted:
            self.vhost.delete_queue(self)
        elif not self.consumers:
            self.used()
        elif handover:
            self.drain()

    @property
    def has_exclusive_consumer(self) -> bool:
        """A consumer holds the queue exclusively."""
        return any(consumer.exclusive for consumer in self.consumers)

    def __repr__(self) -> str:
        return f"<Queue {self.name!r} ready={len(self.messages)} consumers={len(self.consumers)}>"
