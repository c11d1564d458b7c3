"""``/api/overview``: the node at a glance (versions, totals, listeners)."""

from __future__ import annotations

import platform
from typing import Any

from txamqp09 import __version__
from txamqp09.management.api import ApiRequest, Router
from txamqp09.management.node import Node

__all__ = ["register", "exchange_types", "group_status", "listeners"]

#: The management API version this broker's API follows.
API_VERSION = "3.10.8"
_EXCHANGE_TYPE_DESCRIPTIONS = {
    "direct": "AMQP direct exchange, as per the AMQP specification",
    "fanout": "AMQP fanout exchange, as per the AMQP specification",
    "headers": "AMQP headers exchange, as per the AMQP specification",
    "topic": "AMQP topic exchange, as per the AMQP specification",
}


def register(router: Router) -> None:
    """Add ``GET /api/overview``."""
    router.add("GET", "/api/overview", overview)


def exchange_types() -> list[dict[str, Any]]:
    """The exchange types this broker offers, as RabbitMQ lists them."""
    from txamqp09.broker.model import EXCHANGE_TYPES

    return [
        {"name": kind, "description": _EXCHANGE_TYPE_DESCRIPTIONS.get(kind, f"{kind} exchange"), "enabled": True}
        for kind in sorted(EXCHANGE_TYPES)
    ]


def listeners(node: Node) -> list[dict[str, Any]]:
    """The ports the node listens on."""
    return [
        {"node": node.name, "protocol": listener.protocol, "ip_address": listener.ip_address,
         "port": listener.port, "socket_opts": {}}
        for listener in node.listeners
    ]


def contexts(node: Node) -> list[dict[str, Any]]:
    """The HTTP listeners serving the management API."""
    return [
        {"node": node.name, "description": "txamqp09 management", "path": "/",
         "ip": listener.ip_address, "port": str(listener.port)}
        for listener in node.listeners if listener.protocol in ("http", "https")
    ]


def overview(request: ApiRequest) -> dict[str, Any]:
    """Versions, statistics, object totals and listeners of the node; for a
    member of a group, ``group``: its role, the lease and the members.

    Users who are not monitors see the totals of their own vhosts only.
    """
    node = request.node
    monitor = request.is_tagged("monitoring")
    vhosts = [vhost for vhost in node.vhosts() if monitor or request.user.may_open_vhost(vhost.name)]
    connections = [
        connection for connection in node.connections
        if monitor or (connection.user is not None and connection.user.name == request.user.name)
    ]
    stats = node.stats
    ranges = request.ranges()
    python = platform.python_version()
    return {
        "management_version": API_VERSION,
        "rates_mode": "basic",
        "sample_retention_policies": {"global": [600, 3600, 28800, 86400], "basic": [600, 3600], "detailed": [600]},
        "exchange_types": exchange_types(),
        "product_version": __version__,
        "product_name": "txamqp09",
        "rabbitmq_version": API_VERSION,
        "cluster_name": node.name,
        "erlang_version": python,
        "erlang_full_version": f"Python {python} ({platform.python_implementation()})",
        "release_series_support_status": "supported",
        "disable_stats": False,
        "enable_queue_totals": True,
        "message_stats": stats.message_stats([stats.vhost(vhost.name) for vhost in vhosts], ranges.msg_rates),
        "churn_rates": stats.churn_rates(ranges.lengths),
        "queue_totals": stats.queue_totals(vhosts, ranges.lengths),
        "object_totals": {
            "channels": sum(len(connection.channels) for connection in connections),
            "connections": len(connections),
            "consumers": sum(len(queue.consumers) for vhost in vhosts for queue in vhost.queues.values()),
            "exchanges": sum(len(vhost.exchanges) for vhost in vhosts),
            "queues": sum(len(vhost.queues) for vhost in vhosts),
        },
        "statistics_db_event_queue": 0,
        "node": node.name,
        "listeners": listeners(node),
        "contexts": contexts(node),
        **group_status(node),
    }


def group_status(node: Node) -> dict[str, Any]:
    """The node's ``role`` and ``group`` (nothing when it serves alone)."""
    if node.group is None:
        return {}
    status = node.group.status()
    return {"role": status.role.value, "group": status.as_json()}
