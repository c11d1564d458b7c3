"""``/api/shovels``: the shovels' status (RabbitMQ's shovel management plugin).

Each row is RabbitMQ's: ``node``, ``timestamp``, ``name``, ``vhost`` (not
for a static shovel, which only administrators see), ``type`` (``dynamic``
or ``static``), ``state`` (``starting``, ``running``,
``terminated``); a running shovel adds ``src_uri`` and ``dest_uri``
(without credentials), the protocols and its source and destination; a
terminated one its ``reason``. ``DELETE /api/shovels/vhost/{vhost}/{name}``
deletes a shovel (its parameter is cleared) and ``.../restart`` restarts
it, as RabbitMQ's plugin does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from txamqp09.management.api import ApiRequest, Reply, Router, not_found

if TYPE_CHECKING:
    from txamqp09.shovel.service import ShovelService

__all__ = ["register"]


def register(router: Router) -> None:
    """Add the shovel endpoints (seen by who may see the vhost; restart and
    delete for policymakers)."""
    router.add("GET", "/api/shovels", list_shovels)
    router.add("GET", "/api/shovels/{vhost}", list_shovels)
    router.add("DELETE", "/api/shovels/vhost/{vhost}/{name}", delete_shovel, tag="policymaker")
    router.add("DELETE", "/api/shovels/vhost/{vhost}/{name}/restart", restart_shovel, tag="policymaker")


def _rows(request: ApiRequest, vhost: Optional[str]) -> list[dict[str, Any]]:
    """The shovels' rows the user may see: those of the vhosts they see;
    static shovels (no vhost) for administrators only, as RabbitMQ's."""
    shovels = request.node.shovels
    if shovels is None:
        return []
    return [
        {"node": request.node.name, **row} for row in shovels.status(vhost)
        if (request.may_see_vhost(row["vhost"]) if "vhost" in row else request.is_tagged("administrator"))
    ]


def list_shovels(request: ApiRequest) -> Any:
    """Every shovel, or those of one vhost."""
    vhost = request.vhost().name if "vhost" in request.args else None
    return _rows(request, vhost)


def restart_shovel(request: ApiRequest) -> Optional[Reply]:
    """Stop a shovel and start it again (204; 404 when there is none)."""
    vhost, name, shovels = _named_shovel(request)
    if not shovels.restart(vhost, name):
        raise not_found()
    return None


def delete_shovel(request: ApiRequest) -> Optional[Reply]:
    """Delete a shovel: its parameter is cleared and it stops (204; 404
    when there is none)."""
    vhost, name, shovels = _named_shovel(request)
    if not shovels.delete(vhost, name):
        raise not_found()
    return None


def _named_shovel(request: ApiRequest) -> tuple[str, str, ShovelService]:
    """The vhost and name of the shovel the path names, and the shovel
    service (404 when the broker runs none)."""
    vhost = request.vhost(use=True).name
    shovels = request.node.shovels
    if shovels is None:
        raise not_found()
    return vhost, request.args["name"], shovels
