"""``/api/exchanges``: list, declare, delete, publish to, and an exchange's bindings.

The default exchange is named ``""`` in answers and ``amq.default`` in paths.
Declaring and deleting need configure permission on the exchange,
publishing needs write permission, as over AMQP.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from txamqp09.broker.auth.permissions import Permission
from txamqp09.broker.model import Exchange, VirtualHost
from txamqp09.management.api import ApiRequest, Reply, Router, bad_request, listing, not_found
from txamqp09.management.direct import DirectSession
from txamqp09.management.endpoints.common import body_flag, body_string, body_table, query_flag, visible_vhosts
from txamqp09.management.views import binding_view, exchange_view

__all__ = ["register", "exchange_named"]

#: The default exchange's name in paths.
DEFAULT_EXCHANGE = "amq.default"
#: Content properties /publish accepts, with the type each must have.
_PROPERTY_TYPES: dict[str, tuple[type, ...]] = {
    "content_type": (str,), "content_encoding": (str,), "headers": (dict,), "delivery_mode": (int,),
    "priority": (int,), "correlation_id": (str,), "reply_to": (str,), "expiration": (str,),
    "message_id": (str,), "timestamp": (int,), "type": (str,), "user_id": (str,), "app_id": (str,),
}


def register(router: Router) -> None:
    """Add the exchange routes."""
    router.add("GET", "/api/exchanges", list_exchanges)
    router.add("GET", "/api/exchanges/{vhost}", list_exchanges)
    router.add("GET", "/api/exchanges/{vhost}/{name}", get_exchange)
    router.add("PUT", "/api/exchanges/{vhost}/{name}", put_exchange)
    router.add("DELETE", "/api/exchanges/{vhost}/{name}", delete_exchange)
    router.add("GET", "/api/exchanges/{vhost}/{name}/bindings/source", source_bindings)
    router.add("GET", "/api/exchanges/{vhost}/{name}/bindings/destination", destination_bindings)
    router.add("POST", "/api/exchanges/{vhost}/{name}/publish", publish)


def exchange_named(vhost: VirtualHost, name: str) -> Exchange:
    """The exchange a path names (``amq.default`` is the default exchange); 404 if none."""
    exchange = vhost.exchanges.get("" if name == DEFAULT_EXCHANGE else name)
    if exchange is None:
        raise not_found()
    return exchange


def list_exchanges(request: ApiRequest) -> Any:
    """Every exchange the user may see (of one vhost when it is given)."""
    ranges = request.ranges()
    rows = [
        exchange_view(request.node, exchange, vhost.name, ranges)
        for vhost in visible_vhosts(request)
        for exchange in vhost.exchanges.values()
    ]
    return listing(request, rows)


def get_exchange(request: ApiRequest) -> Any:
    """One exchange."""
    vhost = request.vhost()
    view = exchange_view(request.node, exchange_named(vhost, request.args["name"]), vhost.name, request.ranges())
    view["incoming"] = []
    view["outgoing"] = []
    return view


def put_exchange(request: ApiRequest) -> Reply:
    """Declare an exchange: 201 when created, 204 when an equivalent one exists."""
    vhost = request.vhost(use=True)
    name = request.name("name", "exchange")
    body = request.json()
    kind = body_string(body, "type", "direct")
    durable = body_flag(body, "durable")
    auto_delete = body_flag(body, "auto_delete")
    internal = body_flag(body, "internal")
    arguments = body_table(body, "arguments")
    if name == DEFAULT_EXCHANGE:
        raise bad_request("the default exchange cannot be declared")
    request.check(Permission.CONFIGURE, vhost.name, name)
    existed = name in vhost.exchanges
    vhost.declare_exchange(name, kind, durable=durable, auto_delete=auto_delete, internal=internal, arguments=arguments)
    return Reply(204 if existed else 201)


def delete_exchange(request: ApiRequest) -> None:
    """Delete an exchange (``if-unused`` refuses with 400 while it has bindings)."""
    vhost = request.vhost(use=True)
    exchange = exchange_named(vhost, request.args["name"])
    request.check(Permission.CONFIGURE, vhost.name, exchange.name)
    vhost.delete_exchange(exchange.name, if_unused=query_flag(request, "if-unused"))


def source_bindings(request: ApiRequest) -> Any:
    """The bindings whose source is the exchange."""
    vhost = request.vhost()
    exchange = exchange_named(vhost, request.args["name"])
    return listing(request, [binding_view(binding, vhost.name) for binding in exchange.bindings.values()], ())


def destination_bindings(request: ApiRequest) -> Any:
    """The bindings whose destination is the exchange."""
    vhost = request.vhost()
    exchange = exchange_named(vhost, request.args["name"])
    return listing(request, [binding_view(binding, vhost.name) for binding in exchange.inbound], ())


def publish(request: ApiRequest) -> dict[str, bool]:
    """Publish one message; ``{"routed": false}`` when no queue took it."""
    vhost = request.vhost(use=True)
    exchange = exchange_named(vhost, request.args["name"])
    body = request.json()
    missing = [key for key in ("properties", "routing_key", "payload", "payload_encoding") if key not in body]
    if missing:
        raise bad_request(f"missing fields: {', '.join(missing)}")
    routing_key = body_string(body, "routing_key")
    payload = body_string(body, "payload")
    encoding = body_string(body, "payload_encoding")
    if encoding == "string":
        data = payload.encode("utf-8")
    elif encoding == "base64":
        try:
            data = base64.b64decode(payload, validate=True)
        except binascii.Error:
            raise bad_request("payload is not valid base64") from None
    else:
        raise bad_request(f"payload_encoding must be string or base64, not {encoding!r}")
    properties = _properties(body["properties"])
    request.check(Permission.WRITE, vhost.name, exchange.name)
    with DirectSession(vhost) as session:
        return {"routed": session.publish(exchange.name, routing_key, data, properties)}


def _properties(given: Any) -> dict[str, Any]:
    """The content properties of a /publish body (400 for unknown or mistyped ones)."""
    if not isinstance(given, dict):
        raise bad_request(f"properties must be an object, not {given!r}")
    for name, value in given.items():
        types = _PROPERTY_TYPES.get(name)
        if types is None:
            raise bad_request(f"unknown property {name!r}; known: {', '.join(_PROPERTY_TYPES)}")
        if not isinstance(value, types) or isinstance(value, bool):
            raise bad_request(f"property {name} has the wrong type: {value!r}")
    return dict(given)
