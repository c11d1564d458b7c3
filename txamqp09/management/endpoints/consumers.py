"""``/api/consumers[/{vhost}]``: the consumers of the queues the user may see."""

from __future__ import annotations

from typing import Any

from txamqp09.management.api import ApiRequest, Router, listing
from txamqp09.management.endpoints.common import visible_vhosts
from txamqp09.management.views import consumer_view

__all__ = ["register"]


def register(router: Router) -> None:
    """Add the consumer routes."""
    router.add("GET", "/api/consumers", list_consumers)
    router.add("GET", "/api/consumers/{vhost}", list_consumers)


def list_consumers(request: ApiRequest) -> Any:
    """Every consumer of every visible queue."""
    rows = [
        consumer_view(request.node, consumer)
        for vhost in visible_vhosts(request)
        for queue in vhost.queues.values()
        for consumer in queue.consumers
    ]
    return listing(request, rows, ("queue.vhost", "queue.name", "consumer_tag"))
