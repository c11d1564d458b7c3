"""What the broker asks of durable storage, and what it gets back at start-up.

A store keeps the durable topology (exchanges, queues, bindings) and the
persistent messages routed to durable queues. It also keeps, until it is
opened again, the bodies the broker spills to disk under memory pressure
(messages it does not otherwise keep: transient ones, or those on queues that
are not durable), and the logs of stream queues (chunks of messages
appended by offset, read back a chunk at a time, truncated from the head by
retention; see :mod:`txamqp09.store.chunks`),
and the broker's runtime configuration: settings, JSON values filed by kind
and key (users, vhosts, permissions, policies, limits, parameters; see
:mod:`txamqp09.broker.runtime`). Every change is an operation
that returns a sequence number; :meth:`IMessageStore.when_durable` fires once
every operation up to a sequence number is on disk, which is when a publisher
confirm or tx.commit-ok may be sent.

Stores never block the caller: operations are queued and written in batches
(one transaction and one fsync for many operations). A message body handed to
a store is referenced, not copied.

A write can fail (the disk is full, or reports an I/O error) without the
store failing for good: the publishes of the failed batch are dropped and
reported by :meth:`IMessageStore.failed_between` (their publisher confirms
become nacks), every other operation is written with a later batch, and the
store keeps trying until a write succeeds. :meth:`IMessageStore.add_failure_listener`
tells the broker when writing fails and when it works again.

This module imports nothing from Twisted at run time (the interface is a
:mod:`zope.interface` one, a package Twisted itself builds on), so that the
broker's model (which must not) can use its records; only
:meth:`IMessageStore.when_durable` and :meth:`IMessageStore.close` deal in
Deferreds, and the model calls neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol, Sequence, runtime_checkable

from zope.interface import Attribute, Interface

from txamqp09.store.chunks import LogChunk

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred

__all__ = [
    "DurableExchange",
    "DurableQueue",
    "DurableBinding",
    "StoredMessage",
    "Recovered",
    "LogChunk",
    "LogSegment",
    "IMessageStore",
    "Settings",
    "WriteFailed",
    "Fenced",
    "Followable",
    "StoreUnavailable",
]

#: The runtime configuration as stored: JSON values by kind, then by key.
Settings = dict[str, dict[str, Any]]


@dataclass(frozen=True)
class DurableExchange:
    """A durable exchange as declared."""

    vhost: str
    name: str
    type: str
    auto_delete: bool = False
    internal: bool = False
    arguments: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class DurableQueue:
    """A durable queue as declared."""

    vhost: str
    name: str
    auto_delete: bool = False
    arguments: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class DurableBinding:
    """A binding between durable entities.

    :ivar destination_kind: ``"queue"`` or ``"exchange"``.
    """

    vhost: str
    source: str
    destination: str
    destination_kind: str
    routing_key: str
    arguments: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(slots=True)
class StoredMessage:
    """A persistent message: routing information, raw properties and body.

    :ivar message_id: broker-wide, increasing in publish order; recovery
        returns each queue's messages in this order.
    :ivar raw_properties: the content header's property flags and list, as
        received.
    :ivar body: the body; None in a recovered message left on disk (beyond
        the body budget of :meth:`IMessageStore.open`).
    :ivar size: the body's length in bytes.
    :ivar redelivered: set on messages recovered after a restart.
    :ivar published: when it was published, in seconds since the epoch (0:
        unknown); message TTLs count from it after a restart.
    :ivar prepared: what the broker made of a recovered message ahead of
        time, while its store followed the database (see
        :meth:`Followable.follow`); None: nothing.
    """

    message_id: int
    exchange: str
    routing_key: str
    raw_properties: bytes
    body: Optional[bytes]
    size: int
    redelivered: bool = False
    published: float = 0.0
    prepared: Any = None


@dataclass(slots=True)
class LogSegment:
    """A run of consecutive messages of a log, as recovery reports it.

    :ivar first: the offset of its first message (also its name).
    :ivar last: the offset of its last message.
    :ivar first_timestamp: the timestamp of its first message (milliseconds).
    :ivar last_timestamp: the timestamp of its last message (milliseconds).
    :ivar size: the bytes of its message bodies.
    """

    first: int
    last: int
    first_timestamp: int
    last_timestamp: int
    size: int


class WriteFailed(Exception):
    """Operations a caller waits for were dropped because the store could not write them."""


class StoreUnavailable(ConnectionError):
    """A store's database cannot be reached (opening it, or reading from it)."""


class Fenced(Exception):
    """A store's guard refused a write: another broker has taken over the
    store's database. The store writes nothing more; what waited for it
    fails with this, and nothing of the refused transaction is confirmed."""


@dataclass
class Recovered:
    """Everything a store held at start-up.

    :ivar messages: each durable queue's messages, by (vhost, queue), in order.
    :ivar next_message_id: the first id not used by any stored message.
    :ivar logs: each stream's log, by (vhost, queue): its segments in order
        (an empty list for a stream that has never held a message).
    :ivar settings: the runtime configuration, by kind and key (see
        :meth:`IMessageStore.put_setting`).
    :ivar followed: read as what changed since the copy of the database
        the store kept while it followed it (see :class:`Followable`).
    """

    exchanges: list[DurableExchange] = field(default_factory=list)
    queues: list[DurableQueue] = field(default_factory=list)
    bindings: list[DurableBinding] = field(default_factory=list)
    messages: dict[tuple[str, str], list[StoredMessage]] = field(default_factory=dict)
    next_message_id: int = 1
    logs: dict[tuple[str, str], list[LogSegment]] = field(default_factory=dict)
    settings: Settings = field(default_factory=dict)
    followed: bool = False


