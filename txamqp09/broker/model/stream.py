"""Stream queues: append-only logs read by offset (``x-queue-type: stream``).

A :class:`StreamQueue` keeps every message it receives in a log, in arrival
order, each at an *offset* (0 for the first message ever appended, then one
more per message). Consuming does not remove anything: each consumer reads
the log from an offset it chooses with the consumer argument
``x-stream-offset`` and moves forward on its own; its acknowledgements only
give prefetch credit back. Messages leave the log by retention only
(``x-max-length-bytes``, ``x-max-age``), a whole segment
(``x-stream-max-segment-size-bytes`` of bodies) at a time, oldest first, and
never the segment being written.

A message becomes readable once it is *committed*: on disk when the broker
has a store (a consumer never sees an offset that a crash could give to
another message), at once otherwise. The committed end of the log (one past
the last readable offset) is what ``queue.declare-ok`` reports as its
message count.

The log is kept in chunks (:class:`~txamqp09.store.chunks.LogChunk`): a
stream adds each message to its newest chunk, packed into one byte array,
and hands that chunk to the store once; the store's writer takes it with its
next batch and writes it as one row, and the stream starts a new chunk for
the messages that follow. A chunk never spans two segments, so retention
removes whole chunks.

Reading: the newest chunks are held in memory (up to :data:`CACHE_BYTES` of
bodies per stream, and always those not yet on disk, counted in the broker's
memory budget, and given up beyond it); a consumer further behind reads the
store one chunk at a time.
"""

from __future__ import annotations

import re
import struct
from collections import deque
from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, cast

from txamqp09.broker.model.arguments import STREAM, refused_argument
from txamqp09.broker.model.policy import queue_arguments
from txamqp09.broker.model.message import Message, Origin
from txamqp09.broker.model.queue import Consumer, ConsumerSession, Delivery, Prefetch, Queue, QueueHost
from txamqp09.store.chunks import CHUNK_BYTES, LogChunk, chunk_holding
from txamqp09.store.interface import LogSegment
from txamqp09.wire.errors import AMQPNotImplemented, PreconditionFailed
from txamqp09.wire.fields import field_text
from txamqp09.wire.forwarding import LongHeader
from txamqp09.wire.versions import AMQP0_9_1

if TYPE_CHECKING:
    from txamqp09.broker.model.store import Persistence

__all__ = [
    "CACHE_BYTES",
    "DEFAULT_SEGMENT_SIZE",
    "OFFSET_HEADER",
    "StreamConsumer",
    "StreamQueue",
    "check_stream_declaration",
    "is_stream",
    "parse_interval",
    "parse_offset",
    "rejection_refused",
]

#: Bytes of bodies per segment unless x-stream-max-segment-size-bytes says
#: otherwise (RabbitMQ's default).
DEFAULT_SEGMENT_SIZE = 500_000_000
#: Bytes of bodies of committed messages a stream holds in memory for its
#: readers (while the broker is within its memory budget).
CACHE_BYTES = 16 * 1024 * 1024
#: Queue arguments RabbitMQ knows that a stream refuses.
REFUSED_ARGUMENTS = (
    "x-max-length",
    "x-overflow",
    "x-message-ttl",
    "x-expires",
    "x-max-priority",
    "x-queue-mode",
    "x-queue-master-locator",
    "x-single-active-consumer",
    "x-dead-letter-strategy",
    "x-delivery-limit",
    "x-quorum-initial-group-size",
)
#: Arguments compared when a stream is declared again (besides the common ones).
EQUIVALENT_ARGUMENTS = ("x-max-age", "x-stream-max-segment-size-bytes")
#: Milliseconds per unit of an interval such as ``7D`` (RabbitMQ's units).
_UNIT_MS = {
    "Y": 365 * 86_400_000,
    "M": 30 * 86_400_000,
    "D": 86_400_000,
    "h": 3_600_000,
    "m": 60_000,
    "s": 1000,
}
_INTERVAL = re.compile(r"([0-9]+)([YMDhms])")
#: The header that tells a consumer the offset of each message it gets.
OFFSET_HEADER = LongHeader("x-stream-offset")
_OFFSET_HELP = (
    "expected 'first', 'last', 'next', a non-negative integer offset, a timestamp or an "
    "interval such as '1h'"
)

#: Where a consumer starts: (kind, value), kind one of first, last, next,
#: offset, timestamp (value in milliseconds).
OffsetSpec = tuple[str, int]


