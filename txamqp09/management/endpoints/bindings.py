"""``/api/bindings``: list, create and delete bindings.

A binding is named in URLs by its ``properties_key`` (the quoted routing
key, and RabbitMQ's hash of its arguments after ``~``). Creating or deleting one
needs, as queue.bind / exchange.bind over AMQP, write permission on the
destination and read permission on the source.
"""

from __future__ import annotations

from typing import Any, Union

from txamqp09.broker.auth.permissions import Permission
from txamqp09.broker.model import Binding, Exchange, Queue, VirtualHost
from txamqp09.management.api import ApiRequest, Reply, Router, listing, not_found
from txamqp09.management.endpoints.common import body_string, body_table, visible_vhosts
from txamqp09.management.endpoints.exchanges import exchange_named
from txamqp09.management.views import binding_view, properties_key

__all__ = ["register"]

def register(router: Router) -> None:
    """Add the binding routes."""
    router.add("GET", "/api/bindings", list_bindings)
    router.add("GET", "/api/bindings/{vhost}", list_bindings)
    router.add("GET", "/api/bindings/{vhost}/e/{source}/{kind}/{destination}", between)
    router.add("POST", "/api/bindings/{vhost}/e/{source}/{kind}/{destination}", create)
    router.add("GET", "/api/bindings/{vhost}/e/{source}/{kind}/{destination}/{props}", get_binding)
    router.add("DELETE", "/api/bindings/{vhost}/e/{source}/{kind}/{destination}/{props}", delete)


def _all(vhost: VirtualHost) -> list[dict[str, Any]]:
    """The vhost's bindings, the default exchange's implicit ones included."""
    rows = [
        {"source": "", "vhost": vhost.name, "destination": queue.name, "destination_type": "queue",
         "routing_key": queue.name, "arguments": {}, "properties_key": queue.name}
        for queue in vhost.queues.values()
    ]
    for exchange in vhost.exchanges.values():
        rows += [binding_view(binding, vhost.name) for binding in exchange.bindings.values()]
    return rows


def list_bindings(request: ApiRequest) -> Any:
    """Every binding the user may see (of one vhost when it is given)."""
    return listing(request, [row for vhost in visible_vhosts(request) for row in _all(vhost)], ())


def _ends(request: ApiRequest, vhost: VirtualHost) -> tuple[Exchange, Union[Queue, Exchange]]:
    source = exchange_named(vhost, request.args["source"])
    name = request.args["destination"]
    kind = request.args["kind"]
    destination: Union[Queue, Exchange, None]
    if kind == "q":
        destination = vhost.queues.get(name)
    elif kind == "e":
        destination = vhost.exchanges.get(name)
    else:
        raise not_found()
    if destination is None:
        raise not_found()
    return source, destination


def _between(source: Exchange, destination: Union[Queue, Exchange]) -> list[Binding]:
    return [binding for binding in source.bindings.values() if binding.destination is destination]


def between(request: ApiRequest) -> Any:
    """The bindings from an exchange to a queue (``q``) or exchange (``e``)."""
    vhost = request.vhost()
    source, destination = _ends(request, vhost)
    return listing(request, [binding_view(binding, vhost.name) for binding in _between(source, destination)], ())


def _named(request: ApiRequest, vhost: VirtualHost) -> Binding:
    source, destination = _ends(request, vhost)
    for binding in _between(source, destination):
        if properties_key(binding.routing_key, dict(binding.arguments)) == request.args["props"]:
            return binding
    raise not_found()


def get_binding(request: ApiRequest) -> Any:
    """One binding, by its properties key."""
    vhost = request.vhost()
    return binding_view(_named(request, vhost), vhost.name)


def _check(request: ApiRequest, vhost: VirtualHost, source: Exchange, destination: Union[Queue, Exchange]) -> None:
    request.check(Permission.WRITE, vhost.name, destination.name)
    request.check(Permission.READ, vhost.name, source.name)


def create(request: ApiRequest) -> Reply:
    """Bind; 201 with the new binding's properties key in ``Location``."""
    vhost = request.vhost(use=True)
    source, destination = _ends(request, vhost)
    body = request.json()
    routing_key = body_string(body, "routing_key", "")
    arguments = body_table(body, "arguments")
    _check(request, vhost, source, destination)
    if isinstance(destination, Queue):
        vhost.bind_queue(destination.name, source.name, routing_key, arguments, destination.exclusive_owner)
    else:
        vhost.bind_exchange(destination.name, source.name, routing_key, arguments)
    location = f"{request.args['destination']}/{properties_key(routing_key, arguments)}"
    return Reply(201, None, {"Location": location})


def delete(request: ApiRequest) -> None:
    """Remove the binding a properties key names."""
    vhost = request.vhost(use=True)
    binding = _named(request, vhost)
    _check(request, vhost, binding.source, binding.destination)
    if isinstance(binding.destination, Queue):
        vhost.unbind_queue(
            binding.destination.name, binding.source.name, binding.routing_key, binding.arguments,
            binding.destination.exclusive_owner,
        )
    else:
        vhost.unbind_exchange(binding.destination.name, binding.source.name, binding.routing_key, binding.arguments)
