"""Federation links: one per federated exchange or queue and upstream.

A link connects to its upstream with this project's client
(:mod:`txamqp09.client`), one URI of the upstream after another, and
reconnects ``reconnect-delay`` seconds after a failure. What arrives is
republished into the downstream virtual host through a model session of
the link's own (as a client's publish, without a network hop), and
acknowledged at the upstream by ``ack-mode``: ``on-confirm`` once the
message is on disk here (at once for a transient one), ``on-publish`` once
it is routed, ``no-ack`` never (the upstream forgets it as it sends it).

While this broker is low on memory or disk (a resource alarm, which blocks
its publishers), a link :meth:`holds <Link.hold>` what arrives instead of
republishing it, as RabbitMQ's blocked publishers hold a link's messages:
each held message keeps its consumer's callback unfinished, so the upstream
stops at the prefetch window (``ack-mode`` other than ``no-ack``) and the
client stops reading the upstream's socket once a thousand are held. The
held messages are republished, in order, once every alarm has cleared.

:class:`ExchangeLink` federates an exchange the way RabbitMQ 3.10 does: on
the upstream it declares the queue ``federation: {exchange} -> {cluster
name}`` (with ``:{exchange}`` or ``:{vhost}:{exchange}`` when the names
differ), an internal exchange ``{queue} A`` or ``{queue} B`` of type
``x-federation-upstream`` (``fanout`` where the upstream lacks that type)
bound to the queue, and binds the internal exchange to the upstream
exchange with every binding of the downstream exchange, kept in step
through :attr:`~txamqp09.broker.model.exchange.Exchange.binding_watchers`.

:class:`QueueLink` federates a queue: it consumes the upstream queue of
the same name with consumer priority -1 (the upstream's own consumers come
first) while the downstream queue has consumers and no messages.
"""

from __future__ import annotations

import time
import zlib
from collections import deque
from collections.abc import Mapping
from typing import Any, Callable, Optional
from urllib.parse import quote, urlsplit

from twisted.internet.defer import Deferred, ensureDeferred, succeed
from twisted.internet.interfaces import IDelayedCall
from twisted.logger import Logger
from zope.interface import implementer

from txamqp09.broker.federation.headers import (
    BOUND_FROM,
    RECEIVED_FROM,
    binding_hops,
    prepended,
    queue_link_headers,
    should_forward,
)
from txamqp09.broker.federation.upstreams import Upstream
from txamqp09.broker.model import (
    Binding, Client, Consumer, Exchange, ISink, Message, Queue, Session, VirtualHost, origin,
)
from txamqp09.broker.model.routing import freeze
from txamqp09.client import Channel, ChannelClosed, ChannelState, ClientConnection, ClientError, connect
from txamqp09.client import Consumer as ClientConsumer
from txamqp09.client import Message as ClientMessage
from txamqp09.links.link import LinkDown, connect_first, describe
from txamqp09.links.uri import LinkUri, LocalAddress, redacted
from txamqp09.wire.errors import AMQPError
from txamqp09.wire.versions import AMQP0_9_1

__all__ = ["ExchangeLink", "Link", "QueueLink", "upstream_queue_name"]

_log = Logger()
_PROPERTIES = AMQP0_9_1.properties[60]
#: The argument that marks what federation declares, so that it is not federated in turn.
_PURPOSE = {"x-internal-purpose": "federation"}
#: Encoded properties an exchange link remembers (see ExchangeLink.delivered).
_KEPT_PROPERTIES = 256
_UNKNOWN: Any = object()
#: Status values, as RabbitMQ's ``/api/federation-links`` shows them.
STARTING, RUNNING, ERROR = "starting", "running", "error"


def upstream_queue_name(
    upstream_exchange: str, upstream_vhost: str, vhost: str, exchange: str, cluster_name: str
) -> str:
    """The queue an exchange link declares on its upstream (RabbitMQ's name)."""
    if vhost != upstream_vhost:
        suffix = f":{vhost}:{exchange}"
    elif exchange != upstream_exchange:
        suffix = f":{exchange}"
    else:
        suffix = ""
    return f"federation: {upstream_exchange} -> {cluster_name}{suffix}"


