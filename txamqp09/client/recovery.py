"""Channels that outlive their connection: topology, consumers and unconfirmed publishes recovered.

A :class:`RecoveringChannel` is a channel of a
:class:`~txamqp09.client.reconnect.ReconnectingClient`. It has the methods
of a :class:`~txamqp09.client.channel.Channel` that declare, bind, consume
and publish, and remembers what they did: when the connection is lost and
the client opens another one (to the same broker or the next address),

1. the exchanges, queues (server-named ones under a new name, see
   :class:`~txamqp09.client.events.QueueRenamed`) and bindings declared
   through any channel of the client are declared again, in the order they
   were first declared (:class:`~txamqp09.client.topology.Topology`);
2. each channel gets a new channel of the new connection with the same
   basic.qos, confirm or tx mode, and its consumers, with the same callbacks
   and consumer tags;
3. messages published in confirm mode that the lost connection did not
   confirm are published again: their Deferreds fire when the new broker
   confirms them. Delivery is at least once: a message whose confirm was
   lost with the connection reaches the queue twice.

Messages delivered on the lost connection and not acknowledged there are
delivered again by the broker. Their acknowledgements, made after the loss,
are dropped: a delivery tag of the old channel means another message, or
nothing, on the new one. Calls made while the client is between connections
wait for the next one.
"""

from __future__ import annotations

from itertools import count
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol, TypeVar

from twisted.internet.defer import Deferred, ensureDeferred, fail, maybeDeferred, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure

from txamqp09.client.base import BodyLike, ChannelState, PropertiesLike
from txamqp09.client.channel import Channel
from txamqp09.client.consumer import DEFAULT_MAX_BACKLOG, Consumer, DeliveryCallback
from txamqp09.client.errors import ChannelClosed, ChannelEnding, ClientError, ConnectionClosed
from txamqp09.client.events import RecoveryEvent, RecoveryFailed
from txamqp09.client.message import Message
from txamqp09.client.outcome import Outcome
from txamqp09.client.topology import BindingRecord, ExchangeRecord, QueueRecord, Topology

if TYPE_CHECKING:
    from txamqp09.client.connection import ClientConnection

__all__ = ["Link", "RecoveringChannel", "RecoveringConsumer"]

_log = Logger()
_T = TypeVar("_T")


def _passing(result: _T, action: Callable[..., object], *args: Any) -> _T:
    """A callback that runs *action* with *args* and passes *result* on unchanged."""
    action(*args)
    return result


class Link(Protocol):
    """What a :class:`RecoveringChannel` needs of its client."""

    topology: Topology

    @property
    def recovering(self) -> bool:
        """A lost connection will be replaced (the client runs)."""

    def report(self, event: RecoveryEvent) -> None:
        """Tell the application's listeners about *event*."""

    def forget(self, channel: RecoveringChannel) -> None:
        """*channel* was closed by the application: recover it no more."""


# -- consumers ---------------------------------------------------------------------


