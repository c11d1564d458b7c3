"""One shovel at work, dynamic or static: consume at the source, publish to the destination.

A :class:`Shovel` connects to its source and its destination (the first of
each end's URIs that answers), declares what its definition names, and
forwards every message. With ``ack-mode`` ``on-confirm`` (the default) the
destination is in confirm mode and a message is acknowledged at the source
only once the destination confirmed it; a message the destination refuses
(basic.nack) goes back to the source queue. At most ``src-prefetch-count``
messages are in flight, so a destination that is slow, blocks its
publishers (connection.blocked) or refuses messages holds the source back
instead of filling memory. ``on-publish`` acknowledges once the message is
sent, ``no-ack`` consumes without acknowledgements (the consumer stops
reading from the source while the destination cannot take more).

When either connection or channel ends, the shovel closes both (what was
not acknowledged at the source is delivered again: duplicates, never a
loss), reports ``terminated`` with the reason, waits (:class:`Backoff` from
``reconnect-delay``) and starts again. ``reconnect-delay`` 0 means it stays
terminated, as in RabbitMQ. With ``src-delete-after`` it stops once it has
moved that many messages (or the queue's length at start) and asks its
owner to remove it.

Its status (:meth:`Shovel.status`) is RabbitMQ's: ``starting``, ``running``
with the URIs (without credentials) and the source and destination, or
``terminated`` with the reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Optional, Union

from twisted.internet.defer import CancelledError, Deferred, ensureDeferred
from twisted.internet.task import deferLater
from twisted.logger import Logger
from twisted.python.failure import Failure

from txamqp09.client import ClientConnection, Message
from txamqp09.client.channel import Channel
from txamqp09.client.errors import ClientError, ConnectionClosed, MessageNacked
from txamqp09.links.link import Backoff, connect_first, describe, ensure_queue
from txamqp09.links.uri import LinkUri, LocalAddress
from txamqp09.shovel.definition import ShovelDefinition

__all__ = ["STARTING", "RUNNING", "TERMINATED", "Shovel"]

STARTING = "starting"
RUNNING = "running"
TERMINATED = "terminated"
#: Header listing the shovels a message went through (RabbitMQ's).
FORWARD_HEADER = "x-shovelled"
TIMESTAMP_HEADER = "x-shovelled-timestamp"


class _Ended(Exception):
    """The shovel's session ended; the message is the reason."""


class _Completed(Exception):
    """``src-delete-after`` reached: the shovel has moved all it should."""


def _timestamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