@implementer(ISink)
class _Sink:
    """A link's session publishes only; nothing comes back to it."""

    def deliver(self, consumer: Consumer, delivery_tag: int, redelivered: bool, message: Message) -> None:
        """Never called: the session does not consume."""

    def returned(self, reply_code: int, reply_text: str, message: Message) -> None:
        """Never called: the link does not publish mandatory messages."""

    def confirmed(self, sequence: int, ack: bool) -> None:
        """Unused: the link waits for the store instead."""

    def cancelled(self, consumer: Consumer) -> None:
        """Never called: the session does not consume."""


class LocalPublisher:
    """Publishes into a downstream vhost through a model session of its own.

    :param vhost: the downstream virtual host.
    :param name: how listings name the link's client.
    """

    def __init__(self, vhost: VirtualHost, name: str) -> None:
        self.vhost = vhost
        self.client = Client(name)
        self.session = Session(vhost, self.client, _Sink())

    def publish(self, exchange: str, routing_key: str, raw_properties: bytes, body: bytes) -> Optional[Deferred[None]]:
        """Route a message (its content properties encoded); a Deferred that
        fires once the store has it when it was written, else None.

        :raises AMQPError: as basic.publish would (no such exchange...).
        """
        message = Message(origin(exchange, routing_key), raw_properties, body, _PROPERTIES)
        before = self.session.stored_sequence
        self.session.publish(exchange, message, False, False)
        persistence = self.vhost.persistence
        if self.session.stored_sequence == before or persistence is None or persistence.store is None:
            return None
        return persistence.store.when_durable(self.session.stored_sequence)  # type: ignore[no-any-return]

    def close(self) -> None:
        """End the session."""
        self.client.close()


