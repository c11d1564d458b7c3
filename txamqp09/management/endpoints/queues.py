"""``/api/queues``: list, declare, delete, purge, get from, and a queue's bindings.

Declaring, deleting, purging and getting check the user's configure / read
permissions on the queue as queue.declare, queue.delete, queue.purge and
basic.get do over AMQP.
"""

from __future__ import annotations

import base64
from typing import Any, Optional

from txamqp09.broker.auth.permissions import Permission
from txamqp09.broker.model import Client, Queue, VirtualHost
from txamqp09.management.api import ApiRequest, Basic, Reply, Router, bad_request, listing, not_found
from txamqp09.management.direct import DirectSession
from txamqp09.management.endpoints.common import (
    body_flag,
    body_int,
    body_table,
    query_flag,
    visible_vhosts,
)
from txamqp09.management.rows import sort_keys
from txamqp09.management.stats import NO_RANGES
from txamqp09.management.views import binding_view, jsonable, queue_view

__all__ = ["register"]

#: ``ackmode`` values of ``/get``: (acknowledge, requeue).
_ACK_MODES = {
    "ack_requeue_true": (False, True),
    "ack_requeue_false": (True, False),
    "reject_requeue_true": (False, True),
    "reject_requeue_false": (False, False),
}


def register(router: Router) -> None:
    """Add the queue routes."""
    router.add("GET", "/api/queues", list_queues)
    router.add("GET", "/api/queues/{vhost}", list_queues)
    router.add("GET", "/api/queues/{vhost}/{name}", get_queue)
    router.add("PUT", "/api/queues/{vhost}/{name}", put_queue)
    router.add("DELETE", "/api/queues/{vhost}/{name}", delete_queue)
    router.add("DELETE", "/api/queues/{vhost}/{name}/contents", purge_queue)
    router.add("POST", "/api/queues/{vhost}/{name}/get", get_messages)
    router.add("GET", "/api/queues/{vhost}/{name}/bindings", queue_bindings)


def list_queues(request: ApiRequest) -> Any:
    """Every queue the user may see (of one vhost when it is given).

    Without ``columns`` or histories, and sorted by name or vhost (the
    default), the answer is made of the node's kept rows and orders
    (:mod:`txamqp09.management.rows`): only rows whose queue changed are
    built again, and a page is a slice of a kept order. Otherwise a page
    builds only that page's rows, and the whole list builds every row.
    """
    node = request.node
    vhosts = visible_vhosts(request)
    ranges = request.ranges(ceil_lengths=True)
    keys = sort_keys(request.query)
    if keys is not None and ranges == NO_RANGES and not request.query.get("columns"):
        return node.queue_rows.answer(vhosts, request.query, keys)
    unacked = node.unacked()
    rows = [Basic(queue, name=queue.name, vhost=vhost.name) for vhost in vhosts for queue in vhost.queues.values()]
    return listing(request, rows,
                   expand=lambda queue: queue_view(node, queue, unacked.get(queue, (0, 0)), ranges=ranges))


def _queue(request: ApiRequest, vhost: VirtualHost) -> Queue:
    queue = vhost.queues.get(request.args["name"])
    if queue is None:
        raise not_found()
    return queue


def get_queue(request: ApiRequest) -> Any:
    """One queue, with its consumers."""
    queue = _queue(request, request.vhost())
    node = request.node
    return queue_view(node, queue, node.unacked().get(queue, (0, 0)), details=True,
                      ranges=request.ranges(ceil_lengths=True))


def put_queue(request: ApiRequest) -> Reply:
    """Declare a queue: 201 when created, 204 when an equivalent one exists."""
    vhost = request.vhost(use=True)
    name = request.name("name", "queue")
    body = request.json()
    durable = body_flag(body, "durable")
    auto_delete = body_flag(body, "auto_delete")
    arguments = body_table(body, "arguments")
    request.check(Permission.CONFIGURE, vhost.name, name)
    existed = name in vhost.queues
    with DirectSession(vhost) as session:
        vhost.declare_queue(name, session.client, durable=durable, auto_delete=auto_delete, arguments=arguments)
    return Reply(204 if existed else 201)


def delete_queue(request: ApiRequest) -> None:
    """Delete a queue (``if-empty`` / ``if-unused`` refuse with 400)."""
    vhost = request.vhost(use=True)
    queue = _queue(request, vhost)
    request.check(Permission.CONFIGURE, vhost.name, queue.name)
    vhost.delete_queue_named(
        queue.name,
        queue.exclusive_owner or Client(),
        if_empty=query_flag(request, "if-empty"),
        if_unused=query_flag(request, "if-unused"),
    )


def purge_queue(request: ApiRequest) -> None:
    """Drop a queue's ready messages."""
    vhost = request.vhost(use=True)
    queue = _queue(request, vhost)
    request.check(Permission.READ, vhost.name, queue.name)
    queue.purge()


def _payload(body: bytes, encoding: str, truncate: Optional[int]) -> tuple[str, str]:
    """(payload, payload_encoding) as RabbitMQ's ``/get`` shows a body."""
    if truncate is not None:
        body = body[:truncate]
    if encoding == "auto":
        try:
            return body.decode("utf-8"), "string"
        except UnicodeDecodeError:
            pass
    return base64.b64encode(body).decode("ascii"), "base64"


def get_messages(request: ApiRequest) -> list[dict[str, Any]]:
    """Take up to ``count`` messages, then ack, reject or requeue them as ``ackmode`` says."""
    vhost = request.vhost(use=True)
    queue = _queue(request, vhost)
    body = request.json()
    missing = [key for key in ("count", "ackmode", "encoding") if key not in body]
    if missing:
        raise bad_request(f"missing fields: {', '.join(missing)}")
    count = body_int(body, "count", 1) or 1
    truncate = body_int(body, "truncate")
    mode, encoding = body["ackmode"], body["encoding"]
    if mode not in _ACK_MODES:
        raise bad_request(f"ackmode must be one of {', '.join(_ACK_MODES)}, not {mode!r}")
    if encoding not in ("auto", "base64"):
        raise bad_request(f"encoding must be auto or base64, not {encoding!r}")
    request.check(Permission.READ, vhost.name, queue.name)
    acknowledge, requeue = _ACK_MODES[mode]
    answers = []
    with DirectSession(vhost) as session:
        got = []
        for _ in range(count):
            result = session.get(queue.name, no_ack=False)
            if result is None:
                break
            got.append(result)
            tag, redelivered, message = result
            payload, payload_encoding = _payload(message.body or b"", encoding, truncate)
            answers.append({
                "payload_bytes": message.size,
                "redelivered": redelivered,
                "exchange": message.exchange,
                "routing_key": message.routing_key,
                "message_count": queue.message_count,
                "properties": _properties(message.properties),
                "payload": payload,
                "payload_encoding": payload_encoding,
            })
        for tag, _, _ in got:
            if acknowledge:
                session.ack(tag)
            else:
                session.reject(tag, requeue)
    return answers


def _properties(properties: Any) -> dict[str, Any]:
    """The set content properties by name."""
    return {name: jsonable(value) for name, value in properties.fields().items() if value is not None}


def queue_bindings(request: ApiRequest) -> Any:
    """The queue's bindings, the default exchange's first."""
    vhost = request.vhost()
    queue = _queue(request, vhost)
    default = {
        "source": "", "vhost": vhost.name, "destination": queue.name, "destination_type": "queue",
        "routing_key": queue.name, "arguments": {}, "properties_key": queue.name,
    }
    return [default] + [binding_view(binding, vhost.name) for binding in queue.bindings]
