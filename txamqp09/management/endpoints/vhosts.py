"""``/api/vhosts``: virtual hosts, their description, tags and default queue type."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred

from txamqp09.broker.auth.users import VirtualHost
from txamqp09.management.api import ApiRequest, Reply, Router, bad_request, listing, not_found
from txamqp09.management.configuration import applied, config, created, saved
from txamqp09.management.endpoints.common import refuse_unknown_fields
from txamqp09.management.stats import NO_RANGES, Ranges

__all__ = ["register", "vhost_json"]

#: The fields a vhost's PUT body may have (``tracing`` is accepted, not acted on).
_FIELDS = ("description", "tags", "default_queue_type", "tracing")


def register(router: Router) -> None:
    """Add the vhost endpoints (changes for administrators)."""
    router.add("GET", "/api/vhosts", list_vhosts)
    router.add("GET", "/api/vhosts/{vhost}", get_vhost)
    router.add("PUT", "/api/vhosts/{vhost}", put_vhost, tag="administrator")
    router.add("DELETE", "/api/vhosts/{vhost}", delete_vhost, tag="administrator")


def _metadata(vhost: VirtualHost) -> dict[str, Any]:
    metadata = vhost.extra.get("metadata")
    found = dict(metadata) if isinstance(metadata, dict) else {}
    for key in ("description", "tags", "default_queue_type"):
        if key in vhost.extra and key not in found:
            found[key] = vhost.extra[key]
    return found


def vhost_json(request: ApiRequest, vhost: VirtualHost, ranges: Ranges = NO_RANGES) -> dict[str, Any]:
    """A vhost as RabbitMQ's API shows it: its settings, message rates,
    queue lengths and bytes of its connections (with the histories *ranges* ask for)."""
    metadata = _metadata(vhost)
    tags = metadata.get("tags", [])
    node = request.node
    stats = node.stats
    model = node.broker.add_vhost(vhost.name)
    return {
        "name": vhost.name,
        "description": metadata.get("description", ""),
        "tags": tags.split(",") if isinstance(tags, str) else list(tags),
        "default_queue_type": metadata.get("default_queue_type", "undefined"),
        "metadata": metadata,
        "tracing": False,
        "cluster_state": {node.name: "running"},
        "message_stats": stats.vhost_message_stats(model, ranges.msg_rates),
        **stats.queue_totals([model], ranges.msg_rates),  # RabbitMQ shows a vhost's lengths over the rates' range
        **stats.vhost_traffic(vhost.name, ranges.data_rates),
    }


def list_vhosts(request: ApiRequest) -> Any:
    """The vhosts the user may see."""
    database = config(request).database
    ranges = request.ranges()
    rows = [vhost_json(request, vhost, ranges)
            for vhost in database.vhosts.values() if request.may_see_vhost(vhost.name)]
    return listing(request, rows, ("name",))


def get_vhost(request: ApiRequest) -> dict[str, Any]:
    """One vhost."""
    request.vhost()
    return vhost_json(request, config(request).database.vhosts[request.args["vhost"]], request.ranges())


def put_vhost(request: ApiRequest) -> Deferred[Reply | None]:
    """Create a vhost, or change its description, tags or default queue type."""
    name = request.name("vhost", "Virtual host name")
    body = request.json()
    refuse_unknown_fields(body, _FIELDS)
    existing = config(request).database.vhosts.get(name)
    metadata = _metadata(existing) if existing is not None else {}
    if "description" in body:
        if not isinstance(body["description"], str):
            raise bad_request("description must be a string")
        metadata["description"] = body["description"]
    if "tags" in body:
        tags = body["tags"]
        if isinstance(tags, str):
            tags = [tag.strip() for tag in tags.split(",") if tag.strip()]
        if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
            raise bad_request("tags must be a list of strings or a comma-separated string")
        metadata["tags"] = tags
    if "default_queue_type" in body:
        if body["default_queue_type"] not in ("classic", "quorum", "stream"):
            raise bad_request(f"default_queue_type must be classic, quorum or stream, not {body['default_queue_type']!r}")
        metadata["default_queue_type"] = body["default_queue_type"]
    applied(lambda: config(request).put_vhost(name, {"metadata": metadata} if metadata else None))
    return created(request, existing is not None)


def delete_vhost(request: ApiRequest) -> Deferred[Reply | None]:
    """Delete a vhost with everything in it; its connections are closed."""
    if request.args["vhost"] not in config(request).database.vhosts:
        raise not_found()
    applied(lambda: config(request).delete_vhost(request.args["vhost"]))
    return saved(request)
