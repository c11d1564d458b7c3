"""The data source's AMQP work, done in the reactor thread of
:mod:`txamqp09.spark.reactor` with :mod:`txamqp09.client`.

Spark's threads call these with :func:`~txamqp09.spark.reactor.call_in_reactor`:

* :class:`StreamRange` consumes a stream queue from one offset to another;
* :func:`stream_tail` learns the offset a stream queue's next message gets;
* :class:`QueueFeed` consumes a classic queue and holds its deliveries
  unacknowledged until :meth:`QueueFeed.ack_through`;
* :class:`Drain` takes up to a number of messages from a classic queue;
* :class:`Publisher` publishes with publisher confirms.
"""

from __future__ import annotations

import uuid
from typing import Any, Optional

from twisted.internet.defer import Deferred, fail, gatherResults, succeed
from twisted.internet.interfaces import IDelayedCall
from twisted.python.failure import Failure

from txamqp09.client import Channel, ClientConnection, Consumer, Message, connect
from txamqp09.spark.deliveries import DeliveryColumns, DeliveryTaker, GetTaker, StreamDeliveryTaker
from txamqp09.spark.rows import STREAM_OFFSET_HEADER, Publication
from txamqp09.wire.base import Properties
from txamqp09.wire.fields import field_text
from txamqp09.wire.frames import BASIC_CLASS, method_frame

__all__ = [
    "StreamRange",
    "stream_tail",
    "QueueFeed",
    "Drain",
    "acknowledge",
    "Publisher",
    "open_channel",
]


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor


async def open_channel(url: str) -> tuple[ClientConnection, Channel]:
    """A new connection to *url* and a channel on it."""
    connection = await connect(_reactor(), url)
    try:
        return connection, await connection.channel()
    except BaseException:
        connection.disconnect()
        raise


def stream_offset(message: Message) -> int:
    """The stream offset of a delivery from a stream queue.

    :raises ValueError: the delivery has none (the queue is not a stream).
    """
    offset = message.headers.get(STREAM_OFFSET_HEADER)
    if offset is None:
        raise ValueError(
            f"a delivery has no {STREAM_OFFSET_HEADER} header: is queue "
            "a stream queue? (option queueType)"
        )
    return int(offset)