class Link:
    """The link of one federated exchange or queue to one upstream.

    :param reactor: connects and schedules reconnections.
    :param vhost: the downstream virtual host.
    :param name: the federated exchange's or queue's name.
    :param upstream: the upstream and its settings.
    :param policy: the name of the policy that federates it.
    :param cluster_name: this broker's cluster name, read when the link connects.
    :param local: where this broker listens for AMQP (for upstream URIs without a host).
    """

    #: ``exchange`` or ``queue``.
    kind = ""

    def __init__(
        self, reactor: Any, vhost: VirtualHost, name: str, upstream: Upstream, policy: Optional[str],
        cluster_name: Callable[[], str], local: Callable[[], Optional[LocalAddress]] = lambda: None,
    ) -> None:
        self.reactor = reactor
        self.local = local
        self.vhost = vhost
        self.name = name
        self.upstream = upstream
        self.policy = policy
        self.cluster_name = cluster_name
        self.status = STARTING
        self.error: Optional[str] = None
        self.uri = redacted(upstream.uris[0])
        self.timestamp = time.localtime()
        self.connection: Optional[ClientConnection] = None
        self.publisher = LocalPublisher(vhost, self.connection_name)
        #: The upstream's virtual host and cluster name (once connected).
        self.upstream_vhost = vhost.name
        self.upstream_cluster: Optional[str] = None
        self._attempts = 0
        self._retry: Optional[IDelayedCall] = None
        self._stopped = False
        #: While held: what arrived since, each with the Deferred its consumer waits for.
        self._held: Optional[deque[tuple[ClientMessage, Deferred[None]]]] = None

    @property
    def connection_name(self) -> str:
        """The name the link's connections carry (RabbitMQ's)."""
        return f"Federation link (upstream: {self.upstream.name}, policy: {self.policy})"

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What identifies the link: kind, vhost, name and upstream name."""
        return (self.kind, self.vhost.name, self.name, self.upstream.name)

    def start(self) -> None:
        """Connect (and keep connecting until :meth:`stop`)."""
        self._connect()

    def stop(self, clean_up: bool = False) -> Deferred[Any]:
        """Stop reconnecting and close the upstream connection.

        :param clean_up: first remove what the link made on the upstream
            (it is not wanted any more); without, it stays and keeps what
            arrives until the link runs again (the broker is stopping).
        """
        self._stopped = True
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        self.publisher.close()
        connection, self.connection = self.connection, None
        if connection is None:
            return succeed(None)
        closing = ensureDeferred(self.clean_up(connection)) if clean_up else succeed(None)
        closing.addErrback(lambda failure: _log.info("federation link {key}: upstream not cleaned up: {error}",
                                                     key=self.key, error=failure.value))
        return closing.addCallback(lambda _: connection.disconnect()).addErrback(lambda _: None)

    async def clean_up(self, connection: ClientConnection) -> None:
        """Remove what the link declared on the upstream."""

    def _report(self, status: str, error: Optional[str] = None) -> None:
        self.status, self.error, self.timestamp = status, error, time.localtime()

    def _connect(self) -> None:
        if self._stopped:
            return
        self._report(STARTING)
        ensureDeferred(self._run()).addErrback(self._failed)

    def _uris(self) -> list[LinkUri]:
        """The upstream's URIs; one without a vhost names the downstream's
        (as in RabbitMQ)."""
        vhost = quote(self.vhost.name, safe="")
        return [LinkUri(uri if urlsplit(uri).path else f"{uri}/{vhost}") for uri in self.upstream.uris]

    async def _run(self) -> None:
        uris = self._uris()
        connection, uri = await connect_first(self.reactor, uris, self.local, self.connection_name,
                                              start=self._attempts)
        self._attempts += 1
        self.uri = redacted(self.upstream.uris[uris.index(uri)])  # as given, without credentials
        if self._stopped:
            await connection.disconnect()
            return
        self.connection = connection
        self.upstream_vhost = connection.parameters.virtual_host
        cluster = connection.server_properties.get("cluster_name")
        self.upstream_cluster = cluster.decode("utf-8", "replace") if isinstance(cluster, bytes) else cluster
        connection.whenClosed().addBoth(self._lost, connection)
        await self.set_up(connection)
        self._report(RUNNING)
        _log.info("federation link {key} connected to {uri}", key=self.key, uri=self.uri)

    def _failed(self, failure: Any) -> None:
        if not isinstance(failure.value, (ClientError, AMQPError, OSError, ValueError, LinkDown)):
            _log.failure("federation link {key} failed", failure, key=self.key)
        self._report(ERROR, describe(failure))
        connection, self.connection = self.connection, None
        if connection is not None:
            connection.close()
        self._schedule()

    def _lost(self, reason: Any, connection: ClientConnection) -> None:
        if connection is not self.connection or self._stopped:
            return
        self.connection = None
        self.lost()
        self._report(ERROR, str(getattr(reason, "value", reason)))
        self._schedule()

    def _command_failed(self, failure: Any) -> None:
        """A command at the upstream failed: start the link over."""
        self._report(ERROR, str(failure.value))
        if self.connection is not None:
            self.connection.close()

    def _schedule(self) -> None:
        if not self._stopped and (self._retry is None or not self._retry.active()):
            self._retry = self.reactor.callLater(self.upstream.reconnect_delay, self._connect)

    async def set_up(self, connection: ClientConnection) -> None:
        """Declare what the link needs on the upstream and start moving messages."""
        raise NotImplementedError

    def lost(self) -> None:
        """The upstream connection ended (it is made again later)."""

    # -- moving messages ----------------------------------------------------------

    def hold(self) -> None:
        """Keep what arrives from now on, unacknowledged, until :meth:`release`
        (the broker blocks its publishers)."""
        if self._held is None:
            self._held = deque()

    def release(self) -> None:
        """Republish what was held, in order, and take messages again."""
        held, self._held = self._held, None
        for message, waiting in held or ():
            # An upstream that acknowledges delivers again what a closed
            # channel left unacknowledged; one that does not has forgotten it.
            if message.channel.state is ChannelState.OPEN or self.upstream.ack_mode == "no-ack":
                self.delivered(message)
            waiting.callback(None)

    def _arrived(self, message: ClientMessage) -> Optional[Deferred[None]]:
        """A message from the upstream: republished now, or held (its
        consumer's callback unfinished until the link is released)."""
        if self._held is None:
            self.delivered(message)
            return None
        waiting: Deferred[None] = Deferred()
        self._held.append((message, waiting))
        return waiting

    def properties_with(self, message: ClientMessage, headers: Mapping[str, Any]) -> bytes:
        """*message*'s content properties with *headers* (and without its
        ``user_id`` unless the upstream is trusted with it), encoded."""
        properties = message.properties
        properties.headers = dict(headers)
        if not self.upstream.trust_user_id:
            properties.user_id = None
        return properties.encode()  # type: ignore[no-any-return]

    def republish(self, message: ClientMessage, exchange: str, routing_key: str, raw_properties: bytes) -> None:
        """Publish *message* here with *raw_properties*, then acknowledge it
        at the upstream as the ack mode says."""
        try:
            stored = self.publisher.publish(exchange, routing_key, raw_properties, message.body)
        except AMQPError as error:
            self._report(ERROR, error.reply_text)
            if self.connection is not None:
                self.connection.close()
            return
        if self.upstream.ack_mode == "no-ack":
            return
        if stored is not None and self.upstream.ack_mode == "on-confirm":
            stored.addCallback(lambda _: self._ack(message))
        else:
            self._ack(message)

    def drop(self, message: ClientMessage) -> None:
        """Acknowledge *message* without republishing it (it went far enough)."""
        if self.upstream.ack_mode != "no-ack":
            self._ack(message)

    def _ack(self, message: ClientMessage) -> None:
        if message.channel.state is ChannelState.OPEN and not message.settled:
            message.ack()

    async def consume(self, channel: Channel, queue: str, **arguments: Any) -> ClientConsumer:
        """Consume *queue* on *channel* into :meth:`delivered`, with the
        upstream's prefetch count unless in no-ack mode."""
        no_ack = self.upstream.ack_mode == "no-ack"
        if not no_ack:
            await channel.basic_qos(self.upstream.prefetch_count)
        return await channel.basic_consume(queue, self._arrived, no_ack=no_ack, **arguments)

    def delivered(self, message: ClientMessage) -> None:
        """A message from the upstream."""
        raise NotImplementedError

    # -- status -------------------------------------------------------------------

    def identity(self) -> dict[str, Any]:
        """The link's own keys of its status entry."""
        raise NotImplementedError

    def status_entry(self, node: str) -> dict[str, Any]:
        """The link as ``/api/federation-links`` lists it (RabbitMQ's keys)."""
        entry: dict[str, Any] = {"node": node, **self.identity(), "type": self.kind, "vhost": self.vhost.name,
                                 "upstream": self.upstream.name, "id": self.id, "status": self.status}
        if self.status == RUNNING:
            entry["local_connection"] = self.connection_name
        elif self.error is not None:
            entry["error"] = self.error
        entry["uri"] = self.uri
        stamp = self.timestamp
        entry["timestamp"] = (f"{stamp.tm_year}-{stamp.tm_mon:02}-{stamp.tm_mday:02} "
                              f"{stamp.tm_hour}:{stamp.tm_min:02}:{stamp.tm_sec:02}")
        return entry

    @property
    def id(self) -> str:
        """A short id of the link (8 hex digits, from its key)."""
        return f"{zlib.crc32(repr(self.key).encode('utf-8')):08x}"


async def _exists(connection: ClientConnection, method: str, **fields: Any) -> bool:
    """Whether a passive declare succeeds, on a channel of its own (a 404
    closes that channel only)."""
    channel = await connection.channel()
    try:
        await channel.request(method, passive=True, **fields)
    except ChannelClosed as error:
        if error.reply_code != 404:
            raise
        return False
    await channel.close()
    return True


class ExchangeLink(Link):
    """The link of a federated exchange (see the module's text).

    :param exchange: the downstream exchange.
    """

    kind = "exchange"

    def __init__(self, reactor: Any, vhost: VirtualHost, exchange: Exchange, upstream: Upstream,
                 policy: Optional[str], cluster_name: Callable[[], str],
                 local: Callable[[], Optional[LocalAddress]] = lambda: None) -> None:
        super().__init__(reactor, vhost, exchange.name, upstream, policy, cluster_name, local)
        self.exchange = exchange
        self.upstream_exchange = upstream.exchange or exchange.name
        #: Destinations of the downstream bindings by (routing key, arguments).
        self.bound: dict[tuple[str, Any], set[Any]] = {}
        self.queue = ""
        self.internal = ""
        self.suffix = "A"
        self._commands: Optional[Channel] = None
        #: Properties republished, by the properties received and the
        #: redelivered flag (messages of one publisher mostly share them):
        #: what they become depends on nothing else while connected.
        self._republished: dict[tuple[bytes, bool], Optional[bytes]] = {}
        exchange.binding_watchers += (self.binding_changed,)

    def stop(self, clean_up: bool = False) -> Deferred[Any]:
        self.exchange.binding_watchers = tuple(
            watcher for watcher in self.exchange.binding_watchers if watcher != self.binding_changed
        )
        return super().stop(clean_up)

    async def clean_up(self, connection: ClientConnection) -> None:
        """Delete the upstream queue and the internal exchange (as RabbitMQ
        does when a link ends for good)."""
        channel = await connection.channel()
        await channel.request("queue.delete", queue=self.queue, if_unused=False, if_empty=False)
        await channel.request("exchange.delete", exchange=self.internal, if_unused=False)

    def identity(self) -> dict[str, Any]:
        return {"exchange": self.name, "upstream_exchange": self.upstream_exchange}

    async def set_up(self, connection: ClientConnection) -> None:
        upstream = self.upstream
        self._republished.clear()
        channel = await connection.channel()
        self._commands = await connection.channel()
        self.queue = upstream_queue_name(
            self.upstream_exchange, self.upstream_vhost, self.vhost.name, self.name, self.cluster_name()
        )
        arguments: dict[str, Any] = {}
        if upstream.expires is not None:
            arguments["x-expires"] = upstream.expires
        if upstream.message_ttl is not None:
            arguments["x-message-ttl"] = upstream.message_ttl
        await channel.queue_declare(self.queue, durable=True, arguments={**arguments, **_PURPOSE})
        await self._ensure_upstream_exchange(connection)
        previous = "B" if await _exists(connection, "exchange.declare", exchange=f"{self.queue} B") else "A"
        self.suffix = "A" if previous == "B" else "B"
        self.internal = f"{self.queue} {self.suffix}"
        await self._declare_internal(connection, channel)
        await channel.request("queue.bind", queue=self.queue, exchange=self.internal, routing_key="", arguments={})
        self.bound.clear()
        for binding in list(self.exchange.bindings.values()):
            self.binding_changed(binding, True)
        await channel.request("exchange.delete", exchange=f"{self.queue} {previous}", if_unused=False)
        await self.consume(channel, self.queue)

    async def _ensure_upstream_exchange(self, connection: ClientConnection) -> None:
        if await _exists(connection, "exchange.declare", exchange=self.upstream_exchange):
            return
        exchange = self.exchange
        channel = await connection.channel()
        await channel.exchange_declare(
            self.upstream_exchange, exchange.kind, durable=exchange.durable, auto_delete=exchange.auto_delete,
            internal=exchange.internal, arguments=dict(exchange.arguments),
        )
        await channel.close()

    async def _declare_internal(self, connection: ClientConnection, channel: Channel) -> None:
        """The internal exchange: ``x-federation-upstream`` when the upstream
        knows the type (it then drops what would travel too far), else
        ``fanout``. An unknown type closes the connection (503), so the
        first try is on a connection of its own."""
        await channel.request("exchange.delete", exchange=self.internal, if_unused=False)
        upstream_type = {"x-max-hops": self.upstream.max_hops, "x-downstream-name": self.cluster_name(),
                         "x-downstream-vhost": self.vhost.name, **_PURPOSE}
        parameters = connection.parameters
        try:
            trial = await connect(self.reactor, parameters)
        except ClientError:
            trial = None
        if trial is not None:
            try:
                probe = await trial.channel()
                await probe.exchange_declare(self.internal, "x-federation-upstream", durable=True,
                                             internal=True, auto_delete=True, arguments=upstream_type)
                await trial.disconnect()
                return
            except ClientError:
                trial.dropConnection()
        await channel.exchange_declare(self.internal, "fanout", durable=True, internal=True, auto_delete=True,
                                       arguments=dict(_PURPOSE))

    def lost(self) -> None:
        self._commands = None

    def binding_changed(self, binding: Binding, added: bool) -> None:
        """Bind or unbind the internal exchange at the upstream as the
        downstream exchange's bindings change."""
        if self._commands is None:
            return
        key = (binding.routing_key, freeze(binding.arguments))
        if BOUND_FROM not in binding.arguments:
            destinations = self.bound.setdefault(key, set())
            first = not destinations
            if added:
                destinations.add(binding.destination)
                if not first:
                    return
            else:
                destinations.discard(binding.destination)
                if destinations:
                    return
                del self.bound[key]
        hops = binding_hops(binding.arguments, self.upstream.max_hops, self.upstream_cluster or "",
                            self.upstream_vhost)
        if hops <= 0:
            return
        arguments = prepended(binding.arguments, BOUND_FROM, {
            "cluster-name": self.cluster_name(), "vhost": self.vhost.name,
            "exchange": f"{self.vhost.name}:{self.name} {self.suffix}", "hops": hops,
        })
        method = "exchange.bind" if added else "exchange.unbind"
        self._commands.request(
            method, destination=self.internal, source=self.upstream_exchange, routing_key=binding.routing_key,
            arguments=arguments,
        ).addErrback(self._command_failed)

    def delivered(self, message: ClientMessage) -> None:
        key = (message.raw_properties, message.redelivered)
        raw = self._republished.get(key, _UNKNOWN)
        if raw is _UNKNOWN:
            raw = self._republished_properties(message)
            if len(self._republished) >= _KEPT_PROPERTIES:
                self._republished.clear()
            self._republished[key] = raw
        if raw is None:
            self.drop(message)
        else:
            self.republish(message, self.name, message.routing_key, raw)

    def _republished_properties(self, message: ClientMessage) -> Optional[bytes]:
        """The properties *message* is republished with, encoded; None when
        it is not to be republished (it went far enough)."""
        headers = message.headers
        if not should_forward(headers, self.upstream.max_hops, self.cluster_name(), self.vhost.name):
            return None
        entry: dict[str, Any] = {"uri": self.uri, "exchange": self.name, "redelivered": message.redelivered}
        if self.upstream_cluster is not None:
            entry["cluster-name"] = self.upstream_cluster
        entry["vhost"] = self.upstream_vhost
        return self.properties_with(message, prepended(headers, RECEIVED_FROM, entry))


class QueueLink(Link):
    """The link of a federated queue (see the module's text).

    :param queue: the downstream queue.
    """

    kind = "queue"

    def __init__(self, reactor: Any, vhost: VirtualHost, queue: Queue, upstream: Upstream,
                 policy: Optional[str], cluster_name: Callable[[], str],
                 local: Callable[[], Optional[LocalAddress]] = lambda: None) -> None:
        super().__init__(reactor, vhost, queue.name, upstream, policy, cluster_name, local)
        self.queue = queue
        self.upstream_queue = upstream.queue or queue.name
        self._channel: Optional[Channel] = None
        self._consumer: Optional[Deferred[ClientConsumer]] = None

    def identity(self) -> dict[str, Any]:
        return {"queue": self.name, "upstream_queue": self.upstream_queue,
                "consumer_tag": self.upstream.consumer_tag}

    def start(self) -> None:
        """Connect, and consume or pause as the queue's state changes."""
        self.queue.state_watchers += (self.adjust,)
        super().start()

    def stop(self, clean_up: bool = False) -> Deferred[Any]:
        self.queue.state_watchers = tuple(watcher for watcher in self.queue.state_watchers
                                          if watcher != self.adjust)
        return super().stop(clean_up)

    async def set_up(self, connection: ClientConnection) -> None:
        capabilities = connection.server_properties.get("capabilities") or {}
        if not capabilities.get("consumer_priorities"):
            raise ValueError("upstream_lacks_consumer_priorities")
        channel = await connection.channel()
        if not await _exists(connection, "queue.declare", queue=self.upstream_queue):
            queue = self.queue
            await channel.queue_declare(self.upstream_queue, durable=queue.durable, auto_delete=queue.auto_delete,
                                        arguments=dict(queue.arguments))
        self._channel = channel
        self.adjust()

    def lost(self) -> None:
        self._channel = None
        self._consumer = None

    @property
    def wanted(self) -> bool:
        """Whether the downstream queue asks for messages: it has consumers
        (of priority 0 or more) and none waiting."""
        queue = self.queue
        return not queue.message_count and any(consumer.priority >= 0 for consumer in queue.consumers)

    def adjust(self) -> None:
        """Consume the upstream queue while the downstream one wants
        messages; stop when it no longer does."""
        channel = self._channel
        if channel is None:
            return
        if self.wanted and self._consumer is None:
            self._consumer = ensureDeferred(self.consume(
                channel, self.upstream_queue, consumer_tag=self.upstream.consumer_tag,
                arguments={"x-priority": -1},
            ))
            self._consumer.addErrback(self._command_failed)
        elif not self.wanted and self._consumer is not None:
            consuming, self._consumer = self._consumer, None
            consuming.addCallback(lambda consumer: consumer.cancel()).addErrback(self._command_failed)

    def delivered(self, message: ClientMessage) -> None:
        entry = {"uri": self.uri, "queue": self.name, "redelivered": message.redelivered}
        headers = queue_link_headers(message.headers, entry, message.exchange, message.routing_key)
        self.republish(message, "", self.name, self.properties_with(message, headers))