def parse_interval(text: str) -> Optional[int]:
    """Milliseconds of an interval like ``7D``, ``1h`` or ``30s`` (RabbitMQ's
    units Y, M, D, h, m, s), or None when *text* is not one."""
    match = _INTERVAL.fullmatch(text)
    if match is None:
        return None
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


def parse_offset(value: Any, now_ms: int) -> OffsetSpec:
    """The start a consumer asked for with ``x-stream-offset`` (None: ``next``).

    :raises PreconditionFailed: a value of another kind or a negative offset (406).
    """
    if value is None:
        return ("next", 0)
    text = field_text(value)
    if isinstance(text, str):
        if text in ("first", "last", "next"):
            return (text, 0)
        interval = parse_interval(text)
        if interval is not None:
            return ("timestamp", now_ms - interval)
    elif isinstance(value, datetime):
        return ("timestamp", int(value.timestamp() * 1000))
    elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return ("offset", value)
    raise PreconditionFailed(f"invalid x-stream-offset {text!r}: {_OFFSET_HELP}")


def is_stream(arguments: Optional[Mapping[str, Any]]) -> bool:
    """Whether queue.declare *arguments* ask for a stream (``x-queue-type: stream``)."""
    return arguments is not None and field_text(arguments.get("x-queue-type")) == STREAM


def _describe(vhost: QueueHost, name: str) -> str:
    return f"queue {name!r} in vhost {vhost.name!r}"


def _refusal(what: str, queue: Queue, hint: str = "") -> AMQPNotImplemented:
    """540 for *what* on a stream, as RabbitMQ answers it."""
    return AMQPNotImplemented(
        f"{what} not supported by stream queues {_describe(queue.vhost, queue.name)}", hint=hint
    )


def rejection_refused(queue: Queue) -> AMQPNotImplemented:
    """What basic.reject and basic.nack of a delivery from stream *queue* raise."""
    return _refusal("basic.nack and basic.reject", queue)


def check_stream_declaration(
    vhost: QueueHost, name: str, *, durable: bool, exclusive: bool, auto_delete: bool,
    arguments: Mapping[str, Any],
) -> None:
    """Refuse what a stream cannot be, with RabbitMQ's checks and order.

    :raises PreconditionFailed: auto-delete, exclusive, not durable, an
        argument streams do not take, or a bad value (406).
    """
    what = _describe(vhost, name)
    for refused, flag in (("auto-delete", auto_delete), ("exclusive-owner", exclusive), ("non-durable", not durable)):
        if flag:
            raise PreconditionFailed(
                f"invalid property {refused!r} for {what}",
                hint="streams are durable, not exclusive and not auto-delete",
            )
    for argument in REFUSED_ARGUMENTS:
        if argument in arguments:
            raise refused_argument(argument, what, STREAM)
    _max_age(arguments, what)
    _size_argument(arguments, "x-max-length-bytes", what, 0)
    _size_argument(arguments, "x-stream-max-segment-size-bytes", what, 1)


def _max_age(arguments: Mapping[str, Any], what: str) -> Optional[int]:
    value = arguments.get("x-max-age")
    if value is None:
        return None
    text = field_text(value)
    interval = parse_interval(text) if isinstance(text, str) else None
    if interval is None:
        raise PreconditionFailed(
            f"invalid arg 'x-max-age' for {what}: {text!r}; "
            "expected a number and one of the "
            "units Y, M, D, h, m, s, such as '7D'"
        )
    return interval


def _size_argument(arguments: Mapping[str, Any], name: str, what: str, least: int) -> Optional[int]:
    value = arguments.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise PreconditionFailed(
            f"invalid arg {name!r} for {what}: {value!r}; expected an integer of at least {least}"
        )
    return value


#: The properties class of the messages streams hand out.
_PROPERTIES = AMQP0_9_1.properties[60]


#: Envelopes of the messages read from logs -> their :data:`.message.Origin`,
#: so that messages alike share their names.
_NAMES: dict[bytes, Origin] = {}
#: Properties of the messages read from logs -> where their
#: ``x-stream-offset`` value goes (see :meth:`LongHeader.split`).
_SPLITS: dict[bytes, tuple[bytes, bytes]] = {}
#: Distinct envelopes :data:`_NAMES` holds at most, and properties :data:`_SPLITS`.
_NAMES_KEPT = 1024
_OFFSET_VALUE = struct.Struct(">q")