class _Handover:
    """Rows a :class:`~txamqp09.spark.deliveries.DeliveryTaker` reads off
    the connection, handed to a Spark thread at least :attr:`rows` at a
    time; once :attr:`finished`, the rows left, then the error that ended
    the reading (if one did)."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.taker: Optional[DeliveryTaker] = None
        self._error: Optional[Failure] = None
        self._waiting: Optional[Deferred[DeliveryColumns]] = None

    @property
    def finished(self) -> bool:
        """No more rows will come."""
        raise NotImplementedError

    def _ready(self) -> int:
        """Rows waiting to be taken."""
        return 0 if self.taker is None else len(self.taker.columns)

    def _wake(self) -> None:
        waiting, self._waiting = self._waiting, None
        if waiting is not None:
            self._answer().chainDeferred(waiting)

    def _answer(self) -> Deferred[DeliveryColumns]:
        columns = DeliveryColumns() if self.taker is None else self.taker.take_columns()
        if not len(columns) and self._error is not None:
            return fail(self._error)
        return succeed(columns)

    def take(self) -> Deferred[DeliveryColumns]:
        """The next rows, at least :attr:`rows` unless the reading ends
        first; none once it has ended; the Deferred fails with what ended
        it early (the channel's or connection's closing, or an error of the
        taker) once the rows before were taken.
        """
        if self._ready() >= self.rows or self.finished:
            return self._answer()
        self._waiting = Deferred()
        return self._waiting


class StreamRange(_Handover):
    """Deliveries of a stream queue with offsets from *start* up to (not
    including) *end*, consumed with a prefetch window of *prefetch* and
    taken *rows* at a time as :class:`~txamqp09.spark.deliveries.DeliveryColumns`.

    The deliveries are read off the connection by a
    :class:`~txamqp09.spark.deliveries.StreamDeliveryTaker`, without a
    :class:`~txamqp09.client.Message` each. Offsets before *start* (a stream
    hands out whole chunks) are skipped; once a delivery at ``end - 1`` or
    beyond arrived the range is complete, so the read ends even when
    retention removed some of its messages.

    Deliveries are acknowledged (which gives the broker credit for more:
    a stream keeps its messages) as they arrive, once half a window or more
    arrived unacknowledged, while fewer than :attr:`held` wait to be taken;
    a take acknowledges the rest.
    So the broker keeps sending while the Spark thread works on a batch,
    and at most :attr:`held` plus a window of messages wait in memory.
    """

    def __init__(
        self, connection: ClientConnection, channel: Channel, start: int, end: int, prefetch: int, rows: int
    ) -> None:
        super().__init__(rows)
        self.connection = connection
        self.channel = channel
        self.start = start
        self.end = end
        #: Deliveries acknowledged at once, as they arrive.
        self.ack_every = max(1, prefetch // 2)
        #: Deliveries waiting to be taken above which arrivals are not acknowledged.
        self.held = rows + prefetch
        self._ended = start >= end
        self._acknowledged_tag = 0
        self._last_tag = 0

    @classmethod
    async def open(cls, url: str, queue: str, start: int, end: int, prefetch: int, rows: int) -> StreamRange:
        """Start consuming *queue* at *start*."""
        connection, channel = await open_channel(url)
        reading = cls(connection, channel, start, end, prefetch, rows)
        if reading.finished:
            return reading
        channel.whenClosed().addCallback(lambda ending: reading._finish(Failure(ending)))
        await channel.basic_qos(prefetch)
        tag = f"txamqp09.spark-{uuid.uuid4().hex}"
        takers = connection.scanner.takers
        reading.taker = taker = StreamDeliveryTaker(
            connection, channel.number, tag, takers[channel.number], start, end,
            reading._arrived, lambda error: reading._finish(Failure(error)),
        )
        takers[channel.number] = taker.take
        connection.scanner.run_taker = taker.take_run
        consumer = await channel.basic_consume(
            queue, _dropped, consumer_tag=tag, arguments={"x-stream-offset": start}
        )
        consumer.onCancel(reading._cancelled)
        return reading

    def _cancelled(self, consumer: Consumer) -> None:
        error = RuntimeError(f"the broker cancelled the consumer of {consumer.queue!r} (was it deleted?)")
        self._finish(Failure(error))

    @property
    def finished(self) -> bool:
        """No more deliveries will be taken."""
        return self._ended

    def _finish(self, error: Optional[Failure] = None) -> None:
        """No more deliveries will be taken (*error* tells why, when it is one)."""
        if not self._ended:
            self._ended = True
            self._error = error
            self._wake()

    def _arrived(self, offset: int, tag: int, count: int) -> None:
        """The taker's report of deliveries (*count* of them, the last at
        *offset* under delivery tag *tag*)."""
        if self.finished:
            return
        self._last_tag = tag
        if offset >= self.end - 1:
            self._finish()
            return
        waiting = self._ready()
        if tag - self._acknowledged_tag >= self.ack_every and waiting < self.held:
            self._acknowledge()
        if waiting >= self.rows:
            self._wake()

    def _acknowledge(self) -> None:
        """Acknowledge every delivery so far (one basic.ack, multiple)."""
        last = self._last_tag
        if last > self._acknowledged_tag and self.channel.closed_by is None:
            self.channel.ack(last, multiple=True)
            self._acknowledged_tag = last

    def take(self) -> Deferred[DeliveryColumns]:
        """The next deliveries in the range, at least :attr:`rows` unless
        the range ends first; none once the range is complete."""
        return super().take().addCallback(self._taken)

    def _taken(self, columns: DeliveryColumns) -> DeliveryColumns:
        self._acknowledge()
        return columns

    async def close(self) -> None:
        """Stop consuming and disconnect."""
        await self.connection.disconnect()


def _dropped(message: Message) -> None:
    """The consumer callback of a :class:`StreamRange`: its taker takes the
    deliveries while the channel is open; later ones are dropped."""


#: Seconds without deliveries after which the last chunk of a RabbitMQ
#: stream is taken to be read completely, and the most :func:`_last_chunk_end`
#: reads for while publishers keep appending.
TAIL_QUIET = 0.2
TAIL_FIRST = 1.0
TAIL_LIMIT = 2.0


async def stream_tail(url: str, queue: str) -> int:
    """The offset the next message appended to stream *queue* gets.

    This project's broker reports it as queue.declare-ok's ``message_count``
    (docs/streams.rst, "The end of the log"). RabbitMQ reports a message
    count from statistics there, so with it the end is learned from the
    stream's last chunk (:func:`_last_chunk_end`).
    """
    connection, channel = await open_channel(url)
    try:
        if _product(connection) == "txamqp09":
            declared = await channel.queue_declare(queue, passive=True)
            return int(declared.message_count)
        return await _last_chunk_end(channel, queue)
    finally:
        await connection.disconnect()


def _product(connection: ClientConnection) -> str:
    """The ``product`` the server named in connection.start."""
    product = connection.server_properties.get("product", "")
    return str(field_text(product))


async def _last_chunk_end(channel: Channel, queue: str) -> int:
    """One more than the highest offset of the stream's last chunk (a
    consumer with ``x-stream-offset: last``); 0 for an empty stream.

    Deliveries are read once the consumer is registered: until none has come
    for :data:`TAIL_FIRST` seconds (an empty stream sends none), then until
    none has come for :data:`TAIL_QUIET` seconds, for :data:`TAIL_LIMIT`
    seconds in all.
    """
    highest = -1
    read: Deferred[None] = Deferred()
    clock = _reactor()
    timers: list[IDelayedCall] = []

    def delivered(message: Message) -> None:
        nonlocal highest
        highest = max(highest, stream_offset(message))
        message.ack()
        if timers and timers[0].active():
            timers[0].reset(TAIL_QUIET)

    try:
        await channel.basic_qos(1000)
        await channel.basic_consume(queue, delivered, arguments={"x-stream-offset": "last"})
        quiet = clock.callLater(TAIL_QUIET if highest >= 0 else TAIL_FIRST, read.callback, None)
        timers.extend((quiet, clock.callLater(TAIL_LIMIT, quiet.reset, 0)))
        await read
    finally:
        for timer in timers:
            if timer.active():
                timer.cancel()
    return highest + 1


class QueueFeed:
    """A classic queue's deliveries, numbered from 0 in arrival order and
    kept unacknowledged until :meth:`ack_through`.

    The consumer's prefetch window bounds how many are held.
    """

    def __init__(self, connection: ClientConnection, channel: Channel, prefetch: int) -> None:
        self.connection = connection
        self.channel = channel
        self.prefetch = prefetch
        self.messages: list[Message] = []
        #: How many of the first deliveries are acknowledged (and dropped from :attr:`messages`).
        self.acknowledged = 0
        self._waiting: tuple[Any, ...] = ()

    @classmethod
    async def open(cls, url: str, queue: str, prefetch: int) -> tuple[QueueFeed, int]:
        """Start consuming *queue*; also the number of messages it held ready."""
        connection, channel = await open_channel(url)
        feed = cls(connection, channel, prefetch)
        channel.whenClosed().addCallback(feed._ended)
        declared = await channel.queue_declare(queue, passive=True)
        await channel.basic_qos(prefetch)
        await channel.basic_consume(queue, feed._deliver)
        return feed, int(declared.message_count)

    @property
    def received(self) -> int:
        """The number of deliveries so far."""
        return self.acknowledged + len(self.messages)

    def _deliver(self, message: Message) -> None:
        self.messages.append(message)
        if self._waiting and self._waiting[0] <= self.received:
            self._wake()

    def _ended(self, ending: object) -> None:
        """The channel ended: no more deliveries come, so a wait ends now."""
        if self._waiting:
            self._wake()

    def _wake(self) -> None:
        count, arrived, timer = self._waiting
        self._waiting = ()
        if timer.active():
            timer.cancel()
        arrived.callback(self.received)

    def wait_for(self, count: int, timeout: float) -> Deferred[int]:
        """Fires with :attr:`received` once it reaches *count*, or after
        *timeout* seconds, or when the channel ends, whichever comes first
        (one waiter at a time)."""
        if self.received >= count or self.channel.closed_by is not None:
            return succeed(self.received)
        arrived: Deferred[int] = Deferred()
        self._waiting = (count, arrived, _reactor().callLater(timeout, self._wake))
        return arrived

    def between(self, start: int, end: int) -> list[Message]:
        """The deliveries numbered *start* to *end* (exclusive) not yet acknowledged."""
        first = max(start, self.acknowledged) - self.acknowledged
        return self.messages[first : end - self.acknowledged]

    async def ack_through(self, end: int) -> None:
        """Acknowledge the deliveries numbered below *end*; fires once the
        broker has processed the acknowledgement (a basic.qos round trip
        after it on the same channel)."""
        if end <= self.acknowledged:
            return
        done = end - self.acknowledged
        acknowledged = self.messages[:done]
        del self.messages[:done]
        self.acknowledged = end
        await acknowledge(self.channel, acknowledged, self.prefetch)

    async def close(self) -> None:
        """Disconnect: the broker requeues whatever is unacknowledged."""
        await self.connection.disconnect()


async def acknowledge(channel: Channel, messages: list[Message], prefetch: int = 0) -> None:
    """Acknowledge *messages* (deliveries of *channel*, in order) and wait
    until the broker has processed that: a basic.qos round trip, which
    restates the channel's *prefetch*, follows the acknowledgement."""
    if messages:
        messages[-1].ack(multiple=True)
        await channel.basic_qos(prefetch)


