"""The management API's endpoints, one module per topic.

Each module has ``register(router)``; :data:`MODULES` is the list the API
loads (see :mod:`txamqp09.management.api` for how to write one).
"""

from __future__ import annotations

from types import ModuleType

from txamqp09.management.endpoints import (
    bindings,
    channels,
    connections,
    consumers,
    definitions,
    exchanges,
    extensions,
    federation,
    health,
    limits,
    nodes,
    overview,
    parameters,
    permissions,
    policies,
    queues,
    shovels,
    users,
    vhosts,
    whoami,
)

__all__ = ["MODULES"]

#: The endpoint modules, in registration order.
MODULES: list[ModuleType] = [
    overview,
    nodes,
    whoami,
    connections,
    channels,
    consumers,
    exchanges,
    queues,
    bindings,
    health,
    extensions,
    users,
    vhosts,
    permissions,
    policies,
    parameters,
    limits,
    definitions,
    shovels,
    federation,
]
