"""``/api/channels``: list and show channels (monitors see all, others their own)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from txamqp09.management.api import ApiRequest, Router, listing, not_found
from txamqp09.management.endpoints.connections import visible_connections
from txamqp09.management.views import channel_name, channel_view

if TYPE_CHECKING:
    from txamqp09.broker.channel import ServerChannel

__all__ = ["register"]


def register(router: Router) -> None:
    """Add the channel routes."""
    router.add("GET", "/api/channels", list_channels)
    router.add("GET", "/api/vhosts/{vhost}/channels", list_channels)
    router.add("GET", "/api/channels/{name}", get_channel)


def _channels(request: ApiRequest) -> list[ServerChannel]:
    return [channel for connection in visible_connections(request) for channel in connection.channels.values()]


def list_channels(request: ApiRequest) -> Any:
    """The channels the user may see."""
    ranges = request.ranges()
    return listing(request, [channel_view(request.node, channel, ranges=ranges) for channel in _channels(request)])


def get_channel(request: ApiRequest) -> Any:
    """One channel, with its consumers."""
    for channel in _channels(request):
        if channel_name(channel) == request.args["name"]:
            return channel_view(request.node, channel, details=True, ranges=request.ranges())
    raise not_found()