class Publisher:
    """Publishes in chunks on a channel in confirm mode (a chunk in one
    write, confirmed together), with at most :attr:`window` chunks awaiting
    their confirms.

    The window covers the broker's commit cycle: a chunk is confirmed once
    the store's writer committed it, and the broker goes on taking the
    next chunks meanwhile (a Spark write's task waited for confirms three
    quarters of its time with two chunks of 500).
    """

    window = 4

    def __init__(self, connection: ClientConnection, channel: Channel) -> None:
        self.connection = connection
        self.channel = channel
        #: The properties class of basic in the connection's protocol version.
        self.properties_class: type[Properties] = channel.version.properties[BASIC_CLASS]
        self.published = 0
        self._unconfirmed: list[Deferred[Any]] = []

    @classmethod
    async def open(cls, url: str) -> Publisher:
        """A publisher on a new connection to *url*."""
        connection, channel = await open_channel(url)
        await channel.confirm_select()
        return cls(connection, channel)

    async def publish(self, publications: list[Publication]) -> None:
        """Publish *publications*, after the confirms of the chunk
        :attr:`window` chunks back arrived and the connection drained.

        :raises MessageNacked: the broker refused a message of an earlier chunk.
        """
        await self._make_room()
        if publications:
            self._sent(self.channel.basic_publish_many(publications), len(publications))

    async def publish_encoded(
        self, exchange: str, routing_key: str, properties: list[bytes], bodies: list[bytes]
    ) -> None:
        """:meth:`publish` for messages to one exchange and routing key with
        encoded properties (:meth:`~txamqp09.client.Channel.basic_publish_encoded`).

        :raises MessageNacked: the broker refused a message of an earlier chunk.
        """
        await self._make_room()
        if bodies:
            self._sent(self.channel.basic_publish_encoded(exchange, routing_key, properties, bodies), len(bodies))

    async def _make_room(self) -> None:
        """Wait for the confirms of the chunk :attr:`window` chunks back, and
        for the connection to drain."""
        while len(self._unconfirmed) >= self.window:
            await self._unconfirmed.pop(0)
        if not self.connection.writable:
            await self.connection.whenWritable()

    def _sent(self, confirmed: Optional[Deferred[int]], count: int) -> None:
        """A chunk of *count* messages went out; *confirmed* fires when the broker confirmed them."""
        assert confirmed is not None, "the channel is in confirm mode"
        self._unconfirmed.append(confirmed)
        self.published += count

    async def close(self) -> int:
        """Wait for every confirm, disconnect; the number of messages confirmed.

        :raises MessageNacked: the broker refused a message.
        """
        try:
            while self._unconfirmed:
                await self._unconfirmed.pop(0)
        finally:
            await self.connection.disconnect()
        return self.published


