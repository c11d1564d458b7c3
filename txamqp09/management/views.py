"""The JSON shapes of the broker's objects, as RabbitMQ's management API shows them.

One function per kind of object (queue, exchange, binding, connection,
channel, consumer); the endpoint modules list and filter, these shape.
Fields that describe the Erlang VM (``garbage_collection``,
``reductions``, ``backing_queue_status``) have no counterpart here and are
left out; docs/management.rst lists the differences.
"""

from __future__ import annotations

import base64
import time
from typing import TYPE_CHECKING, Any, Optional, cast
from urllib.parse import quote_plus

from txamqp09.broker.model import Binding, Consumer, Exchange, Mode, Queue, Session
from txamqp09.broker.model.arguments import STREAM
from txamqp09.broker.model.stats import Counters
from txamqp09.broker.runtime import jsonable, queue_policy_fields
from txamqp09.management.erlang import amqp_table_term, phash2
from txamqp09.management.stats import NO_RANGES, MeasuredNode, Ranges

if TYPE_CHECKING:
    from txamqp09.broker.channel import ServerChannel
    from txamqp09.broker.server import ServerConnection

__all__ = [
    "binding_view",
    "channel_name",
    "channel_view",
    "connection_name",
    "connection_view",
    "consumer_utilisation",
    "consumer_view",
    "exchange_view",
    "jsonable",
    "properties_key",
    "queue_view",
]


def _iso(seconds: float) -> str:
    """A time as RabbitMQ writes ``idle_since``."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds * 1000) % 1000:03d}+00:00"


def _last_change(node: MeasuredNode, counters: Counters) -> float:
    """When *counters* last changed, as far as the samples tell (now before the first)."""
    changed = node.stats.last_change(counters)
    return changed if changed is not None else node.clock.seconds()


# -- queues ------------------------------------------------------------------


def queue_view(
    node: MeasuredNode, queue: Queue, unacked: tuple[int, int], *, details: bool = False, ranges: Ranges = NO_RANGES
) -> dict[str, Any]:
    """A queue as ``/api/queues`` shows it.

    :param unacked: its delivered, unacknowledged messages and their bytes
        (from :meth:`NodeLike.unacked <txamqp09.management.base.NodeLike.unacked>`,
        computed once per request).
    :param details: add ``consumer_details`` (the single-queue answer).
    :param ranges: the histories asked for (lengths and message rates).
    """
    stats = node.stats
    ready, ready_bytes = queue.message_count, queue.ready_bytes
    unacked_count, unacked_bytes = unacked
    consumers = list(queue.consumers)
    exclusive_consumer = next((consumer for consumer in consumers if consumer.exclusive), None)
    view: dict[str, Any] = {
        "name": queue.name,
        "vhost": queue.vhost.name,
        "durable": queue.durable,
        "auto_delete": queue.auto_delete,
        "exclusive": queue.exclusive,
        "arguments": jsonable(queue.arguments),
        "type": queue.settings.queue_type,
        "node": node.name,
        "state": "running",
        **queue_policy_fields(queue),
        "consumers": len(consumers),
        "consumer_utilisation": consumer_utilisation(queue, consumers),
        "consumer_capacity": consumer_utilisation(queue, consumers),
        "exclusive_consumer_tag": exclusive_consumer.tag if exclusive_consumer is not None else None,
        "single_active_consumer_tag": consumers[0].tag if consumers and queue.settings.single_active_consumer else None,
        "head_message_timestamp": None,
        "recoverable_slaves": None,
        "memory": ready_bytes + unacked_bytes,
        "message_bytes": ready_bytes + unacked_bytes,
        "message_bytes_ready": ready_bytes,
        "message_bytes_unacknowledged": unacked_bytes,
        "message_bytes_ram": ready_bytes + unacked_bytes,
        "message_bytes_persistent": 0,
        "message_bytes_paged_out": 0,
        "messages_ram": ready + unacked_count,
        "messages_ready_ram": ready,
        "messages_unacknowledged_ram": unacked_count,
        "messages_persistent": 0,
        "messages_paged_out": 0,
        "message_stats": stats.channel_stats(queue.stats, ranges.msg_rates),
    }
    view.update(stats.queue_lengths(queue, unacked_count, ranges.lengths))
    view["idle_since"] = _iso(_last_change(node, queue.stats))
    if details:
        view["consumer_details"] = [consumer_view(node, consumer) for consumer in consumers]
        view["deliveries"] = []
        view["incoming"] = []
    return view


def consumer_utilisation(queue: Queue, consumers: list[Consumer]) -> Optional[float]:
    """RabbitMQ's time-weighted share of time the queue could hand a waiting
    message to a consumer at once (:meth:`Queue.consumer_utilisation`; 1.0
    for a stream); None without consumers."""
    if not consumers:
        return None
    if queue.settings.queue_type == STREAM:
        return 1.0
    return queue.consumer_utilisation()


# -- exchanges and bindings ----------------------------------------------------


def exchange_view(
    node: MeasuredNode, exchange: Exchange, vhost: str, ranges: Ranges = NO_RANGES
) -> dict[str, Any]:
    """An exchange as ``/api/exchanges`` shows it (the default one is named ``""``),
    with the message rates' history *ranges* ask for."""
    return {
        "name": exchange.name,
        "vhost": vhost,
        "type": exchange.kind,
        "durable": exchange.durable,
        "auto_delete": exchange.auto_delete,
        "internal": exchange.internal,
        "arguments": jsonable(exchange.arguments),
        "policy": exchange.policy,
        "user_who_performed_action": "",
        "message_stats": node.stats.details(exchange.stats, ranges.msg_rates),
    }


