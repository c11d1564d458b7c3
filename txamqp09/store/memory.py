"""A store that keeps everything in memory: for tests and for brokers that
need no durability. Reusing one instance across broker restarts in a test
simulates a restart with nothing lost."""

from __future__ import annotations

import json
from bisect import bisect_right
from typing import Any, Callable, Optional, Sequence

from twisted.internet.defer import Deferred, succeed
from zope.interface import implementer

from txamqp09.store.interface import (
    DurableBinding,
    DurableExchange,
    DurableQueue,
    IMessageStore,
    LogChunk,
    LogSegment,
    Recovered,
    Settings,
    StoredMessage,
)

__all__ = ["MemoryStore"]


@implementer(IMessageStore)
class MemoryStore:
    """A :class:`~txamqp09.store.interface.IMessageStore` in dictionaries;
    every operation is durable as soon as it is made."""

    def __init__(self) -> None:
        self.exchanges: dict[tuple[str, str], DurableExchange] = {}
        self.queues: dict[tuple[str, str], DurableQueue] = {}
        self.bindings: set[DurableBinding] = set()
        self.messages: dict[tuple[str, str], dict[int, StoredMessage]] = {}
        self.spilled: dict[int, bytes] = {}
        #: Each stream's log chunks, in offset order (the chunks the streams
        #: fill: memory holds each message as soon as it is added).
        self.logs: dict[tuple[str, str], list[LogChunk]] = {}
        #: The settings, each kept as JSON text (as the SQLite store does).
        self.settings: dict[str, dict[str, str]] = {}
        self._sequence = 0
        self._next_id = 1

    def _done(self) -> int:
        self._sequence += 1
        return self._sequence

    def open(self, body_budget: Optional[int] = None) -> Recovered:
        self.spilled.clear()
        left = body_budget
        recovered = Recovered(
            exchanges=list(self.exchanges.values()),
            queues=list(self.queues.values()),
            bindings=list(self.bindings),
            next_message_id=self._next_id,
            settings=self._settings(),
        )
        end = None
        if left is not None:
            sizes = {i: m.size for messages in self.messages.values() for i, m in messages.items()}
            for message_id in sorted(sizes):
                left -= sizes[message_id]
                if left < 0:
                    end = message_id
                    break
        for key, messages in sorted(self.messages.items()):
            kept = recovered.messages[key] = []
            for message_id, m in sorted(messages.items()):
                body = m.body if end is None or message_id < end else None
                kept.append(
                    StoredMessage(
                        m.message_id, m.exchange, m.routing_key, m.raw_properties, body, m.size, True,
                        m.published,
                    )
                )
        for key, chunks in self.logs.items():
            if key in self.queues:
                recovered.logs[key] = _segments(chunks)
        return recovered

    def add_exchange(self, exchange: DurableExchange) -> int:
        self.exchanges[(exchange.vhost, exchange.name)] = exchange
        return self._done()

    def remove_exchange(self, vhost: str, name: str) -> int:
        self.exchanges.pop((vhost, name), None)
        self.bindings = {
            b
            for b in self.bindings
            if b.vhost != vhost
            or (b.source != name and not (b.destination == name and b.destination_kind == "exchange"))
        }
        return self._done()

    def add_queue(self, queue: DurableQueue) -> int:
        self.queues[(queue.vhost, queue.name)] = queue
        self.messages.setdefault((queue.vhost, queue.name), {})
        return self._done()

    def remove_queue(self, vhost: str, name: str) -> int:
        self.queues.pop((vhost, name), None)
        self.messages.pop((vhost, name), None)
        self.logs.pop((vhost, name), None)
        self.bindings = {
            b
            for b in self.bindings
            if not (b.vhost == vhost and b.destination == name and b.destination_kind == "queue")
        }
        return self._done()

    def add_binding(self, binding: DurableBinding) -> int:
        self.bindings.add(binding)
        return self._done()

    def remove_binding(self, binding: DurableBinding) -> int:
        self.bindings.discard(binding)
        return self._done()

    def publish(self, message: StoredMessage, queues: Sequence[tuple[str, str]]) -> int:
        for key in queues:
            self.messages.setdefault(key, {})[message.message_id] = message
        self._next_id = max(self._next_id, message.message_id + 1)
        return self._done()

    def remove(self, vhost: str, queue: str, message_ids: Sequence[int]) -> int:
        messages = self.messages.get((vhost, queue), {})
        for message_id in message_ids:
            messages.pop(message_id, None)
        return self._done()

    def spill(self, message_id: int, body: bytes) -> int:
        self.spilled[message_id] = body
        return self._done()

    def unspill(self, message_ids: Sequence[int]) -> int:
        for message_id in message_ids:
            self.spilled.pop(message_id, None)
        return self._done()

    def read(self, message_ids: Sequence[int]) -> dict[int, bytes]:
        wanted = set(message_ids)
        bodies = {
            message_id: message.body
            for messages in self.messages.values()
            for message_id, message in messages.items()
            if message_id in wanted and message.body is not None
        }
        bodies.update((i, self.spilled[i]) for i in wanted if i in self.spilled)
        return bodies

    def append_log(self, vhost: str, queue: str, chunk: LogChunk) -> int:
        self.logs.setdefault((vhost, queue), []).append(chunk)
        return self._done()

    def _chunks_from(self, vhost: str, queue: str, start: int) -> list[LogChunk]:
        """A log's chunks from the one holding offset *start* on (all of them
        when *start* was removed)."""
        chunks = [chunk for chunk in self.logs.get((vhost, queue), []) if chunk.count]
        firsts = [chunk.first for chunk in chunks]
        return chunks[max(bisect_right(firsts, start) - 1, 0) :]

    def read_log(self, vhost: str, queue: str, start: int) -> Optional[LogChunk]:
        chunks = self._chunks_from(vhost, queue, start)
        for chunk in chunks:
            if chunk.end > start:
                return chunk
        return None

    def log_offset_at(self, vhost: str, queue: str, timestamp: int, start: int) -> Optional[int]:
        for chunk in self._chunks_from(vhost, queue, start):
            if chunk.end > start and chunk.last_timestamp >= timestamp:
                return chunk.first + chunk.index_at(timestamp, max(start - chunk.first, 0))
        return None

    def truncate_log(self, vhost: str, queue: str, first: int) -> int:
        chunks = self.logs.get((vhost, queue), [])
        chunks[:] = [chunk for chunk in chunks if chunk.first >= first]
        return self._done()

    def _settings(self) -> Settings:
        return {
            kind: {key: json.loads(text) for key, text in entries.items()}
            for kind, entries in self.settings.items()
        }

    def put_setting(self, kind: str, key: str, value: Any) -> int:
        self.settings.setdefault(kind, {})[key] = json.dumps(value)
        return self._done()

    def remove_setting(self, kind: str, key: str) -> int:
        self.settings.get(kind, {}).pop(key, None)
        return self._done()

    def add_durable_listener(self, listener: Callable[[int], None]) -> None:
        """Never called: every operation is durable when it returns."""

    @property
    def last_sequence(self) -> int:
        return self._sequence

    @property
    def durable_sequence(self) -> int:
        return self._sequence

    def when_durable(self, sequence: int) -> Deferred[None]:
        return succeed(None)

    def failed_between(self, after: int, upto: int) -> bool:
        """Never: memory takes every write."""
        return False

    def add_failure_listener(self, listener: Callable[[Optional[str]], None]) -> None:
        """Never called: memory takes every write."""

    def close(self) -> Deferred[None]:
        return succeed(None)


def _segments(chunks: Sequence[LogChunk]) -> list[LogSegment]:
    """The segments of a log's *chunks* (in offset order)."""
    segments: list[LogSegment] = []
    current = -1
    for chunk in chunks:
        if not chunk.count:
            continue
        if chunk.segment != current:
            current = chunk.segment
            segments.append(LogSegment(chunk.first, chunk.first, chunk.first_timestamp, 0, 0))
        segment = segments[-1]
        segment.last = chunk.end - 1
        segment.last_timestamp = chunk.last_timestamp
        segment.size += chunk.size
    return segments