class Drain(_Handover):
    """Takes up to *limit* messages from a classic queue with basic.get,
    *rows* at a time as :class:`~txamqp09.spark.deliveries.DeliveryColumns`,
    unacknowledged until :meth:`acknowledge`.

    The answers are read off the connection by a
    :class:`~txamqp09.spark.deliveries.GetTaker`, without a
    :class:`~txamqp09.client.Message` each. Up to :attr:`window` basic.get
    requests are outstanding (sent :attr:`chunk` in one write as answers
    come), so the broker keeps answering while the Spark thread works on a
    batch; no more are sent once one was answered empty.
    """

    #: basic.get requests sent in one write.
    chunk = 250
    #: The most requests outstanding.
    window = 1000

    def __init__(self, connection: ClientConnection, channel: Channel, queue: str, limit: int, rows: int) -> None:
        super().__init__(rows)
        self.connection = connection
        self.channel = channel
        self.limit = limit
        self.requested = 0
        self.answered = 0
        self.emptied = False
        self._request_frame = method_frame(channel.number, channel.build("basic.get", queue=queue, no_ack=False))
        self._last_tag = 0
        takers = connection.scanner.takers
        self.taker = taker = GetTaker(
            connection, channel.number, takers[channel.number], self._arrived, self._emptied,
            lambda error: self._fail(Failure(error)),
        )
        takers[channel.number] = taker.take
        connection.scanner.run_taker = taker.take_run

    @classmethod
    async def open(cls, url: str, queue: str, limit: int, rows: int) -> Drain:
        """Start taking messages from *queue*."""
        connection, channel = await open_channel(url)
        draining = cls(connection, channel, queue, limit, rows)
        channel.whenClosed().addCallback(lambda ending: draining._fail(Failure(ending)))
        draining._request()
        return draining

    @property
    def finished(self) -> bool:
        """No more messages will come: every request was answered and no
        more will be sent, or the channel ended."""
        return self._error is not None or (
            self.answered == self.requested and (self.emptied or self.requested == self.limit)
        )

    def _request(self) -> None:
        """Send more requests while fewer than :attr:`window` are outstanding."""
        while not self.emptied and self.requested < self.limit and self.requested - self.answered < self.window:
            count = min(self.chunk, self.limit - self.requested)
            self.connection.write(self._request_frame * count)
            self.requested += count

    def _arrived(self, offset: Optional[int], tag: int, count: int) -> None:
        self._last_tag = tag
        self._answered(count)

    def _emptied(self) -> None:
        self.emptied = True
        self._answered(1)

    def _answered(self, count: int) -> None:
        self.answered += count
        if self.requested - self.answered <= self.window - self.chunk:
            self._request()
        if self._ready() >= self.rows or self.finished:
            self._wake()

    def _fail(self, error: Failure) -> None:
        if self._error is None:
            self._error = error
            self._wake()

    async def acknowledge(self) -> None:
        """Acknowledge every message taken and wait until the broker has
        processed that (a basic.qos round trip after it on the same channel)."""
        if self._last_tag:
            self.channel.ack(self._last_tag, multiple=True)
            await self.channel.basic_qos(0)

    async def close(self) -> None:
        """Disconnect: the broker requeues whatever is unacknowledged."""
        await self.connection.disconnect()
