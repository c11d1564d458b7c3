"""The management API's endpoints, one module per topic.

Each module has ``register(router)``; :data:`MODULES` is the list the API
loads (see :mod:`txamqp09.management.api` for how to write one).
"""

from __future__ import annotations

from types import ModuleType

from txamqp09.management.endpoints import (
    extensions,
    health,
    nodes,
    overview,
    whoami,
)

__all__ = ["MODULES"]

#: The endpoint modules, in registration order.
MODULES: list[ModuleType] = [
    overview,
    nodes,
    whoami,
    health,
    extensions,
]