class RecoveringConsumer:
    """A consumer that resumes on every new channel of its :class:`RecoveringChannel`.

    Like :class:`~txamqp09.client.consumer.Consumer`: deliveries go to its
    callback, or through ``async for``, which goes on across connections and
    ends when the consumer is cancelled (by :meth:`cancel` or the broker) or
    its channel closed.

    :ivar tag: the consumer tag, the same on every connection.
    :ivar queue: the queue as the application named it.
    :ivar cancelled_by_server: the broker cancelled it (the queue was deleted).
    """

    def __init__(
        self,
        channel: RecoveringChannel,
        queue: str,
        tag: str,
        callback: Optional[DeliveryCallback],
        options: dict[str, Any],
    ) -> None:
        self.channel = channel
        self.queue = queue
        self.tag = tag
        self.cancelled_by_server = False
        self._callback = callback
        self._options = options
        #: The consumer of the current channel.
        self.current: Optional[Consumer] = None
        self._ended = False
        self._error: Optional[BaseException] = None
        self._waiting: list[Deferred[Optional[Consumer]]] = []
        self._cancel_handlers: list[Callable[[RecoveringConsumer], object]] = []

    @property
    def no_ack(self) -> bool:
        """Deliveries need no acknowledgement."""
        return bool(self._options.get("no_ack", False))

    @property
    def active(self) -> bool:
        """Not cancelled and its channel not closed."""
        return not self._ended

    def resume(self, channel: Channel, topology: Topology) -> Deferred[Consumer]:
        """Consume on *channel*, the queue under its current name."""
        started = channel.basic_consume(
            topology.name(self.queue), self._callback, consumer_tag=self.tag, **self._options
        )
        return started.addCallback(self._resumed)

    def _resumed(self, consumer: Consumer) -> Consumer:
        self.current = consumer
        consumer.onCancel(self._serverCancelled)
        self._wake(consumer)
        return consumer

    def _wake(self, consumer: Optional[Consumer]) -> None:
        waiting, self._waiting = self._waiting, []
        for waiter in waiting:
            waiter.callback(consumer)

    # -- async iteration ---------------------------------------------------------

    def __aiter__(self) -> RecoveringConsumer:
        if self._callback is not None:
            raise TypeError("a consumer with a callback cannot also be iterated")
        return self

    async def __anext__(self) -> Message:
        while True:
            consumer = self.current
            if consumer is not None:
                try:
                    return await consumer.__anext__()
                except (StopAsyncIteration, ClientError):
                    if not self._ended and not self.channel.recovers:
                        raise
            if await self._after(consumer) is None:
                if self._error is not None:
                    raise self._error
                raise StopAsyncIteration

    def _after(self, previous: Optional[Consumer]) -> Deferred[Optional[Consumer]]:
        """The consumer that replaces *previous*, or None once this one ended."""
        if self._ended:
            return succeed(None)
        if self.current is not previous:
            return succeed(self.current)
        waiter: Deferred[Optional[Consumer]] = Deferred()
        self._waiting.append(waiter)
        return waiter

    # -- ending -----------------------------------------------------------------

    def cancel(self) -> Deferred[Any]:
        """Stop the deliveries for good; fires once the broker confirmed
        (at once between connections)."""
        return self.channel.cancelConsumer(self)

    def onCancel(self, handler: Callable[[RecoveringConsumer], object]) -> None:
        """Call *handler* with this consumer when the broker cancels it."""
        self._cancel_handlers.append(handler)

    def _serverCancelled(self, consumer: Consumer) -> None:
        if consumer is not self.current or self._ended:
            return
        self.cancelled_by_server = True
        self.channel.forgetConsumer(self)
        self.end(None)
        for handler in self._cancel_handlers:
            try:
                handler(self)
            except Exception:
                _log.failure("cancel handler of consumer {tag} failed", tag=self.tag)

    def end(self, error: Optional[BaseException]) -> None:
        """No more deliveries: iteration ends (raising *error* when given)."""
        if self._ended:
            return
        self._ended = True
        self._error = error
        self._wake(None)

    def __repr__(self) -> str:
        state = "active" if self.active else "ended"
        return f"<RecoveringConsumer {self.tag!r} on {self.queue!r} ({state})>"


# -- channels ----------------------------------------------------------------------


class _Publication(Deferred[Any]):
    """A message published through a :class:`RecoveringChannel`, and the
    Deferred handed to the application for it: in confirm mode the channel's
    confirm tracker fires it."""

    def __init__(
        self, body: BodyLike, exchange: str, routing_key: str, properties: PropertiesLike,
        mandatory: bool, immediate: bool,
    ) -> None:
        super().__init__()
        self.body = body
        self.exchange = exchange
        self.routing_key = routing_key
        self.properties = properties
        self.mandatory = mandatory
        self.immediate = immediate