def properties_key(routing_key: str, arguments: dict[str, Any]) -> str:
    """The ``properties_key`` that names a binding in URLs, as RabbitMQ
    makes it: the quoted routing key (``~`` for an empty one without
    arguments) and, with arguments, ``~`` and the URL-safe base64 of the
    32-bit ``erlang:phash2`` of the arguments as RabbitMQ holds them."""
    if not arguments:
        return "~" if not routing_key else _quote(routing_key)
    digest = phash2(amqp_table_term(arguments)).to_bytes(4, "big")
    return _quote(routing_key) + "~" + base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def _quote(text: str) -> str:
    return quote_plus(text, safe="").replace("~", "%7E")


def binding_view(binding: Binding, vhost: str) -> dict[str, Any]:
    """A binding as ``/api/bindings`` shows it."""
    destination = binding.destination
    arguments = dict(binding.arguments)
    return {
        "source": binding.source.name,
        "vhost": vhost,
        "destination": destination.name,
        "destination_type": "queue" if isinstance(destination, Queue) else "exchange",
        "routing_key": binding.routing_key,
        "arguments": jsonable(arguments),
        "properties_key": properties_key(binding.routing_key, arguments),
    }


# -- connections, channels, consumers ----------------------------------------


def _address(address: Any) -> tuple[str, int]:
    return str(getattr(address, "host", "unknown")), int(getattr(address, "port", 0) or 0)


def tls_details(transport: Any) -> dict[str, Optional[str]]:
    """RabbitMQ's ``ssl_protocol``, ``ssl_key_exchange``, ``ssl_cipher`` and
    ``ssl_hash`` of a TLS *transport*, from its OpenSSL connection's version
    and cipher suite names (``TLSv1.3`` and ``TLS_AES_256_GCM_SHA384`` are
    ``tlsv1.3``, ``any``, ``aes_256_gcm``, ``sha384``; a TLS 1.2 suite such
    as ``ECDHE-RSA-AES256-GCM-SHA384`` is ``ecdhe_rsa``, ``aes256_gcm``,
    ``sha384``). All None before the handshake."""
    handle = transport.getHandle()
    version, suite = handle.get_protocol_version_name(), handle.get_cipher_name()
    if not suite or version == "Unknown":
        return dict.fromkeys(_TLS_FIELDS)
    if suite.startswith("TLS_"):
        *cipher, digest = suite[4:].lower().split("_")
        exchange = "any"
    else:
        parts = suite.lower().split("-")
        kex = [part for part in parts[:2] if part in _KEY_EXCHANGES]
        *cipher, digest = parts[len(kex):]
        exchange = "_".join(kex) or "rsa"
    return {
        "ssl_protocol": version.lower(), "ssl_key_exchange": exchange,
        "ssl_cipher": "_".join(cipher), "ssl_hash": digest,
    }


#: The connection fields :func:`tls_details` fills.
_TLS_FIELDS = ("ssl_protocol", "ssl_key_exchange", "ssl_cipher", "ssl_hash")

#: The key-exchange and authentication words that open an OpenSSL TLS 1.2 suite name.
_KEY_EXCHANGES = frozenset({"ecdhe", "dhe", "rsa", "ecdsa", "psk", "dss"})


def connection_name(connection: ServerConnection) -> str:
    """RabbitMQ's connection name: ``peer-host:port -> host:port``."""
    transport = connection.transport
    if transport is None:
        return connection.client.name
    peer_host, peer_port = _address(transport.getPeer())
    host, port = _address(transport.getHost())
    return f"{peer_host}:{peer_port} -> {host}:{port}"


def _connection_of(channel: ServerChannel) -> ServerConnection:
    """The connection of *channel* (a channel sees it as a
    :class:`~txamqp09.broker.base.ConnectionLike`; in the broker it is a
    :class:`~txamqp09.broker.server.ServerConnection`)."""
    return cast("ServerConnection", channel.connection)


def channel_name(channel: ServerChannel) -> str:
    """RabbitMQ's channel name: the connection's name and ``(number)``."""
    return f"{connection_name(_connection_of(channel))} ({channel.number})"