def _names(envelope: bytes) -> Origin:
    """The origin of a log's message with *envelope* (two shortstrs: the
    exchange and routing key; no publisher)."""
    names = _NAMES.get(envelope)
    if names is None:
        if len(_NAMES) >= _NAMES_KEPT:
            _NAMES.clear()
        key_at = 1 + envelope[0]
        names = _NAMES[envelope] = (
            envelope[1:key_at].decode("utf-8"), envelope[key_at + 1 :].decode("utf-8"), envelope, None,
        )
    return names


def _split(properties: bytes) -> tuple[bytes, bytes]:
    """Where the offset goes in *properties* (kept in :data:`_SPLITS`)."""
    if len(_SPLITS) >= _NAMES_KEPT:
        _SPLITS.clear()
    split = _SPLITS[properties] = OFFSET_HEADER.split(properties)
    return split


class StreamDelivery(Delivery):
    """A message sent from a stream: settling it only gives credit back."""

    __slots__ = ()

    def release(self) -> None:
        """Give the prefetch room back and let the consumer read on.

        (Windows shared with other consumers are refilled by the session.)
        """
        super().release()
        consumer = self.consumer
        queue = self.queue
        if consumer is not None and isinstance(queue, StreamQueue) and not queue.deleted:
            queue.serve(cast(StreamConsumer, consumer))


class StreamConsumer(Consumer):
    """A consumer reading a stream from its own position.

    :ivar position: the offset it receives next.
    :ivar page: the chunk it reads now (from memory or the store).
    :ivar held: the last message made for it (it may wait for credit).
    :ivar held_offset: the offset of *held* (-1: none).
    """

    __slots__ = ("position", "page", "held", "held_offset")

    #: Settling a delivery of a stream gives credit back (see :class:`StreamDelivery`).
    delivery_type = StreamDelivery

    def __init__(
        self, tag: str, queue: StreamQueue, session: ConsumerSession, *, exclusive: bool,
        limits: tuple[Prefetch, ...], position: int,
    ) -> None:
        super().__init__(tag, queue, session, exclusive=exclusive, limits=limits)
        self.position = position
        self.page: Optional[LogChunk] = None
        self.held: Optional[Message] = None
        self.held_offset = -1


