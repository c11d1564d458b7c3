"""``/api/connections``: list, show and close AMQP connections.

Monitors and administrators see every connection; other users their own.
Closing (``DELETE``) sends connection.close 320 CONNECTION_FORCED with the
``X-Reason`` header's text (RabbitMQ's default text otherwise); it is for
administrators and for the connection's own user.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from txamqp09.management.api import ApiRequest, Router, listing, not_authorised, not_found
from txamqp09.management.views import channel_view, connection_name, connection_view
from txamqp09.wire.errors import ConnectionForced

if TYPE_CHECKING:
    from txamqp09.broker.server import ServerConnection

__all__ = ["register", "visible_connections"]

#: The close reason when the request gives none (RabbitMQ's).
DEFAULT_REASON = "Closed via management plugin"


def register(router: Router) -> None:
    """Add the connection routes."""
    router.add("GET", "/api/connections", list_connections)
    router.add("GET", "/api/vhosts/{vhost}/connections", list_connections)
    router.add("GET", "/api/connections/{name}", get_connection)
    router.add("DELETE", "/api/connections/{name}", close_connection)
    router.add("GET", "/api/connections/{name}/channels", connection_channels)


def visible_connections(request: ApiRequest) -> list[ServerConnection]:
    """The open connections the user may see (of the path's vhost, if any)."""
    vhost = request.vhost().name if "vhost" in request.args else None
    monitor = request.is_tagged("monitoring")
    return [
        connection for connection in request.node.connections
        if (vhost is None or connection.vhost == vhost)
        and (monitor or (connection.user is not None and connection.user.name == request.user.name))
    ]


def list_connections(request: ApiRequest) -> Any:
    """The connections the user may see."""
    ranges = request.ranges()
    return listing(request, [connection_view(request.node, connection, ranges)
                             for connection in visible_connections(request)])


def _connection(request: ApiRequest) -> ServerConnection:
    name = request.args["name"]
    for connection in visible_connections(request):
        if connection_name(connection) == name:
            return connection
    raise not_found()


def get_connection(request: ApiRequest) -> Any:
    """One connection."""
    return connection_view(request.node, _connection(request), request.ranges())


def close_connection(request: ApiRequest) -> None:
    """Close a connection with 320 and the ``X-Reason`` text."""
    connection = _connection(request)
    own = connection.user is not None and connection.user.name == request.user.name
    if not (own or request.is_tagged("administrator")):
        raise not_authorised("Not administrator user")
    reason = request.headers.get("x-reason") or DEFAULT_REASON
    connection.close(ConnectionForced(f"CONNECTION_FORCED - {reason}"))


def connection_channels(request: ApiRequest) -> Any:
    """The channels of one connection."""
    connection = _connection(request)
    ranges = request.ranges()
    return listing(request, [channel_view(request.node, channel, ranges=ranges) for channel in connection.channels.values()])
