"""The ``amqp09`` PySpark data source: batch and streaming reads of stream
and classic queues, batch and streaming writes with publisher confirms.

Every method that talks to a broker runs in a Spark Python worker process
(an executor's, or the driver's planner and streaming-source processes) and
calls into that process's reactor thread (:mod:`txamqp09.spark.reactor`);
readers and writers are pickled to executors before they connect, so they
hold nothing but options until then.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Iterator, Optional, Sequence, Union

from pyspark import TaskContext
import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from txamqp09.spark import amqp
from txamqp09.spark.options import ReadOptions, WriteOptions
from txamqp09.spark.reactor import call_in_reactor, fewer_collections, finish_in_reactor, settle_heap
from txamqp09.spark.arrow import BatchPublications, message_batch
from txamqp09.spark.rows import SCHEMA, Publication

__all__ = ["AMQPDataSource"]

#: Rows published per call into the reactor (a call hands the reactor
#: thread one chunk and waits for it: fewer, larger chunks mean fewer waits).
_PUBLISH_CHUNK = 1000
#: Messages per Arrow record batch a read yields (fewer at the end of its partition).
BATCH_ROWS = 5000
#: Seconds a Trigger.AvailableNow read of a classic queue waits for the
#: messages the queue held when the query started to be delivered.
_AVAILABLE_NOW_WAIT = 30.0

@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """Stream offsets ``start`` to ``end`` (exclusive) of one Spark partition."""

    start: int
    end: int


@dataclass(frozen=True)
class Quota(InputPartition):
    """At most ``limit`` messages taken from a classic queue by one Spark partition."""

    limit: int


@dataclass(frozen=True)
class Rows(InputPartition):
    """Messages the driver consumed from a classic queue, for one Spark partition."""

    batch: pa.RecordBatch


def _shares(total: int, parts: int) -> list[int]:
    """*total* split into at most *parts* nearly equal positive shares."""
    parts = max(1, min(parts, total))
    return [total // parts + (index < total % parts) for index in range(parts)]


def offset_ranges(start: int, end: int, parts: int) -> list[OffsetRange]:
    """The offsets from *start* to *end* in at most *parts* contiguous ranges."""
    ranges = []
    for share in _shares(end - start, parts) if end > start else []:
        ranges.append(OffsetRange(start, start + share))
        start += share
    return ranges


# -- reading stream queues -------------------------------------------------------


def _position(options: ReadOptions, position: Union[str, int]) -> int:
    """An offset for "first", "next", "last" or an offset of *options*' stream."""
    if position == "first":
        return 0
    if isinstance(position, int):
        return position
    return call_in_reactor(amqp.stream_tail, options.url, options.queue)