class StreamQueue(Queue):
    """A stream: a durable, append-only log of messages addressed by offset.

    :ivar first_offset: the oldest offset retention has kept.
    :ivar next_offset: the offset the next message appended gets.
    :ivar committed_offset: one past the last offset consumers may read.
    :ivar log_bytes: body bytes in the log.
    :ivar max_age: x-max-age in milliseconds, or None.
    :ivar segment_size: x-stream-max-segment-size-bytes.
    """

    def __init__(
        self,
        vhost: QueueHost,
        name: str,
        *,
        arguments: Optional[Mapping[str, Any]] = None,
    ) -> None:
        super().__init__(vhost, name, durable=True, arguments=arguments)
        if vhost.clock is None:
            raise RuntimeError("the broker has no clock: streams need one for their timestamps")
        self._retention(self.arguments)
        persistence = vhost.persistence
        self._store = persistence.store if persistence is not None else None
        self._seconds = vhost.clock.seconds
        self._segments: list[LogSegment] = []
        self.log_bytes = 0
        self.first_offset = 0
        self.next_offset = 0
        self.committed_offset = 0
        self._last_timestamp = 0
        #: Chunks held in memory, oldest first, holding [_cache_first,
        #: next_offset); the last is the one being filled.
        self._chunks: list[LogChunk] = []
        #: The first offset of each of :attr:`_chunks`.
        self._firsts: list[int] = []
        self._cache_first = 0
        #: Body bytes in :attr:`_chunks`, and what of it the memory budget counts.
        self._cache_bytes = 0
        self._counted_bytes = 0
        #: Appends not on disk yet: [store sequence, offset + 1] for each
        #: chunk (the offset of its newest message), oldest first.
        self._uncommitted: deque[list[int]] = deque()

    def _retention(self, arguments: Mapping[str, Any]) -> None:
        """Take x-max-age and x-stream-max-segment-size-bytes from *arguments*."""
        what = _describe(self.vhost, self.name)
        self.max_age = _max_age(arguments, what)
        self.segment_size = (
            _size_argument(arguments, "x-stream-max-segment-size-bytes", what, 1)
            or DEFAULT_SEGMENT_SIZE
        )

    def ignored_policy_keys(self) -> tuple[str, ...]:
        """Streams take no argument they refuse at declaration from a policy."""
        return REFUSED_ARGUMENTS

    def apply_policy(
        self, policy: Optional[str], operator_policy: Optional[str], effective: Mapping[str, Any]
    ) -> None:
        """As :meth:`Queue.apply_policy`, with the retention settings (``max-age``,
        ``max-length-bytes``, ``stream-max-segment-size-bytes``) too."""
        super().apply_policy(policy, operator_policy, effective)
        self._retention(queue_arguments(self.arguments, effective, REFUSED_ARGUMENTS))

    @property
    def message_count(self) -> int:
        """The committed end of the log (offsets below it are readable), as
        queue.declare-ok's 32-bit message count can carry it."""
        return min(self.committed_offset, 0xFFFFFFFF)

    # -- appending -----------------------------------------------------------

    def publish(self, message: Message) -> bool:
        """Append *message* to the log; consumers receive it once committed."""
        offset = self.next_offset
        self.next_offset = offset + 1
        now = int(self._seconds() * 1000)
        timestamp = self._last_timestamp = max(now, self._last_timestamp)
        if message.tracking is not None:
            self._release(message)
        body: bytes = message.body  # type: ignore[assignment]  # in memory (see _release)
        size = message.size
        segments = self._segments
        segment = segments[-1] if segments else None
        if segment is None or (segment.size and segment.size + size > self.segment_size):
            segment = LogSegment(offset, offset, timestamp, timestamp, 0)
            segments.append(segment)
        segment.last = offset
        segment.last_timestamp = timestamp
        segment.size += size
        self.log_bytes += size
        self._cache_bytes += size
        chunks = self._chunks
        chunk = chunks[-1] if chunks else None
        if (
            chunk is None or chunk.segment != segment.first or len(chunk.data) >= CHUNK_BYTES
            or not chunk.add(timestamp, message.envelope, message.raw_properties, body)
        ):
            chunk = self._new_chunk(offset, segment.first, timestamp, message, body)
        store = self._store
        sequence = chunk.sequence
        if store is not None and sequence > store.durable_sequence:
            publisher = message.origin[3]
            if publisher is not None and publisher.log_sequence < sequence:
                publisher.log_sequence = sequence
            uncommitted = self._uncommitted
            if not uncommitted:
                persistence = self.vhost.persistence
                assert persistence is not None
                persistence.await_durable(self.made_durable)
                uncommitted.append([sequence, offset + 1])
            elif uncommitted[-1][0] == sequence:
                uncommitted[-1][1] = offset + 1
            else:
                uncommitted.append([sequence, offset + 1])
        else:
            self._commit(offset + 1)
        if len(segments) > 1:
            self._retain(now)
        return True

    def _new_chunk(self, offset: int, segment: int, timestamp: int, message: Message, body: bytes) -> LogChunk:
        """Start a chunk with *message* (at *offset*) and hand it to the store."""
        chunk = LogChunk(offset, segment)
        chunk.add(timestamp, message.envelope, message.raw_properties, body)
        self._chunks.append(chunk)
        self._firsts.append(offset)
        if self._store is not None:
            chunk.sequence = self._store.append_log(self.vhost.name, self.name, chunk)
        return chunk

    def _release(self, message: Message) -> None:
        """The log keeps its own reference to *message*'s body: stop counting
        it as held by this queue under the memory budget (reading the body
        back first when the budget paged it out already)."""
        persistence = self.vhost.persistence
        assert persistence is not None
        if message.body is None:
            persistence.page_in([message])
        persistence.remove(self, (message,))

    def publish_immediately(self, message: Message) -> bool:
        """A stream takes every message, consumers or not."""
        return self.publish(message)

    def made_durable(self, sequence: int) -> bool:
        """Store operations up to *sequence* are on disk: commit what they
        appended. Whether appends still wait for the disk."""
        uncommitted = self._uncommitted
        end = 0
        while uncommitted and uncommitted[0][0] <= sequence:
            end = uncommitted.popleft()[1]
        if end and not self.deleted:
            self._commit(end)
        return bool(uncommitted)

    def _commit(self, end: int) -> None:
        """Offsets below *end* are readable now: evict, then serve consumers."""
        self.committed_offset = end
        persistence = self.vhost.persistence
        if self._store is not None and persistence is not None:
            self._count(persistence)
            if self._cache_bytes > CACHE_BYTES or persistence.over_budget:
                self._evict(0 if persistence.over_budget else CACHE_BYTES)
                self._count(persistence)
        if self.consumers:
            self.drain()

    def _count(self, persistence: Persistence) -> None:
        """Tell the memory budget how many bytes of bodies the stream holds now."""
        if self._cache_bytes != self._counted_bytes:
            persistence.stream_cache_changed(self._cache_bytes - self._counted_bytes)
            self._counted_bytes = self._cache_bytes

    def _evict(self, limit: int) -> None:
        """Drop the oldest committed chunks from memory down to *limit* bytes
        of bodies (never the chunk being filled)."""
        chunks = self._chunks
        dropped = 0
        while (
            self._cache_bytes > limit and dropped < len(chunks) - 1
            and chunks[dropped].end <= self.committed_offset
        ):
            self._cache_bytes -= chunks[dropped].size
            dropped += 1
        self._forget_chunks(dropped)

    def _forget_chunks(self, count: int) -> None:
        """Drop the *count* oldest chunks from memory."""
        if count:
            del self._chunks[:count]
            del self._firsts[:count]
            self._cache_first = self._firsts[0] if self._firsts else self.next_offset

    def stop(self) -> None:
        """The stream was deleted: its chunks leave memory and the memory budget."""
        super().stop()
        persistence = self.vhost.persistence
        if persistence is not None and self._counted_bytes:
            persistence.stream_cache_changed(-self._counted_bytes)
        self._counted_bytes = self._cache_bytes = 0
        self._forget_chunks(len(self._chunks))

    # -- retention -----------------------------------------------------------

    def _retain(self, now: int) -> None:
        """Remove whole segments, oldest first, beyond x-max-length-bytes or x-max-age."""
        segments = self._segments
        dropped = 0
        while len(segments) - dropped > 1 and self._expired(segments[dropped], now):
            self.log_bytes -= segments[dropped].size
            dropped += 1
        if dropped:
            del segments[:dropped]
            self._truncate(segments[0].first)

    def _expired(self, segment: LogSegment, now: int) -> bool:
        if self.max_length_bytes is not None and self.log_bytes > self.max_length_bytes:
            return True
        return self.max_age is not None and segment.last_timestamp < now - self.max_age

    def _truncate(self, first: int) -> None:
        """Remove the chunks before offset *first* (a segment's first)."""
        self.first_offset = first
        if self._store is not None:
            self._store.truncate_log(self.vhost.name, self.name, first)
        chunks = self._chunks
        dropped = 0
        while dropped < len(chunks) and chunks[dropped].first < first:
            self._cache_bytes -= chunks[dropped].size
            dropped += 1
        self._forget_chunks(dropped)

    # -- reading -------------------------------------------------------------

    def drain(self) -> None:
        """Send each consumer what it may read now, within its prefetch credit."""
        if self.deleted:
            return
        for consumer in self.consumers:
            self.serve(cast(StreamConsumer, consumer))

    def serve(self, reader: StreamConsumer) -> None:
        """Send *reader* what it may read now, within its prefetch credit.

        No message is made beyond what the prefetch counts allow (the
        message that the other limits hold back waits in the reader).
        """
        end = self.committed_offset
        credit = end - reader.position
        for limit in reader.limits:
            if limit.count and limit.count - limit.used_count < credit:
                credit = limit.count - limit.used_count
        while credit > 0 and reader.position < end:
            credit -= 1
            message = self._message_at(reader)
            if not reader.can_take(message):
                break
            offset = reader.position
            reader.position = offset + 1
            reader.session.deliver(reader, self, offset, message, False)

    def _message_at(self, reader: StreamConsumer) -> Message:
        """The message at *reader*'s position (moved to the first kept offset
        when retention removed it), as consumers receive it."""
        position = reader.position
        if position < self.first_offset:
            position = reader.position = self.first_offset
        if reader.held_offset == position:
            return reader.held  # type: ignore[return-value]  # set with held_offset
        chunk = reader.page
        if chunk is None or not chunk.first <= position < chunk.first + len(chunk.ends):
            chunk = reader.page = self._chunk_at(position)
            if chunk.first > position:
                position = reader.position = chunk.first
        envelope, properties, body, _ = chunk.message(position - chunk.first)
        names = _NAMES.get(envelope) or _names(envelope)
        head, tail = _SPLITS.get(properties) or _split(properties)
        message = reader.held = Message(names, head + _OFFSET_VALUE.pack(position) + tail, body, _PROPERTIES)
        reader.held_offset = position
        return message

    def _chunk_at(self, position: int) -> LogChunk:
        """The chunk holding committed offset *position* (or the first kept
        after it): from memory, or from the store."""
        if position < self._cache_first:
            assert self._store is not None, "without a store every message stays in memory"
            chunk = self._store.read_log(self.vhost.name, self.name, position)
            if chunk is not None:
                return chunk
            position = self._cache_first
        chunk = chunk_holding(self._chunks, self._firsts, position)
        assert chunk is not None, f"offset {position} of {self!r} is in no chunk"
        return chunk

    def start_position(self, spec: OffsetSpec) -> int:
        """The offset a consumer starting at *spec* reads first.

        ``first`` is the oldest kept offset, ``last`` the newest committed
        message (``next`` when there is none), ``next`` the offset the next
        appended message gets; an offset is moved into the kept range (past
        the end: ``next``); a timestamp selects the first message appended at
        or after it (``next`` when there is none).
        """
        kind, value = spec
        if kind == "first":
            return self.first_offset
        if kind == "last":
            return self.committed_offset - 1 if self.committed_offset > self.first_offset else self.next_offset
        if kind == "offset":
            return min(max(value, self.first_offset), self.next_offset)
        if kind == "timestamp":
            return self._offset_at(value)
        return self.next_offset

    def _offset_at(self, timestamp: int) -> int:
        """The first offset appended at or after *timestamp* (ms), or next."""
        for segment in self._segments:
            if segment.last_timestamp >= timestamp:
                break
        else:
            return self.next_offset
        start = max(segment.first, self.first_offset)
        if start < self._cache_first:
            assert self._store is not None
            found = self._store.log_offset_at(self.vhost.name, self.name, timestamp, start)
            if found is not None:
                return found
        for chunk in self._chunks:
            if chunk.end > start and chunk.last_timestamp >= timestamp:
                return chunk.first + chunk.index_at(timestamp, max(start - chunk.first, 0))
        return self.next_offset

    # -- consumers -----------------------------------------------------------

    def new_consumer(
        self, tag: str, session: ConsumerSession, *, no_ack: bool, no_local: bool, exclusive: bool,
        limits: tuple[Prefetch, ...], arguments: Mapping[str, Any],
    ) -> Consumer:
        """A consumer reading from ``x-stream-offset`` (``next`` by default).

        :raises AMQPNotImplemented: no-ack consumers (540, as RabbitMQ).
        :raises PreconditionFailed: no prefetch count, or a bad offset (406).
        """
        what = _describe(self.vhost, self.name)
        if no_ack:
            raise _refusal(
                "automatic acknowledgement", self, hint="consume with manual acknowledgements (no-ack off)"
            )
        if not any(limit.count for limit in limits):
            raise PreconditionFailed(
                f"consumer prefetch count is not set for '{what}'",
                hint="send basic.qos with a prefetch count before consuming from a stream",
            )
        spec = parse_offset(arguments.get("x-stream-offset"), int(self._seconds() * 1000))
        return StreamConsumer(
            tag, self, session, exclusive=exclusive, limits=limits, position=self.start_position(spec)
        )

    # -- what streams refuse ---------------------------------------------------

    def get(self) -> None:
        """basic.get is refused (540), as RabbitMQ refuses it: consume instead."""
        raise _refusal("basic.get", self)

    def purge(self) -> int:
        """queue.purge is refused (540), as RabbitMQ refuses it; deleting the
        stream counts no ready messages (the log goes with the queue)."""
        if self.deleted:
            return 0
        raise _refusal("queue.purge", self)

    def requeue(self, deliveries: Iterable[Delivery]) -> None:
        """Nothing goes back to a log: unsettled deliveries of a closed
        channel (or recovered with requeue) are forgotten; their consumer's
        credit came back when they were released."""

    def discard(self, messages: Iterable[Message]) -> None:
        """Nothing leaves a log but by retention: settling changes nothing."""

    # -- recovery --------------------------------------------------------------

    def restore_log(self, segments: list[LogSegment]) -> None:
        """Take the recovered *segments* (every message in them is on disk)."""
        self._segments = segments
        if segments:
            self.first_offset = segments[0].first
            self.next_offset = self.committed_offset = self._cache_first = segments[-1].last + 1
            self._last_timestamp = segments[-1].last_timestamp
            self.log_bytes = sum(segment.size for segment in segments)
            self._restored = self.next_offset

    def published(self) -> int:
        """How many messages were appended since the stream was made or restored."""
        return self.next_offset - self._restored

    def __repr__(self) -> str:
        return (
            f"<StreamQueue {self.name!r} offsets={self.first_offset}..{self.committed_offset} "
            f"consumers={len(self.consumers)}>"
        )
