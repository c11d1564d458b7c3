"""``/api/definitions``: export everything (GET) or import a file (POST).

The format is RabbitMQ's (``rabbitmqctl export_definitions``); see
:class:`~txamqp09.broker.runtime.RuntimeConfig`. An import is checked whole
before anything changes: a bad entry is a 400 (a missing vhost a 404) and
nothing is applied. An import that holds things this broker does not act on
is applied without them and answered 200 with ``{"unsupported": [...]}``
naming each (RabbitMQ answers 204); otherwise 204.
"""

from __future__ import annotations

import json
from typing import Any

from txamqp09.management.api import ApiRequest, Reply, Router, bad_request
from txamqp09.management.configuration import applied, config

__all__ = ["register"]


def register(router: Router) -> None:
    """Add the definitions endpoints (administrators only)."""
    for path in ("/api/definitions", "/api/all-configuration", "/api/definitions/{vhost}"):
        router.add("GET", path, export_definitions, tag="administrator")
        router.add("POST", path, import_definitions, tag="administrator")


def export_definitions(request: ApiRequest) -> Any:
    """The broker's definitions (or one vhost's); ``?download=NAME`` makes
    the answer a file to save, as in RabbitMQ."""
    vhost = request.args.get("vhost")
    exported = applied(lambda: config(request).export(vhost))
    download = request.query.get("download")
    if download:
        return Reply(200, exported, {"Content-Disposition": f'attachment; filename="{download}"'})
    return exported


def import_definitions(request: ApiRequest) -> Reply | None:
    """Import a definitions file sent as the body."""
    try:
        data = json.loads(request.body) if request.body.strip() else None
    except ValueError:
        raise bad_request("not_json") from None
    if not isinstance(data, dict):
        raise bad_request("definitions must be a JSON object")
    report = applied(lambda: config(request).import_definitions(data, request.args.get("vhost")))
    if report.unsupported:
        return Reply(200, {"unsupported": report.unsupported})
    return None