class Shovel:
    """One shovel (see the module's text).

    :param clock: the reactor (connections and timers).
    :param local: where this broker listens for AMQP, for URIs without a host.
    :param shovelled_by: the name the ``x-shovelled`` header gives this broker.
    :param completed: called with this shovel once ``src-delete-after`` is reached.
    """

    log = Logger()

    def __init__(
        self,
        clock: Any,
        vhost: Optional[str],
        name: str,
        definition: ShovelDefinition,
        local: Callable[[], Optional[LocalAddress]],
        shovelled_by: str,
        completed: Callable[[Shovel], object],
    ) -> None:
        self.clock = clock
        self.vhost = vhost
        self.name = name
        self.definition = definition
        self.local = local
        self.shovelled_by = shovelled_by
        self.completed = completed
        self.state = STARTING
        self.reason = ""
        self.changed = time.time()
        self.src_uri: Optional[LinkUri] = None
        self.dest_uri: Optional[LinkUri] = None
        self._connections: list[ClientConnection] = []
        self._stopping = False
        self._run: Optional[Deferred[None]] = None
        self._wait: Optional[Deferred[Any]] = None
        self._ended: Optional[Deferred[None]] = None
        self._dest: Optional[Channel] = None
        self._source: Optional[Channel] = None
        #: Messages received and not yet published (published together, once
        #: the delivery that brought them has been read).
        self._batch: list[Message] = []
        #: Both ends speak the same protocol version: properties pass as received.
        self._same_version = False
        self._remaining: Optional[int] = None
        self._unsettled = 0
        self._sources = 0
        self._destinations = 0
        self._forward_table: dict[str, Any] = {}

    @property
    def in_flight(self) -> int:
        """Messages published to the destination and not confirmed yet (``on-confirm``)."""
        return self._unsettled

    @property
    def kind(self) -> str:
        """RabbitMQ's shovel type: ``dynamic`` (a parameter of a vhost) or ``static``."""
        return "static" if self.vhost is None else "dynamic"

    @property
    def label(self) -> str:
        """``'name' in virtual host 'vhost'`` (``static 'name'``), for the log."""
        if self.vhost is None:
            return f"static '{self.name}'"
        return f"'{self.name}' in virtual host '{self.vhost}'"

    # -- life cycle ----------------------------------------------------------------

    def start(self) -> None:
        """Start moving messages (and keep at it until :meth:`stop`)."""
        self._run = ensureDeferred(self._keep_running())

    def stop(self) -> Deferred[None]:
        """Stop: close both connections; fires once the shovel is idle."""
        self._stopping = True
        for waiting in (self._wait, self._ended):
            if waiting is not None and not waiting.called:
                waiting.cancel()
        self._drop_connections()
        run = self._run
        done: Deferred[None] = Deferred()
        if run is None or run.called:
            done.callback(None)
        else:
            run.addBoth(lambda _: done.callback(None))
        return done

    async def _keep_running(self) -> None:
        backoff = Backoff(self.definition.reconnect_delay)
        while not self._stopping:
            self._report(STARTING)
            try:
                await self._session(backoff)
            except _Completed:
                self._drop_connections()
                self.log.info("shovel {shovel} moved what src-delete-after asked and is removed", shovel=self.label)
                self.completed(self)
                return
            except CancelledError:
                pass
            except Exception as error:
                if not self._stopping:
                    reason = describe(error)
                    self._report(TERMINATED, reason)
                    self.log.warn("shovel {shovel} stopped: {reason}", shovel=self.label, reason=reason)
            self._drop_connections()
            if self._stopping or self.definition.reconnect_delay <= 0:
                return
            self._wait = deferLater(self.clock, backoff.next(), lambda: None)
            try:
                await self._wait
            except CancelledError:
                return

    def _report(self, state: str, reason: str = "") -> None:
        self.state, self.reason, self.changed = state, reason, time.time()

    def _drop_connections(self) -> None:
        connections, self._connections = self._connections, []
        for connection in connections:
            connection.dropConnection(abort=False)

    # -- one session: connect, declare, forward until something ends ----------------

    async def _session(self, backoff: Backoff) -> None:
        definition = self.definition
        source, self.src_uri = await connect_first(
            self.clock, definition.src_uris, self.local, f"Shovel {self.name}", self._sources)
        self._sources += 1
        self._connections.append(source)
        destination, self.dest_uri = await connect_first(
            self.clock, definition.dest_uris, self.local, f"Shovel {self.name}", self._destinations)
        self._destinations += 1
        self._connections.append(destination)
        if self._stopping:
            raise CancelledError()
        ended = self._ended = Deferred()
        try:
            await self._forward_until(ended, source, destination, backoff)
        finally:
            # The session may end before it waits on *ended*: its failure is known.
            ended.addErrback(lambda _: None)

    async def _forward_until(
        self, ended: Deferred[None], source: ClientConnection, destination: ClientConnection, backoff: Backoff,
    ) -> None:
        """Declare, consume, and forward until *ended* fires."""
        definition = self.definition
        assert self.src_uri is not None and self.dest_uri is not None
        for connection, end in ((source, "source"), (destination, "destination")):
            connection.whenClosed().addCallback(self._closed, ended, end)
        self._dest = await self._open_destination(destination, ended)
        self._same_version = source.version is destination.version
        self._batch = []
        source_channel, queue, length = await self._open_source(source, ended)
        self._source = source_channel
        self._remaining = self._to_move(length)
        if self._remaining == 0:
            raise _Completed()
        self._unsettled = 0
        self._forward_table = self._forward_headers()
        await source_channel.basic_consume(
            queue, self._forward, no_ack=definition.ack_mode == "no-ack",
            arguments=dict(definition.src_consumer_args),
        )
        self._report(RUNNING)
        backoff.reset()
        self.log.info("shovel {shovel} running from {source} to {destination}", shovel=self.label,
                      source=self.src_uri.redacted, destination=self.dest_uri.redacted)
        await ended

    def _closed(self, closed: Any, ended: Deferred[None], end: str) -> None:
        """A connection or channel of the session *ended*, at the *end*
        (``source`` or ``destination``), closed with *closed*."""
        what = "connection failed" if isinstance(closed, ConnectionClosed) else "channel closed"
        if not ended.called:
            ended.errback(Failure(_Ended(f"{end} {what}: {describe(closed)}")))

    async def _open_destination(self, connection: ClientConnection, ended: Deferred[None]) -> Channel:
        definition = self.definition
        if definition.dest_queue is not None:
            await ensure_queue(connection, definition.dest_queue, dict(definition.dest_queue_args))
        channel = await connection.channel()
        channel.whenClosed().addCallback(self._closed, ended, "destination")
        if definition.ack_mode == "on-confirm":
            await channel.confirm_select()
        return channel

    async def _open_source(self, connection: ClientConnection, ended: Deferred[None]) -> tuple[Channel, str, int]:
        """The source channel, the queue to consume and its length now."""
        definition = self.definition
        if definition.src_queue is not None:
            declared = await ensure_queue(connection, definition.src_queue, dict(definition.src_queue_args))
        channel = await connection.channel()
        channel.whenClosed().addCallback(self._closed, ended, "source")
        if definition.src_queue is None:
            declared = await channel.queue_declare("", exclusive=True)
            await channel.request("queue.bind", queue=declared.queue, exchange=definition.src_exchange,
                                  routing_key=definition.src_exchange_key, arguments={})
        if definition.ack_mode != "no-ack":
            prefetch = definition.prefetch_count
            if isinstance(definition.delete_after, int):
                prefetch = min(prefetch, definition.delete_after)
            await channel.basic_qos(prefetch)
        return channel, declared.queue, declared.message_count

    def _to_move(self, length: int) -> Optional[int]:
        """How many messages this session moves before the shovel is done (None: no end)."""
        delete_after: Union[str, int] = self.definition.delete_after
        if delete_after == "queue-length":
            return length
        if isinstance(delete_after, int):
            return delete_after
        return None

    # -- forwarding ----------------------------------------------------------------

    def _forward(self, message: Message) -> Optional[Deferred[None]]:
        """Publish *message* to the destination; settle it at the source as
        the ack mode says. Returns a Deferred (holding the consumer back)
        while the destination's connection cannot take more."""
        destination = self._dest
        if destination is None or self._stopping:
            return None
        if self._remaining is not None:
            if self._remaining <= 0:
                self._settle(message, requeue=True)
                return None
            self._remaining -= 1
        self._batch.append(message)
        if len(self._batch) == 1:
            self.clock.callLater(0, self._publish_batch, destination)
        if not destination.connection.writable:
            return destination.connection.whenWritable()
        return None

    def _publish_batch(self, destination: Channel) -> None:
        """Publish what arrived since the last batch, with one write (and, in
        ``on-confirm`` mode, one confirmation for the lot)."""
        batch, self._batch = self._batch, []
        if destination is not self._dest or not batch:
            return
        target, properties = self._target, self._properties
        try:
            published = destination.basic_publish_many(
                [(message.body, *target(message), properties(message)) for message in batch]
            )
        except ClientError:
            return
        if self.definition.ack_mode == "on-confirm" and published is not None:
            self._unsettled += len(batch)
            published.addCallbacks(self._confirmed, self._refused, (batch,), errbackArgs=(batch,))
            return
        if self.definition.ack_mode == "on-publish":
            for message in batch:
                self._settle(message)
        self._moved()

    def _target(self, message: Message) -> tuple[str, str]:
        definition = self.definition
        if definition.dest_queue is not None:
            return "", definition.dest_queue
        exchange = definition.dest_exchange if definition.dest_exchange is not None else message.exchange
        key = definition.dest_exchange_key if definition.dest_exchange_key is not None else message.routing_key
        return exchange, key

    def _properties(self, message: Message) -> Any:
        definition = self.definition
        if not (definition.publish_properties or definition.add_forward_headers or definition.add_timestamp_header):
            return message.raw_properties if self._same_version else message.properties
        fields = {name: value for name, value in message.properties.fields().items() if value is not None}
        fields.update(definition.publish_properties)
        headers = dict(fields.get("headers") or {})
        if definition.add_forward_headers:
            headers[FORWARD_HEADER] = [self._forward_table, *headers.get(FORWARD_HEADER, [])]
        if definition.add_timestamp_header:
            headers[TIMESTAMP_HEADER] = int(time.time())
        if headers:
            fields["headers"] = headers
        return fields

    def _forward_headers(self) -> dict[str, Any]:
        """The table this shovel adds to ``x-shovelled`` (RabbitMQ's keys)."""
        definition = self.definition
        assert self.src_uri is not None and self.dest_uri is not None
        table: dict[str, Any] = {
            "shovelled-by": self.shovelled_by, "shovel-type": self.kind, "shovel-name": self.name,
            "shovel-vhost": self.vhost, "src-uri": self.src_uri.redacted, "dest-uri": self.dest_uri.redacted,
        }
        if self.vhost is None:
            del table["shovel-vhost"]
        if definition.src_queue is not None:
            table["src-queue"] = definition.src_queue
        else:
            table.update({"src-exchange": definition.src_exchange, "src-exchange-key": definition.src_exchange_key})
        for key, value in (("dest-exchange", definition.dest_exchange),
                           ("dest-exchange-key", definition.dest_exchange_key),
                           ("dest-queue", definition.dest_queue)):
            if value is not None:
                table[key] = value
        return table

    def _confirmed(self, _: Any, batch: list[Message]) -> None:
        if batch[0].channel is not self._source:
            return
        self._unsettled -= len(batch)
        for message in batch:
            self._settle(message)
        self._moved()

    def _refused(self, failure: Failure, batch: list[Message]) -> None:
        """The destination nacked a message of *batch*: the whole batch goes
        back to the source queue (those it took arrive twice); or its
        connection ended (the session ends and the source redelivers)."""
        if batch[0].channel is not self._source:
            failure.trap(ClientError)
            return
        self._unsettled -= len(batch)
        if failure.check(MessageNacked):
            if self._remaining is not None:
                self._remaining += len(batch)
            for message in batch:
                self._settle(message, requeue=True)
        else:
            failure.trap(ClientError)

    def _settle(self, message: Message, requeue: Optional[bool] = None) -> None:
        if self.definition.ack_mode == "no-ack":
            return
        try:
            if requeue is None:
                message.ack()
            else:
                message.nack(requeue=requeue)
        except ClientError:
            # The source connection is gone: it redelivers the message.
            pass

    def _moved(self) -> None:
        ended = self._ended
        if self._remaining is not None and self._remaining <= 0 and self._unsettled == 0:
            if ended is not None and not ended.called:
                ended.errback(Failure(_Completed()))

    # -- status ----------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The shovel's status as RabbitMQ's ``/api/shovels`` shows it
        (without ``node``; a static one has no ``vhost``)."""
        row: dict[str, Any] = {
            "timestamp": _timestamp(self.changed), "name": self.name, "vhost": self.vhost,
            "type": self.kind, "state": self.state,
        }
        if self.vhost is None:
            del row["vhost"]
        if self.state == TERMINATED:
            row["reason"] = '"' + self.reason.replace('"', '\\"') + '"'
        elif self.state == RUNNING and self.src_uri is not None and self.dest_uri is not None:
            definition = self.definition
            row.update({
                "src_uri": self.src_uri.redacted, "src_protocol": "amqp091",
                "dest_protocol": "amqp091", "dest_uri": self.dest_uri.redacted,
            })
            details = {
                "src_queue": definition.src_queue, "src_exchange": definition.src_exchange,
                "src_exchange_key": definition.src_exchange_key if definition.src_exchange is not None else None,
                "dest_queue": definition.dest_queue, "dest_exchange": definition.dest_exchange,
                "dest_exchange_key": definition.dest_exchange_key,
            }
            row.update({key: value for key, value in details.items() if value is not None})
        return row