class IMessageStore(Interface):
    """Durable storage for the broker. Operations return sequence numbers."""

    def open(body_budget: Optional[int] = None) -> Recovered:
        """Open the store (at start-up, before any other call) and recover.

        Recovered messages carry their bodies until *body_budget* bytes of
        bodies have been read (all of them when None), oldest message first
        (in the order of their ids, a message on several queues counted
        once); the later ones come without (see :meth:`read`).
        """

    def add_exchange(exchange: DurableExchange) -> int:
        """Record a durable exchange (replacing one of the same name)."""

    def remove_exchange(vhost: str, name: str) -> int:
        """Forget a durable exchange and the bindings that name it."""

    def add_queue(queue: DurableQueue) -> int:
        """Record a durable queue."""

    def remove_queue(vhost: str, name: str) -> int:
        """Forget a durable queue, its bindings and its messages (or its log)."""

    def add_binding(binding: DurableBinding) -> int:
        """Record a binding."""

    def remove_binding(binding: DurableBinding) -> int:
        """Forget a binding."""

    def publish(message: StoredMessage, queues: Sequence[tuple[str, str]]) -> int:
        """Store *message* as enqueued on each (vhost, queue) of *queues*."""

    def remove(vhost: str, queue: str, message_ids: Sequence[int]) -> int:
        """Remove messages from a queue (acknowledged, dropped or purged).

        A message removed from every queue before its publish was written
        need not be written at all.
        """

    def spill(message_id: int, body: bytes) -> int:
        """Keep *body* on disk for a message that is not stored otherwise.

        A spilled body is read back by :meth:`read` and forgotten by
        :meth:`unspill`, or when the store is opened again: spilled
        messages do not survive a restart. *message_id* must not be the id
        of a stored message.
        """

    def unspill(message_ids: Sequence[int]) -> int:
        """Forget spilled bodies (their messages left the broker or were read back)."""

    def read(message_ids: Sequence[int]) -> dict[int, bytes]:
        """The bodies of stored or spilled messages, by id, read at once.

        For bodies the broker does not hold in memory; each message must be
        on disk already (its publish or spill durable). Reading blocks the
        caller briefly, so callers read many bodies at a time.
        """

    def append_log(vhost: str, queue: str, chunk: LogChunk) -> int:
        """Write *chunk*, the next chunk of the log of the stream *queue*:
        the messages added to it until the store takes it
        (:meth:`~txamqp09.store.chunks.LogChunk.take`), which may be more
        than it holds now. Every message added before the take is durable
        once the returned sequence number is.
        """

    def read_log(vhost: str, queue: str, start: int) -> Optional[LogChunk]:
        """The durable chunk of a log that holds offset *start* (the first
        retained one when *start* was removed; None past the end).

        Like :meth:`read`, this blocks the caller briefly.
        """

    def log_offset_at(vhost: str, queue: str, timestamp: int, start: int) -> Optional[int]:
        """The first durable offset from *start* on whose timestamp is at
        least *timestamp* (milliseconds), or None when there is none."""

    def truncate_log(vhost: str, queue: str, first: int) -> int:
        """Remove the chunks of a log before offset *first* (retention; a
        chunk's first offset: the log is cut between chunks)."""

    def put_setting(kind: str, key: str, value: Any) -> int:
        """Record a setting: *value* (anything :func:`json.dumps` takes) under
        *key* among the settings of *kind*, replacing what was there."""

    def remove_setting(kind: str, key: str) -> int:
        """Forget a setting (one that is not there counts as forgotten)."""

    def add_durable_listener(listener: Callable[[int], None]) -> None:
        """Call *listener* with a sequence number whenever the operations up
        to it become durable.

        A store whose operations are durable as soon as they are made (its
        :attr:`durable_sequence` equals :attr:`last_sequence` when an
        operation returns) never needs to call it.
        """

    last_sequence: int = Attribute("The sequence number of the latest operation (0 before any).")

    durable_sequence: int = Attribute("The sequence number up to which every operation is on disk.")

    def when_durable(sequence: int) -> Deferred[None]:
        """Fires once every operation up to *sequence* is settled: on disk, or
        (a publish whose write failed) dropped, which :meth:`failed_between` tells."""

    def failed_between(after: int, upto: int) -> bool:
        """Whether a publish numbered in (*after*, *upto*] was dropped because
        its write failed: what waits for it must not be confirmed."""

    def add_failure_listener(listener: Callable[[Optional[str]], None]) -> None:
        """Call *listener* with a description of the error whenever a write
        fails, and with None once writing succeeds again after a failure."""

    def close() -> Deferred[None]:
        """Write what is pending, then close."""


@runtime_checkable
class Followable(Protocol):
    """A store whose database another process may write while it waits to
    open it (a broker standing by in a group)."""

    def follow(
        self, body_budget: Optional[int] = None, prepare: Optional[Callable[[StoredMessage], Any]] = None
    ) -> None:
        """Until :meth:`IMessageStore.open`, keep a copy of what the database
        holds current, with bodies while *body_budget* lasts, so that
        opening reads only what changed since. Each message of one queue
        read meanwhile gets ``prepare(record)`` as its
        :attr:`StoredMessage.prepared` (called in another thread)."""