def read_offset_range(options: ReadOptions, partition: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Record batches of a stream queue's messages in *partition*'s offset range."""
    with fewer_collections():
        reading = call_in_reactor(
            amqp.StreamRange.open, options.url, options.queue, partition.start, partition.end,
            options.prefetch, BATCH_ROWS,
        )
        try:
            while columns := call_in_reactor(reading.take):
                yield from columns.record_batches()
        finally:
            finish_in_reactor(reading.close)


class StreamBatchReader(DataSourceReader):
    """A batch read of a stream queue from ``startingOffset`` to ``endingOffset``."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        start = _position(self.options, self.options.starting)
        end = _position(self.options, self.options.ending)
        # Spark reads an empty list as one partition of its own (None).
        return offset_ranges(start, end, self.options.partitions) or [OffsetRange(start, start)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRange)
        return read_offset_range(self.options, partition)


class StreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A streaming read of a stream queue; its offset is ``{"offset": N}``,
    the stream offset of the first message not read yet."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._target: Optional[int] = None

    def initialOffset(self) -> dict[str, int]:
        return {"offset": _position(self.options, self.options.starting)}

    def getDefaultReadLimit(self) -> ReadLimit:
        maximum = self.options.max_per_trigger
        return ReadAllAvailable() if maximum is None else ReadMaxRows(maximum)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = _position(self.options, "next")

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        end = self._target if self._target is not None else _position(self.options, "next")
        if isinstance(limit, ReadMaxRows):
            end = min(end, start["offset"] + limit.max_rows)
        return {"offset": max(start["offset"], end)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return offset_ranges(start["offset"], end["offset"], self.options.partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRange)
        return read_offset_range(self.options, partition)


# -- reading classic queues ------------------------------------------------------


class QueueBatchReader(DataSourceReader):
    """A bounded drain of a classic queue: at most the number of messages it
    held ready when the read was planned, taken by ``numPartitions`` tasks.

    A task acknowledges its messages (removing them from the queue) once
    Spark has taken all of its rows; a task that fails or is abandoned
    before then leaves them to be redelivered.
    """

    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        ready = call_in_reactor(_ready_messages, self.options.url, self.options.queue)
        return [Quota(share) for share in _shares(ready, self.options.partitions)] or [Quota(0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, Quota)
        return drain(self.options, partition.limit)


def drain(options: ReadOptions, limit: int) -> Iterator[pa.RecordBatch]:
    """Record batches of at most *limit* messages taken from a classic
    queue, acknowledged once the last batch was taken."""
    with fewer_collections():
        draining = call_in_reactor(amqp.Drain.open, options.url, options.queue, limit, BATCH_ROWS)
        try:
            while columns := call_in_reactor(draining.take):
                yield from columns.record_batches()
            call_in_reactor(draining.acknowledge)
        finally:
            finish_in_reactor(draining.close)


async def _ready_messages(url: str, queue: str) -> int:
    connection, channel = await amqp.open_channel(url)
    try:
        return int((await channel.queue_declare(queue, passive=True)).message_count)
    finally:
        await connection.disconnect()


class QueueStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A streaming read of a classic queue, at least once.

    The driver's streaming-source process holds the one consuming
    connection: deliveries are numbered in arrival order, a micro-batch's
    rows travel to the executors inside its partitions, and a batch's
    deliveries are acknowledged when Spark commits it (:meth:`commit`, which
    Spark calls once the *next* batch is planned). The offset is
    ``{"session": ID, "seq": N, "flushed": B}``: N deliveries of the consumer
    ID. After a restart, a batch of an earlier consumer cannot be read again
    (its unacknowledged messages went back to the queue when that consumer's
    connection ended, and come again, marked redelivered).

    A micro-batch takes at most half the prefetch window, so that the next
    batch (whose planning commits this one) always finds deliveries. When
    the queue is idle, one empty batch (``flushed``) follows, so that the
    last batch is committed and acknowledged without waiting for new
    messages.
    """

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._session = uuid.uuid4().hex
        self._feed: Optional[amqp.QueueFeed] = None
        #: Messages the queue held ready when the consumer started (the
        #: deliveries numbered below it were in the queue by then).
        self._ready_at_open = 0
        self._target: Optional[int] = None

    def _open(self) -> amqp.QueueFeed:
        """The consumer, started on first use."""
        if self._feed is None:
            self._feed, self._ready_at_open = call_in_reactor(
                amqp.QueueFeed.open, self.options.url, self.options.queue, self.options.prefetch
            )
        return self._feed

    def _offset(self, seq: int, flushed: bool = False) -> dict[str, Any]:
        return {"session": self._session, "seq": seq, "flushed": flushed}

    def initialOffset(self) -> dict[str, Any]:
        return self._offset(0)

    def getDefaultReadLimit(self) -> ReadLimit:
        maximum = self.options.max_per_trigger
        return ReadAllAvailable() if maximum is None else ReadMaxRows(maximum)

    def prepareForTriggerAvailableNow(self) -> None:
        self._open()
        self._target = self._ready_at_open

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        feed = self._open()
        mine = start["session"] == self._session
        base = start["seq"] if mine else 0
        end = base + max(1, self.options.prefetch // 2)
        if isinstance(limit, ReadMaxRows):
            end = min(end, base + limit.max_rows)
        if self._target is not None:
            end = min(end, self._target)
            received = call_in_reactor(feed.wait_for, end, _AVAILABLE_NOW_WAIT)
        else:
            received = call_in_reactor(lambda: feed.received)
        end = min(end, received)
        if end > base:
            return self._offset(end)
        if mine and not start["flushed"] and base > feed.acknowledged:
            return self._offset(base, flushed=True)
        return start

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        if end["session"] != self._session:
            return []
        first = start["seq"] if start["session"] == self._session else 0
        messages = call_in_reactor(self._open().between, first, end["seq"])
        shares = _shares(len(messages), self.options.partitions) if messages else []
        partitions = []
        for share in shares:
            partitions.append(Rows(message_batch(messages[:share])))
            del messages[:share]
        return partitions

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, Rows)
        return iter([partition.batch])

    def commit(self, end: dict[str, Any]) -> None:
        if end["session"] == self._session and self._feed is not None:
            call_in_reactor(self._feed.ack_through, end["seq"])

    def stop(self) -> None:
        if self._feed is not None:
            call_in_reactor(self._feed.close)
            self._feed = None


# -- writing ---------------------------------------------------------------------


@dataclass(frozen=True)
class Published(WriterCommitMessage):
    """How many messages a task published (all of them confirmed)."""

    count: int


def publish_batches(options: WriteOptions, batches: Iterator[pa.RecordBatch], id_prefix: str) -> Published:
    """Publish a message per row of *batches*, with confirms; message ids
    are ``{id_prefix}-{row number}`` unless a row's properties set one.

    A batch whose rows all take the defaults (a body column and nothing
    else set) is encoded column-wise (:meth:`BatchPublications.encoded`);
    other batches row by row. Either way every row goes out in order,
    :data:`_PUBLISH_CHUNK` rows per call into the reactor.
    """
    with fewer_collections():
        publisher = call_in_reactor(amqp.Publisher.open, options.url)
        try:
            publications = BatchPublications(
                options.exchange, options.routing_key, {"delivery_mode": options.delivery_mode},
                id_prefix, publisher.properties_class,
            )
            chunk: list[Publication] = []
            for batch in batches:
                encoded = publications.encoded(batch)
                if encoded is None:
                    for publication in publications.of(batch):
                        chunk.append(publication)
                        if len(chunk) == _PUBLISH_CHUNK:
                            call_in_reactor(publisher.publish, chunk)
                            chunk = []
                    continue
                if chunk:
                    call_in_reactor(publisher.publish, chunk)
                    chunk = []
                properties, bodies = encoded
                for start in range(0, len(bodies), _PUBLISH_CHUNK):
                    end = start + _PUBLISH_CHUNK
                    call_in_reactor(
                        publisher.publish_encoded, options.exchange, options.routing_key,
                        properties[start:end], bodies[start:end],
                    )
            if chunk:
                call_in_reactor(publisher.publish, chunk)
        finally:
            published = call_in_reactor(publisher.close)
    return Published(published)


def _partition_id() -> int:
    context = TaskContext.get()
    return 0 if context is None else context.partitionId()


class QueueWriter(DataSourceArrowWriter):
    """A batch write; message ids are ``{writeId}-{partition}-{row}``."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return publish_batches(self.options, iterator, f"{self.options.write_id}-{_partition_id()}")


class QueueStreamWriter(DataSourceStreamArrowWriter):
    """A streaming write; message ids are ``{query id}-{batch}-{partition}-{row}``,
    the same when Spark writes a batch again after a restart."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        context = TaskContext.get()
        assert context is not None
        query = context.getLocalProperty("sql.streaming.queryId")
        batch = context.getLocalProperty("streaming.sql.batchId")
        return publish_batches(self.options, iterator, f"{query}-{batch}-{context.partitionId()}")


# -- the data source -------------------------------------------------------------


class AMQPDataSource(DataSource):
    """Messages of an AMQP broker as a DataFrame, format ``"amqp09"``.

    Register it with ``spark.dataSource.register(AMQPDataSource)`` (or
    :func:`txamqp09.spark.register`); see docs/pipeline.rst for the options.
    """

    @classmethod
    def name(cls) -> str:
        return "amqp09"

    def schema(self) -> str:
        # Spark asks in the Python worker that creates the data source.
        settle_heap()
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        options = ReadOptions.parse(self.options, streaming=False)
        return StreamBatchReader(options) if options.stream else QueueBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = ReadOptions.parse(self.options, streaming=True)
        return StreamStreamReader(options) if options.stream else QueueStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return QueueWriter(WriteOptions.parse(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return QueueStreamWriter(WriteOptions.parse(self.options))