def connection_view(
    node: MeasuredNode, connection: ServerConnection, ranges: Ranges = NO_RANGES
) -> dict[str, Any]:
    """A connection as ``/api/connections`` shows it, with the data rates'
    history *ranges* ask for."""
    transport = connection.transport
    peer_host, peer_port = _address(transport.getPeer() if transport is not None else None)
    host, port = _address(transport.getHost() if transport is not None else None)
    certificate = connection.peer.certificate
    tls = transport is not None and hasattr(transport, "getPeerCertificate")
    version = connection.version
    view: dict[str, Any] = {
        "name": connection_name(connection),
        "node": node.name,
        "type": "network",
        "state": "blocked" if connection.publishing_blocked else "running",
        "protocol": f"AMQP {version.name}" if version is not None else "AMQP",
        "user": connection.user.name if connection.user is not None else "",
        "user_who_performed_action": connection.user.name if connection.user is not None else "",
        "vhost": connection.vhost or "",
        "auth_mechanism": connection.auth_mechanism,
        "host": host,
        "port": port,
        "peer_host": peer_host,
        "peer_port": peer_port,
        "ssl": tls,
        "peer_cert_subject": certificate.subject.rfc4514_string() if certificate is not None else None,
        "peer_cert_issuer": certificate.issuer.rfc4514_string() if certificate is not None else None,
        "peer_cert_validity": None,
        "channels": len(connection.channels),
        "channel_max": connection.channel_max,
        "frame_max": connection.frame_max,
        "timeout": connection.heartbeat,
        "client_properties": jsonable(connection.client_properties),
        "connected_at": int(connection.connected_at * 1000),
        "send_pend": 0,
    }
    view.update(tls_details(transport) if tls else dict.fromkeys(_TLS_FIELDS))
    view.update(node.stats.details(connection.stats, ranges.data_rates))
    return view


def channel_view(
    node: MeasuredNode, channel: ServerChannel, *, details: bool = False, ranges: Ranges = NO_RANGES
) -> dict[str, Any]:
    """A channel as ``/api/channels`` shows it, with the message rates'
    history *ranges* ask for."""
    connection = _connection_of(channel)
    session = channel.session
    peer_host, peer_port = _address(connection.transport.getPeer() if connection.transport is not None else None)
    transaction = session.tx
    mode = session.mode
    view: dict[str, Any] = {
        "name": channel_name(channel),
        "node": node.name,
        "number": channel.number,
        "user": connection.user.name if connection.user is not None else "",
        "user_who_performed_action": connection.user.name if connection.user is not None else "",
        "vhost": channel.vhost.name,
        "connection_details": {"name": connection_name(connection), "peer_host": peer_host, "peer_port": peer_port},
        "state": "running" if session.flow_active else "flow",
        "confirm": mode is Mode.CONFIRM,
        "transactional": mode is Mode.TX,
        "consumer_count": len(session.consumers),
        "messages_unacknowledged": len(session.unacked),
        "messages_unconfirmed": channel.publisher.unconfirmed,
        "messages_uncommitted": len(transaction.publishes),
        "acks_uncommitted": len(transaction.settlements),
        "prefetch_count": session.consumer_prefetch_count,
        "global_prefetch_count": session.prefetch.count,
        "pending_raft_commands": 0,
        "message_stats": node.stats.channel_stats(session.stats, ranges.msg_rates),
    }
    view["idle_since"] = _iso(_last_change(node, session.stats))
    if details:
        view["consumer_details"] = [consumer_view(node, consumer) for consumer in session.consumers.values()]
        view["deliveries"] = []
        view["publishes"] = []
    return view


def consumer_view(node: MeasuredNode, consumer: Consumer) -> dict[str, Any]:
    """A consumer as ``/api/consumers`` shows it."""
    session = cast(Session, consumer.session)  # the model's consumers belong to sessions
    channel: Any = getattr(session.sink, "channel", None)
    channel_details: dict[str, Any] = {}
    connection = getattr(channel, "connection", None)
    if connection is not None:
        peer_host, peer_port = _address(connection.transport.getPeer() if connection.transport is not None else None)
        channel_details = {
            "name": channel_name(channel),
            "number": channel.number,
            "connection_name": connection_name(connection),
            "peer_host": peer_host,
            "peer_port": peer_port,
            "user": connection.user.name if connection.user is not None else "",
            "node": node.name,
        }
    prefetch = consumer.limits[0].count if consumer.limits else 0
    queue = consumer.queue
    active = not queue.settings.single_active_consumer or (bool(queue.consumers) and queue.consumers[0] is consumer)
    return {
        "consumer_tag": consumer.tag,
        "queue": {"name": queue.name, "vhost": queue.vhost.name},
        "channel_details": channel_details,
        "ack_required": not consumer.no_ack,
        "exclusive": consumer.exclusive,
        "prefetch_count": prefetch,
        "arguments": jsonable(consumer.arguments),
        "active": active,
        "activity_status": "up" if active else "waiting",
    }
