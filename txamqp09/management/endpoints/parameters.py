"""``/api/parameters`` and ``/api/global-parameters``: runtime parameters.

Parameters are kept by component, vhost and name (shovels and federation
upstreams keep theirs here); ``vhost-limits`` and ``operator_policy``
entries stand for the vhost limits and operator policies and are listed,
but changed through their own endpoints.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred

from txamqp09.management.api import ApiRequest, Reply, Router, listing, not_found
from txamqp09.management.configuration import applied, config, created, required, saved

__all__ = ["register"]


def register(router: Router) -> None:
    """Add the parameter endpoints (changes for policymakers; global ones for administrators)."""
    router.add("GET", "/api/parameters", list_parameters, tag="policymaker")
    router.add("GET", "/api/parameters/{component}", list_parameters, tag="policymaker")
    router.add("GET", "/api/parameters/{component}/{vhost}", list_parameters, tag="policymaker")
    router.add("GET", "/api/parameters/{component}/{vhost}/{name}", get_parameter, tag="policymaker")
    router.add("PUT", "/api/parameters/{component}/{vhost}/{name}", put_parameter, tag="policymaker")
    router.add("DELETE", "/api/parameters/{component}/{vhost}/{name}", delete_parameter, tag="policymaker")
    router.add("GET", "/api/global-parameters", list_global, tag="administrator")
    router.add("GET", "/api/global-parameters/{name}", get_global, tag="administrator")
    router.add("PUT", "/api/global-parameters/{name}", put_global, tag="administrator")
    router.add("DELETE", "/api/global-parameters/{name}", delete_global, tag="administrator")


def list_parameters(request: ApiRequest) -> Any:
    """The parameters of a component (and vhost), or all."""
    vhost = request.vhost().name if "vhost" in request.args else None
    rows = [
        entry for entry in config(request).parameter_entries(request.args.get("component"), vhost)
        if request.may_see_vhost(entry["vhost"])
    ]
    return listing(request, rows, ("vhost", "component", "name"))


def get_parameter(request: ApiRequest) -> Any:
    """One parameter."""
    args = request.args
    for entry in config(request).parameter_entries(args["component"], args["vhost"]):
        if entry["name"] == args["name"]:
            return entry
    raise not_found()


def put_parameter(request: ApiRequest) -> Deferred[Reply | None]:
    """Set a parameter's ``value``."""
    args = request.args
    request.vhost(use=True)
    name = request.name("name", "Parameter name")
    (value,) = required(request.json(), "value")
    existed = (args["component"], args["vhost"], name) in config(request).parameters
    applied(lambda: config(request).set_parameter(args["component"], args["vhost"], name, value), validation=True)
    return created(request, existed)


def delete_parameter(request: ApiRequest) -> Deferred[Reply | None]:
    """Clear a parameter."""
    args = request.args
    applied(lambda: config(request).clear_parameter(args["component"], args["vhost"], args["name"]))
    return saved(request)


def list_global(request: ApiRequest) -> Any:
    """Every global parameter."""
    rows = [{"name": name, "value": value} for name, value in config(request).global_parameters.items()]
    return listing(request, rows, ("name",))


def get_global(request: ApiRequest) -> Any:
    """One global parameter."""
    name = request.args["name"]
    if name not in config(request).global_parameters:
        raise not_found()
    return {"name": name, "value": config(request).global_parameters[name]}


def put_global(request: ApiRequest) -> Deferred[Reply | None]:
    """Set a global parameter's ``value``."""
    name = request.name("name", "Parameter name")
    (value,) = required(request.json(), "value")
    runtime = config(request)
    existed = name in runtime.global_parameters
    runtime.global_parameters[name] = value
    runtime.save()
    return created(request, existed)


def delete_global(request: ApiRequest) -> Deferred[Reply | None]:
    """Clear a global parameter."""
    runtime = config(request)
    if runtime.global_parameters.pop(request.args["name"], None) is None:
        raise not_found()
    runtime.save()
    return saved(request)
