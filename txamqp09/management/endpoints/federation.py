"""``/api/federation-links``: the federation links and their status.

The entries are RabbitMQ's (its federation management plugin's): ``node``,
``exchange`` and ``upstream_exchange`` or ``queue``, ``upstream_queue`` and
``consumer_tag``, ``type``, ``vhost``, ``upstream``, ``id``, ``status``
(``starting``, ``running``, ``error``), ``local_connection`` while running
or ``error`` after a failure, ``uri`` without credentials and ``timestamp``.
``.../state/down`` lists the links that are neither running nor starting.
"""

from __future__ import annotations

from typing import Any

from txamqp09.management.api import ApiRequest, Router, listing

__all__ = ["register"]


def register(router: Router) -> None:
    """Add the federation link listings (for monitors and administrators)."""
    router.add("GET", "/api/federation-links", links, tag="monitoring")
    router.add("GET", "/api/federation-links/state/down", down_links, tag="monitoring")
    router.add("GET", "/api/federation-links/{vhost}", links, tag="monitoring")
    router.add("GET", "/api/federation-links/{vhost}/state/down", down_links, tag="monitoring")


def _entries(request: ApiRequest) -> list[dict[str, Any]]:
    service = request.node.federation
    if service is None:
        return []
    vhost = request.vhost().name if "vhost" in request.args else None
    return [entry for entry in service.status(vhost) if request.may_see_vhost(entry["vhost"])]


def links(request: ApiRequest) -> Any:
    """Every link (of a vhost)."""
    return listing(request, _entries(request), ("vhost", "upstream"))


def down_links(request: ApiRequest) -> Any:
    """The links that are neither running nor starting."""
    rows = [entry for entry in _entries(request) if entry["status"] not in ("running", "starting")]
    return listing(request, rows, ("vhost", "upstream"))
