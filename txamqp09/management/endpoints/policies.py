"""``/api/policies`` and ``/api/operator-policies``.

A policy changes what matches it at once: see :mod:`txamqp09.broker.model.policy`.
Policies are for policymakers, operator policies for administrators, as in
RabbitMQ; any management user may list the policies of the vhosts they see.
"""

from __future__ import annotations

from typing import Any, Callable

from txamqp09.management.api import ApiRequest, Reply, Router, listing, not_found
from txamqp09.management.configuration import applied, config, created, required

__all__ = ["register"]


def register(router: Router) -> None:
    """Add the policy and operator-policy endpoints."""
    for base, operator, tag in (("/api/policies", False, "policymaker"),
                                ("/api/operator-policies", True, "administrator")):
        router.add("GET", base, _lister(operator))
        router.add("GET", base + "/{vhost}", _lister(operator))
        router.add("GET", base + "/{vhost}/{name}", _getter(operator))
        router.add("PUT", base + "/{vhost}/{name}", _putter(operator), tag=tag)
        router.add("DELETE", base + "/{vhost}/{name}", _deleter(operator), tag=tag)


def _lister(operator: bool) -> Callable[[ApiRequest], Any]:
    def list_policies(request: ApiRequest) -> Any:
        """The policies of one vhost (or of every vhost the user sees)."""
        vhost = request.vhost().name if "vhost" in request.args else None
        policies = config(request).policies(vhost, operator=operator)
        rows = [policy.to_json() for policy in policies if request.may_see_vhost(policy.vhost)]
        return listing(request, rows)

    return list_policies


def _getter(operator: bool) -> Callable[[ApiRequest], Any]:
    def get_policy(request: ApiRequest) -> Any:
        """One policy."""
        vhost = request.vhost().name
        for policy in config(request).policies(vhost, operator=operator):
            if policy.name == request.args["name"]:
                return policy.to_json()
        raise not_found()

    return get_policy


def _putter(operator: bool) -> Callable[[ApiRequest], Any]:
    def put_policy(request: ApiRequest) -> Reply | None:
        """Set a policy: ``pattern``, ``definition``, ``priority``, ``apply-to``."""
        vhost, name = request.vhost(use=True).name, request.name("name", "Policy name")
        body = request.json()
        required(body, "pattern", "definition")
        existed = any(policy.name == name for policy in config(request).policies(vhost, operator=operator))
        applied(lambda: config(request).put_policy(vhost, name, body, operator=operator), validation=True)
        return created(existed)

    return put_policy


def _deleter(operator: bool) -> Callable[[ApiRequest], Any]:
    def delete_policy(request: ApiRequest) -> None:
        """Remove a policy; what it applied to falls back to the next match."""
        vhost, name = request.vhost(use=True).name, request.args["name"]
        if not any(policy.name == name for policy in config(request).policies(vhost, operator=operator)):
            raise not_found()
        applied(lambda: config(request).delete_policy(vhost, name, operator=operator))

    return delete_policy
