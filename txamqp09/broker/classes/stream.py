"""The stream class (0-8, 0-9): lossy, unacknowledged streaming.

A stream consumer takes every message its queue offers at once (nothing
waits in the queue for it, so publishers are never held back by it) into
the channel's stream backlog. The backlog is sent as fast as the connection
takes it and, when stream.qos set a consume-rate, no faster than that many
octets per second. A backlog holds at most prefetch-count messages and
prefetch-size octets (:data:`DEFAULT_BACKLOG` messages when neither is set);
a message arriving at a full backlog makes room by dropping the queued
message of lowest priority (the oldest among equals), or is itself dropped
when its priority is the lowest. Deliveries need no acknowledgement.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

from twisted.internet.interfaces import IDelayedCall

from txamqp09.broker.classes.common import (
    TRANSIENT,
    ClassSession,
    DeliveringState,
    basic_message,
    from_basic,
    to_basic,
)
from txamqp09.broker.classes.registry import register
from txamqp09.broker.model import Consumer, Message
from txamqp09.wire.frames import Command

if TYPE_CHECKING:
    from txamqp09.wire import methods

__all__ = ["DEFAULT_BACKLOG", "StreamState"]

#: Messages a stream backlog holds when stream.qos set no limit.
DEFAULT_BACKLOG = 1000


class _Pending(NamedTuple):
    consumer: Consumer
    delivery_tag: int
    message: Message
    priority: int


class _StreamSession(ClassSession):
    """A session whose consumers take messages even while the connection is
    busy: the backlog, not the queue, absorbs (and drops) them."""

    def update_sending(self) -> None:
        self.sending = self.flow_active and not self.closed
        state = self.sink
        if isinstance(state, StreamState):
            state.pump()


@register
class StreamState(DeliveringState):
    """The stream class on one channel.

    :ivar dropped: messages dropped from the backlog since the channel opened.
    """

    AMQP_CLASS = "stream"

    def __init__(self, channel: Any) -> None:
        self._backlog: deque[_Pending] = deque()
        self._backlog_bytes = 0
        self._limits = (DEFAULT_BACKLOG, 0)
        #: Octets per second (0: as fast as the connection goes).
        self._rate = 0
        #: Octets the rate allows now (negative: a debt to wait out).
        self._allowance = 0.0
        self._last_time = 0.0
        self._timer: Optional[IDelayedCall] = None
        self.dropped = 0
        super().__init__(channel)

    def new_session(self) -> ClassSession:
        return _StreamSession(self.channel.session, self)

    # -- methods -----------------------------------------------------------------

    def stream_qos(self, method: methods.StreamQos) -> None:
        """Set the backlog's limits and the consume rate."""
        count, size = method.prefetch_count, method.prefetch_size
        self._limits = (count, size) if count or size else (DEFAULT_BACKLOG, 0)
        self._rate = method.consume_rate
        self._allowance = 0.0
        self._last_time = self.channel.clock.seconds()
        self.reply("stream.qos-ok")
        self.pump()

    def stream_consume(self, method: methods.StreamConsume) -> None:
        """Start a stream consumer (deliveries are never acknowledged)."""
        self.consume(
            method, method.consumer_tag, no_ack=True,
            answer=None if method.nowait else "stream.consume-ok",
        )

    def stream_cancel(self, method: methods.StreamCancel) -> None:
        """End a stream consumer and drop its backlog."""
        consumer = self.session.cancel(method.consumer_tag)
        if consumer is not None:
            kept = [pending for pending in self._backlog if pending.consumer is not consumer]
            self._backlog = deque(kept)
            self._backlog_bytes = sum(pending.message.size for pending in kept)
        if not method.nowait:
            self.reply("stream.cancel-ok", consumer_tag=method.consumer_tag)

    def stream_publish(self, command: Command[methods.StreamPublish]) -> None:
        """Publish a stream message (transient)."""
        method = command.method
        raw = to_basic(command.properties, self.channel.version.properties[60], delivery_mode=TRANSIENT)
        message = basic_message(self.channel, method.exchange, method.routing_key, raw, command.body)
        self.publish(method.exchange, message, method.mandatory, method.immediate)

    # -- the backlog -----------------------------------------------------------

    def deliver(self, consumer: Consumer, delivery_tag: int, redelivered: bool, message: Message) -> None:
        """Add *message* to the backlog (dropping one if it is full) and send what may go."""
        priority = message.properties.priority or 0  # type: ignore[attr-defined]
        pending = _Pending(consumer, delivery_tag, message, priority)
        count, size = self._limits
        while self._backlog and (
            (count and len(self._backlog) >= count)
            or (size and self._backlog_bytes + message.size > size)
        ):
            victim = min(self._backlog, key=lambda each: each.priority)
            if victim.priority > priority:
                self.dropped += 1
                return
            self._backlog.remove(victim)
            self._backlog_bytes -= victim.message.size
            self.dropped += 1
        self._backlog.append(pending)
        self._backlog_bytes += message.size
        self.pump()

    def pump(self) -> None:
        """Send backlog messages while the connection and the rate allow."""
        if self._timer is not None or not self._backlog:
            return
        client = self.channel.client
        session = self.session
        while self._backlog and client.writable and session.sending:
            if self._rate:
                now = self.channel.clock.seconds()
                self._allowance = min(
                    self._allowance + (now - self._last_time) * self._rate, float(self._rate)
                )
                self._last_time = now
                if self._allowance < 0:
                    self._timer = self.channel.clock.callLater(
                        -self._allowance / self._rate, self._timerFired
                    )
                    return
            pending = self._backlog.popleft()
            message = pending.message
            self._backlog_bytes -= message.size
            self._allowance -= message.size
            self.send_content(
                "stream.deliver", from_basic(message, self.channel.spec.StreamProperties),
                message.body or b"", consumer_tag=pending.consumer.tag,
                delivery_tag=pending.delivery_tag, exchange=message.exchange,
                queue=pending.consumer.queue.name,
            )

    def _timerFired(self) -> None:
        self._timer = None
        self.channel.batch.enter()
        try:
            self.pump()
        finally:
            self.channel.batch.leave()

    def interrupted(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        self._backlog.clear()
        super().interrupted()