class RecoveringChannel:
    """A channel of a :class:`~txamqp09.client.reconnect.ReconnectingClient`
    that is opened again on every new connection (see the module's text).

    Get one with ``channel = await client.channel()``. Its methods return
    Deferreds; calls made while the client is between connections wait for
    the next one, and declarations, bindings, basic.qos, confirm_select,
    consumers and their cancellation that were under way when the connection
    was lost are made again on the next one. Other methods of
    :class:`~txamqp09.client.channel.Channel` (``basic_recover``,
    ``queue_purge``...) go to the current channel as they are and are not
    recorded. A channel the broker closes (after a publish to a missing
    exchange, say) is replaced at once on the same connection, with the same
    settings and consumers; what was pending on it fails with
    :class:`~txamqp09.client.errors.ChannelClosed`.
    """

    def __init__(self, link: Link, channel_class: type[Channel]) -> None:
        self._link = link
        self._topology = link.topology
        self._channel_class = channel_class
        #: The channel of the current connection, once restored, and that connection.
        self._channel: Optional[Channel] = None
        self._connection: Optional[ClientConnection] = None
        self._ready: Outcome[Channel] = Outcome()
        self._qos: Optional[dict[str, Any]] = None
        self._mode: Optional[str] = None
        self._consumers: dict[str, RecoveringConsumer] = {}
        self._consumer_tags = count(1)
        #: Messages a lost channel did not confirm, in publishing order, to publish again.
        self._orphans: list[_Publication] = []
        #: Messages waiting for a channel to be published on.
        self._waiting = 0
        self._closed_by: Optional[ChannelEnding] = None
        self._return_handler: Optional[Callable[[Message], object]] = None

    def __repr__(self) -> str:
        state = "closed" if self._closed_by else ("open" if self._ready.done else "waiting")
        return f"<RecoveringChannel ({state}, {len(self._consumers)} consumers)>"

    # -- state -------------------------------------------------------------------

    @property
    def current(self) -> Optional[Channel]:
        """The channel of the current connection, or None between connections."""
        return self._usable()

    @property
    def recovers(self) -> bool:
        """A lost channel will be replaced: neither this channel nor its client was closed."""
        return self._closed_by is None and self._link.recovering

    @property
    def closed_by(self) -> Optional[ChannelEnding]:
        """Why the channel was closed for good, or None."""
        return self._closed_by

    @property
    def unconfirmed(self) -> int:
        """Messages published in confirm mode and not yet confirmed (or
        refused), and messages waiting for a connection."""
        current = self._usable()
        return len(self._orphans) + self._waiting + (current.unconfirmed if current is not None else 0)

    @property
    def consumers(self) -> dict[str, RecoveringConsumer]:
        """The consumers by tag."""
        return dict(self._consumers)

    @property
    def return_handler(self) -> Optional[Callable[[Message], object]]:
        """Called with each message the broker returns (see :attr:`Channel.return_handler`)."""
        return self._return_handler

    @return_handler.setter
    def return_handler(self, handler: Optional[Callable[[Message], object]]) -> None:
        self._return_handler = handler
        if self._channel is not None:
            self._channel.return_handler = handler

    def whenReady(self) -> Deferred[RecoveringChannel]:
        """Fires with this channel once it is open on a connection."""
        return self._ready.when().addCallback(lambda _: self)

    def _usable(self) -> Optional[Channel]:
        """The current channel if it is open; notices one that ended."""
        channel = self._channel
        if channel is None:
            return None
        if channel.state is ChannelState.OPEN:
            return channel
        self._ended(channel)
        return None

    def _ended(self, channel: Channel) -> None:
        """*channel*, the current one, is gone: wait for the next, or open it."""
        if channel is not self._channel:
            return
        connection, self._channel, self._connection = self._connection, None, None
        if self._ready.done:
            self._ready = Outcome()
        if not self.recovers or isinstance(channel.closed_by, ConnectionClosed):
            # The client restores this channel on its next connection, or
            # shuts it down when it stops.
            return
        assert connection is not None
        restored = ensureDeferred(self.restore(connection))
        restored.addErrback(lambda failure: failure.trap(ConnectionClosed))

    # -- restoring ---------------------------------------------------------------

    async def restore(self, connection: ClientConnection) -> None:
        """Open a channel on *connection* with this channel's settings and
        consumers, publish again what was not confirmed, then serve the calls
        that waited.

        A consumer the broker refuses is reported and ended; a refused
        basic.qos or mode closes this channel for good.

        :raises ConnectionClosed: *connection* ended meanwhile.
        """
        while self._closed_by is None:
            channel = await connection.channel()
            channel.drop_stale_settlements = True
            channel.return_handler = self._return_handler
            try:
                if not await self._configure(channel):
                    continue
            except ChannelClosed as error:
                self._link.report(RecoveryFailed("channel settings", error))
                self.shutdown(error, clean=False)
                return
            if self._closed_by is not None:
                await channel.close()
                return
            self._channel, self._connection = channel, connection
            channel.whenClosed().addCallback(lambda _: self._ended(channel))
            if self._channel is channel:
                self._republish(channel)
                self._ready.succeed(channel)
            return

    async def _configure(self, channel: Channel) -> bool:
        """Apply qos, the mode and the consumers to *channel*; False when a
        consumer was refused (and dropped), which closed *channel*."""
        if self._qos is not None:
            await channel.basic_qos(**self._qos)
        if self._mode == "confirm":
            await self._selectConfirms(channel)
        elif self._mode == "tx":
            await channel.tx_select()
        for consumer in list(self._consumers.values()):
            try:
                await consumer.resume(channel, self._topology)
            except ChannelClosed as error:
                self._link.report(RecoveryFailed(f"consumer {consumer.tag!r} of {consumer.queue!r}", error))
                self.forgetConsumer(consumer)
                consumer.end(error)
                return False
        return True

    def _republish(self, channel: Channel) -> None:
        """Publish again, in order, what a lost channel did not confirm."""
        orphans, self._orphans = self._orphans, []
        for publication in orphans:
            self._send(channel, publication)

    def shutdown(self, ending: ChannelEnding, clean: bool = True) -> None:
        """Close for good: what waits fails with *ending*, consumers end
        (with *ending* unless *clean*)."""
        if self._closed_by is not None:
            return
        self._closed_by = ending
        if self._ready.done:
            self._ready = Outcome()
        self._ready.fail(ending)
        orphans, self._orphans = self._orphans, []
        for publication in orphans:
            publication.errback(ending)
        consumers, self._consumers = self._consumers, {}
        for consumer in consumers.values():
            consumer.end(None if clean else ending)
        self._link.forget(self)

    # -- calls -------------------------------------------------------------------

    def perform(self, operation: Callable[[Channel], Any], *, retry: bool = False) -> Deferred[Any]:
        """Run *operation* with the current :class:`Channel` now, or with the
        next one (between connections); fires with what it returns (or what
        its Deferred fires with). Nothing is recorded.

        :param retry: run it again on the next connection's channel if the
            connection is lost before it finished (for idempotent methods).
        """
        done: Deferred[Any] = Deferred()
        self._attempt(operation, retry, done)
        return done

    def _attempt(self, operation: Callable[[Channel], Any], retry: bool, done: Deferred[Any]) -> None:
        def run(channel: Channel) -> None:
            maybeDeferred(operation, channel).addCallbacks(done.callback, failed, errbackArgs=(channel,))

        def failed(failure: Failure, channel: Channel) -> None:
            if retry and self._lost(channel, failure):
                self._attempt(operation, retry, done)
            else:
                done.errback(failure)

        channel = self._usable()
        if channel is not None:
            run(channel)
        else:
            self._ready.when().addCallbacks(run, done.errback)

    def _lost(self, channel: Channel, failure: Failure) -> bool:
        """Whether *failure* is the loss of *channel*'s connection, to be recovered."""
        if not (failure.check(ConnectionClosed) and self.recovers):
            return False
        self._ended(channel)
        return True

    # -- publishing --------------------------------------------------------------

    def basic_publish(
        self,
        body: BodyLike,
        exchange: str = "",
        routing_key: str = "",
        properties: PropertiesLike = None,
        *,
        mandatory: bool = False,
        immediate: bool = False,
    ) -> Deferred[Any]:
        """Publish a message (the arguments of :meth:`Channel.basic_publish`).

        In confirm mode the Deferred fires with the message's delivery tag on
        the channel that confirmed it, on this connection or, published
        again, on a later one; it fails with
        :class:`~txamqp09.client.errors.MessageNacked` when a broker refuses
        it. Otherwise it fires with None once the message is written to a
        connection (a message written just before the connection is lost may
        be lost with it).
        """
        if self._closed_by is not None:
            return fail(self._closed_by)
        publication = _Publication(body, exchange, routing_key, properties, mandatory, immediate)
        channel = self._usable()
        if channel is not None:
            self._send(channel, publication)
        else:
            self._waiting += 1
            self._ready.when().addCallbacks(
                self._sendWaiting, self._neverSent, callbackArgs=(publication,), errbackArgs=(publication,)
            )
        return publication

    #: The same operation, under the name most clients use.
    publish = basic_publish

    def _send(self, channel: Channel, publication: _Publication) -> None:
        routing_key = publication.routing_key
        if not publication.exchange and self._topology.renamed:
            routing_key = self._topology.name(routing_key)
        try:
            confirmed = channel.basic_publish(
                publication.body, publication.exchange, routing_key, publication.properties,
                mandatory=publication.mandatory, immediate=publication.immediate, confirmation=publication,
            )
        except ClientError as error:
            if not self._handover(error, publication):
                publication.errback(error)
            return
        if confirmed is None:
            publication.callback(None)

    def _sendWaiting(self, channel: Channel, publication: _Publication) -> None:
        self._waiting -= 1
        self._send(channel, publication)

    def _neverSent(self, failure: Failure, publication: _Publication) -> None:
        self._waiting -= 1
        publication.errback(failure)

    def _handover(self, error: BaseException, deferred: Deferred[Any]) -> bool:
        """A message a lost channel did not confirm: keep it to publish again
        on the next connection (:attr:`ConfirmTracker.handover`)."""
        if not (isinstance(deferred, _Publication) and isinstance(error, ConnectionClosed) and self.recovers):
            return False
        self._orphans.append(deferred)
        return True

    def _selectConfirms(self, channel: Channel) -> Deferred[Any]:
        """confirm.select on *channel*, its unconfirmed messages handed over when it is lost."""
        selected = channel.confirm_select()
        if channel.confirms is not None:
            channel.confirms.handover = self._handover
        return selected

    # -- settings ----------------------------------------------------------------

    def basic_qos(self, prefetch_count: int = 0, *, prefetch_size: int = 0, global_: bool = False) -> Deferred[Any]:
        """basic.qos, kept for the next connections."""
        qos: dict[str, Any] = {"prefetch_count": prefetch_count, "prefetch_size": prefetch_size, "global_": global_}

        def keep(result: Any) -> Any:
            self._qos = qos
            return result

        return self.perform(lambda channel: channel.basic_qos(**qos), retry=True).addCallback(keep)

    def confirm_select(self) -> Deferred[Any]:
        """Confirm mode, on this and the next connections: :meth:`basic_publish`
        then fires when a broker confirms."""
        self._mode = "confirm"
        return self.perform(self._selectConfirms, retry=True)

    def tx_select(self) -> Deferred[Any]:
        """Transactions, on this and the next connections. A transaction under
        way when the connection is lost is lost: its commit fails."""
        self._mode = "tx"
        return self.perform(lambda channel: channel.tx_select(), retry=True)

    def tx_commit(self) -> Deferred[Any]:
        """Commit the transaction (on the current connection only)."""
        return self.perform(lambda channel: channel.tx_commit(), retry=False)

    def tx_rollback(self) -> Deferred[Any]:
        """Abandon the transaction."""
        return self.perform(lambda channel: channel.tx_rollback(), retry=False)

    # -- topology ----------------------------------------------------------------

    def exchange_declare(
        self,
        exchange: str,
        type: str = "direct",
        *,
        passive: bool = False,
        durable: bool = False,
        auto_delete: bool = False,
        internal: bool = False,
        nowait: bool = False,
        arguments: Optional[dict[str, Any]] = None,
    ) -> Deferred[Any]:
        """Declare an exchange, again on every new connection unless *passive*."""
        options: dict[str, Any] = {
            "durable": durable, "auto_delete": auto_delete, "internal": internal, "arguments": arguments or {},
        }
        declared = self.perform(
            lambda channel: channel.exchange_declare(exchange, type, passive=passive, nowait=nowait, **options),
            retry=True,
        )
        if not passive:
            declared.addCallback(_passing, self._topology.add, ExchangeRecord(exchange, type, options))
        return declared

    def queue_declare(
        self,
        queue: str = "",
        *,
        passive: bool = False,
        durable: bool = False,
        exclusive: bool = False,
        auto_delete: bool = False,
        nowait: bool = False,
        arguments: Optional[dict[str, Any]] = None,
    ) -> Deferred[Any]:
        """Declare a queue, again on every new connection unless *passive*.

        A server-named queue (*queue* empty) gets a new name on each new
        connection; the client reports it (:class:`QueueRenamed`) and its
        channels use the new name where the old one is given. With *nowait*
        a server-named queue cannot be recorded (its name is never known).
        """
        options: dict[str, Any] = {
            "durable": durable, "exclusive": exclusive, "auto_delete": auto_delete, "arguments": arguments or {},
        }

        def declare(channel: Channel) -> Deferred[Any]:
            name = self._topology.name(queue) if queue else ""
            return channel.queue_declare(name, passive=passive, nowait=nowait, **options)

        def record(ok: Any) -> Any:
            name = ok.queue if ok is not None else queue
            if name:
                self._topology.add(QueueRecord(name, not queue, options))
            return ok

        declared = self.perform(declare, retry=True)
        return declared if passive else declared.addCallback(record)

    def queue_bind(
        self, queue: str, exchange: str, routing_key: str = "", *,
        nowait: bool = False, arguments: Optional[dict[str, Any]] = None,
    ) -> Deferred[Any]:
        """Bind *queue* to *exchange*, again on every new connection."""
        return self._bind(BindingRecord("queue", queue, exchange, routing_key, arguments or {}), nowait)

    def exchange_bind(
        self, destination: str, source: str, routing_key: str = "", *,
        nowait: bool = False, arguments: Optional[dict[str, Any]] = None,
    ) -> Deferred[Any]:
        """Bind exchange *destination* to *source* (0-9-1), again on every new connection."""
        return self._bind(BindingRecord("exchange", destination, source, routing_key, arguments or {}), nowait)

    def _bind(self, binding: BindingRecord, nowait: bool) -> Deferred[Any]:
        bound = self.perform(
            lambda channel: channel.request(f"{binding.kind}.bind", nowait=nowait, **binding.fields(self._topology)),
            retry=True,
        )
        return bound.addCallback(_passing, self._topology.add, binding)

    def queue_unbind(
        self, queue: str, exchange: str, routing_key: str = "", *, arguments: Optional[dict[str, Any]] = None
    ) -> Deferred[Any]:
        """Unbind *queue* from *exchange*, and forget the binding."""
        return self._unbind(BindingRecord("queue", queue, exchange, routing_key, arguments or {}), {})

    def exchange_unbind(
        self, destination: str, source: str, routing_key: str = "", *,
        nowait: bool = False, arguments: Optional[dict[str, Any]] = None,
    ) -> Deferred[Any]:
        """Unbind exchange *destination* from *source*, and forget the binding."""
        return self._unbind(
            BindingRecord("exchange", destination, source, routing_key, arguments or {}), {"nowait": nowait}
        )

    def _unbind(self, binding: BindingRecord, extra: dict[str, Any]) -> Deferred[Any]:
        unbound = self.perform(
            lambda channel: channel.request(f"{binding.kind}.unbind", **extra, **binding.fields(self._topology)),
            retry=True,
        )
        return unbound.addCallback(_passing, self._topology.forget_binding, binding)

    def queue_delete(
        self, queue: str, *, if_unused: bool = False, if_empty: bool = False, nowait: bool = False
    ) -> Deferred[Any]:
        """Delete *queue*, and forget it and its bindings."""
        deleted = self.perform(
            lambda channel: channel.request(
                "queue.delete", queue=self._topology.name(queue), if_unused=if_unused, if_empty=if_empty,
                nowait=nowait,
            ),
            retry=True,
        )
        return deleted.addCallback(_passing, self._topology.forget_queue, queue)

    def exchange_delete(self, exchange: str, *, if_unused: bool = False, nowait: bool = False) -> Deferred[Any]:
        """Delete *exchange*, and forget it and the bindings from or to it."""
        deleted = self.perform(
            lambda channel: channel.request("exchange.delete", exchange=exchange, if_unused=if_unused, nowait=nowait),
            retry=True,
        )
        return deleted.addCallback(_passing, self._topology.forget_exchange, exchange)

    def queue_purge(self, queue: str, *, nowait: bool = False) -> Deferred[Any]:
        """Purge *queue* (on the current connection only)."""
        return self.perform(
            lambda channel: channel.request("queue.purge", queue=self._topology.name(queue), nowait=nowait),
            retry=False,
        )

    def basic_get(self, queue: str = "", *, no_ack: bool = False) -> Deferred[Optional[Message]]:
        """Fetch one message from *queue*, or None when it is empty."""
        return self.perform(
            lambda channel: channel.basic_get(self._topology.name(queue), no_ack=no_ack), retry=False
        )

    # -- consumers ---------------------------------------------------------------

    def basic_consume(
        self,
        queue: str = "",
        callback: Optional[DeliveryCallback] = None,
        *,
        no_ack: bool = False,
        exclusive: bool = False,
        no_local: bool = False,
        consumer_tag: str = "",
        arguments: Optional[dict[str, Any]] = None,
        max_backlog: int = DEFAULT_MAX_BACKLOG,
    ) -> Deferred[RecoveringConsumer]:
        """Consume *queue*, on this and every new connection; fires with the
        :class:`RecoveringConsumer` (the arguments of :meth:`Channel.basic_consume`).

        The consumer keeps its tag (one is made up when *consumer_tag* is
        empty) and its callback on every connection.
        """
        tag = consumer_tag or f"txamqp09.recovering.{next(self._consumer_tags)}"
        if tag in self._consumers:
            return fail(ValueError(f"consumer tag {tag!r} is in use on this channel"))
        options: dict[str, Any] = {
            "no_ack": no_ack, "exclusive": exclusive, "no_local": no_local, "arguments": arguments or {},
            "max_backlog": max_backlog,
        }
        consumer = RecoveringConsumer(self, queue, tag, callback, options)

        def started(_: Consumer) -> RecoveringConsumer:
            self._consumers[tag] = consumer
            return consumer

        resumed = self.perform(lambda channel: consumer.resume(channel, self._topology), retry=True)
        return resumed.addCallback(started)

    def cancelConsumer(self, consumer: RecoveringConsumer) -> Deferred[Any]:
        """Cancel *consumer* for good; fires once the broker confirmed."""
        self.forgetConsumer(consumer)
        current = consumer.current
        consumer.end(None)
        if current is None or not current.active or self._usable() is not current.channel:
            return succeed(None)
        return current.cancel()

    def forgetConsumer(self, consumer: RecoveringConsumer) -> None:
        """Resume *consumer* no more."""
        if self._consumers.get(consumer.tag) is consumer:
            del self._consumers[consumer.tag]

    # -- the rest ----------------------------------------------------------------

    def close(self, reply_code: int = 200, reply_text: str = "normal shutdown") -> Deferred[Any]:
        """Close the channel for good: what waits fails, consumers end,
        unconfirmed messages fail with :class:`ChannelClosed`."""
        if self._closed_by is not None:
            return succeed(None)
        channel = self._usable()
        self.shutdown(ChannelClosed(reply_code, f"{reply_text} (closed by the client)"))
        if channel is None:
            return succeed(None)
        return channel.close(reply_code, reply_text)

    def __getattr__(self, name: str) -> Callable[..., Deferred[Any]]:
        """Another method of :class:`Channel`, run on the current channel and not recorded."""
        if name.startswith("_") or not callable(getattr(self._channel_class, name, None)):
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

        def call(*args: Any, **kwargs: Any) -> Deferred[Any]:
            return self.perform(lambda channel: getattr(channel, name)(*args, **kwargs), retry=False)

        call.__name__ = name
        return call
