"""The management HTTP API, in RabbitMQ 3.10's dialect.

=============================  ================================================
module                         what it holds
=============================  ================================================
:mod:`.api`                    the framework: errors, requests, routes, lists
                               (its docstring tells how to add endpoints)
:mod:`.node`                   the broker facade the endpoints work on
:mod:`.web`                    HTTP: authentication, dispatch, JSON answers
:mod:`.endpoints`              one module per topic (queues, exchanges, ...)
=============================  ================================================

``twistd amqp09 --management tcp:15672:interface=127.0.0.1`` serves it;
docs/management.rst describes the API.
"""

from txamqp09.management.api import ApiError, ApiRequest, Reply, Router, listing
from txamqp09.management.node import Node, RecordingEndpoint
from txamqp09.management.web import make_site

__all__ = ["ApiError", "ApiRequest", "Node", "RecordingEndpoint", "Reply", "Router", "listing", "make_site"]
