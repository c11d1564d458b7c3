"""Health checks: ``/api/aliveness-test/{vhost}`` and ``/api/health/checks/*``.

A failed check answers 503 with RabbitMQ's ``{"status": "failed", "reason":
...}`` body; a passed one 200 ``{"status": "ok"}``. A member of a group
that does not serve (a standby) fails every check, naming its role, before
any of these handlers runs (:mod:`txamqp09.management.web`), so that a load
balancer sends clients to the active member.
"""

from __future__ import annotations

from typing import Any

from txamqp09.management.api import ApiRequest, Reply, Router, bad_request
from txamqp09.management.direct import DirectSession

__all__ = ["register"]

#: The queue the aliveness test publishes to and reads from (RabbitMQ's name).
ALIVENESS_QUEUE = "aliveness-test"
_OK = {"status": "ok"}


def register(router: Router) -> None:
    """Add the health-check routes."""
    router.add("GET", "/api/aliveness-test/{vhost}", aliveness_test)
    router.add("GET", "/api/health/checks/alarms", alarms)
    router.add("GET", "/api/health/checks/local-alarms", local_alarms)
    router.add("GET", "/api/health/checks/virtual-hosts", virtual_hosts)
    router.add("GET", "/api/health/checks/port-listener/{port}", port_listener)
    router.add("GET", "/api/health/checks/is-in-service", is_in_service)


def _failed(reason: str, **details: Any) -> Reply:
    return Reply(503, {"status": "failed", "reason": reason, **details})


def aliveness_test(request: ApiRequest) -> Any:
    """Declare ``aliveness-test``, publish a message to it and get it back."""
    vhost = request.vhost(use=True)
    with DirectSession(vhost) as session:
        session.declare_queue(ALIVENESS_QUEUE)
        session.publish("", ALIVENESS_QUEUE, b"test_message")
        if session.get(ALIVENESS_QUEUE, no_ack=True) is None:
            return _failed("aliveness-test queue is empty")
    return _OK


def _alarm_check(request: ApiRequest, reason: str) -> Any:
    alarms = request.node.alarms()
    if alarms:
        return _failed(reason, alarms=[{"node": request.node.name, "resource": alarm} for alarm in alarms])
    return _OK


def alarms(request: ApiRequest) -> Any:
    """503 while a resource alarm is in effect anywhere (this node is all there is)."""
    return _alarm_check(request, "There are alarms in effect in the cluster")


def local_alarms(request: ApiRequest) -> Any:
    """503 while a resource alarm is in effect on this node."""
    return _alarm_check(request, "There are alarms in effect on the node")


def virtual_hosts(request: ApiRequest) -> Any:
    """Every virtual host runs (they cannot fail separately here)."""
    return _OK


def port_listener(request: ApiRequest) -> Any:
    """200 if the node listens on the port, 503 with the ports it does listen on."""
    try:
        port = int(request.args["port"])
    except ValueError:
        raise bad_request("Invalid port") from None
    ports = [listener.port for listener in request.node.listeners]
    if port in ports:
        return {"status": "ok", "port": port}
    return _failed("No active listener", missing=port, ports=ports)


def is_in_service(request: ApiRequest) -> Any:
    """The node serves clients: alone, or as the active member of its group
    (a member that does not serve fails before this handler)."""
    return _OK
