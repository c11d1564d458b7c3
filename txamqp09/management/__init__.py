"""The management HTTP API, in RabbitMQ 3.10's dialect.

=============================  ================================================
module                         what it holds
=============================  ================================================
:mod:`.web`                    HTTP: authentication, dispatch, JSON answers
:mod:`.endpoints`              one module per topic (queues, exchanges, ...)
:mod:`.api`                    the framework: requests, routes, lists
                               (its docstring tells how to add endpoints)
:mod:`.group`                  the broker's group, as the API shows it
:mod:`.node`                   the broker facade the endpoints work on
:mod:`.rows`, :mod:`.views`    kept queue rows; the objects' JSON shapes
                               (neither imports the other)
:mod:`.stats`                  rates, totals and histories of the counters
:mod:`.pages`                  pages of lists
:mod:`.answers`                errors, replies and encoded JSON
:mod:`.base`                   the node as the modules below it see it
=============================  ================================================

The modules stand in that order, each importing only from those below it
(docs/architecture.rst draws the whole order).

``twistd amqp09 --management tcp:15672:interface=127.0.0.1`` serves it;
docs/management.rst describes the API.
"""

from txamqp09.management.api import ApiError, ApiRequest, Reply, Router, listing
from txamqp09.management.node import Node, RecordingEndpoint
from txamqp09.management.web import make_site

__all__ = ["ApiError", "ApiRequest", "Node", "RecordingEndpoint", "Reply", "Router", "listing", "make_site"]
