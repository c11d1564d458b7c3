"""``/api/nodes[/{node}]`` (monitoring tag): the one node this broker is,
or every member of its group (:func:`txamqp09.management.group.node_entries`)."""

from __future__ import annotations

import os
import resource
import sys
import time
from typing import Any

from txamqp09 import __version__
from txamqp09.management.api import ApiRequest, Router, listing, not_found
from txamqp09.management.endpoints.overview import contexts, exchange_types
from txamqp09.management.group import node_entries
from txamqp09.management.node import Node
from txamqp09.management.stats import NO_RANGES, Ranges

__all__ = ["entries", "entry", "node_info", "register"]


def register(router: Router) -> None:
    """Add ``GET /api/nodes`` and ``GET /api/nodes/{node}``."""
    router.add("GET", "/api/nodes", list_nodes, tag="monitoring")
    router.add("GET", "/api/nodes/{node}", get_node, tag="monitoring")


def node_info(node: Node, ranges: Ranges = NO_RANGES) -> dict[str, Any]:
    """The node's entry of ``/api/nodes`` (with histories over *ranges*'s ``node_stats``)."""
    fd_total = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    alarms = node.alarms()
    info: dict[str, Any] = {
        "name": node.name,
        "type": "disc" if node.store is not None else "ram",
        "running": True,
        "being_drained": False,
        "os_pid": str(os.getpid()),
        "uptime": int((time.time() - node.started) * 1000),
        "processors": os.cpu_count() or 1,
        "run_queue": os.getloadavg()[0] if hasattr(os, "getloadavg") else 0,
        "fd_total": fd_total,
        "sockets_total": fd_total,
        "mem_limit": node.factory.throttle.high_watermark,
        "mem_alarm": "memory" in alarms,
        "disk_free_limit": 0,
        "disk_free_alarm": "disk" in alarms,
        "rates_mode": "basic",
        "partitions": [],
        "cluster_links": [],
        "mem_calculation_strategy": "rss",
        "exchange_types": exchange_types(),
        "auth_mechanisms": [
            {"name": mechanism.name, "description": f"SASL {mechanism.name}", "enabled": True}
            for mechanism in node.security.mechanisms.enabled
        ],
        "applications": [{"name": "txamqp09", "description": "txamqp09 AMQP broker", "version": __version__}],
        "contexts": contexts(node),
        "log_files": ["<stdout>"],
        "db_dir": node.data_dir(),
        "store_bytes": node.store_bytes(),
        "config_files": [],
        "enabled_plugins": ["management"],
        "python_version": sys.version.split()[0],
    }
    info.update(node.stats.resources(node.resources(), ranges.node_stats))
    info.update(node.stats.churn_rates(ranges.node_stats))
    return info


def entries(node: Node, ranges: Ranges = NO_RANGES) -> list[dict[str, Any]]:
    """*node*'s entry (with histories over *ranges*), and the other members'
    of its group."""
    return node_entries(node, node_info(node, ranges))


def entry(node: Node, name: str, ranges: Ranges = NO_RANGES) -> dict[str, Any]:
    """The entry of *node* or of the member of its group named *name*.

    :raises ApiError: 404 when there is none.
    """
    for each in entries(node, ranges):
        if each["name"] == name:
            return each
    raise not_found()


def list_nodes(request: ApiRequest) -> Any:
    """This node, or the members of its group."""
    return listing(request, entries(request.node, request.ranges()), default_sort=("name",))


def get_node(request: ApiRequest) -> dict[str, Any]:
    """The node (or member of its group) named *node*."""
    return entry(request.node, request.args["node"], request.ranges())
