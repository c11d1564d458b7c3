"""RabbitMQ-style permissions: configure, write and read regular expressions.

A user holds, per virtual host, three regular expressions. An operation that
needs a permission on a resource is allowed when the expression for that
permission *matches somewhere in* the resource's name (a search, not a full
match: ``"^amq\\."`` and ``"log"`` both work as RabbitMQ users expect).

* An empty expression allows nothing.
* The default exchange, named ``""`` on the wire, is checked under the name
  ``"amq.default"`` (queue names are never empty when checked: the broker
  resolves an empty queue name to the generated or last-declared one first).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field

__all__ = ["DEFAULT_EXCHANGE", "Permission", "Permissions", "ResourceKind", "checked_name"]

#: The name under which permissions see the default exchange.
DEFAULT_EXCHANGE = "amq.default"


class Permission(str, enum.Enum):
    """The three things a user may do to a resource."""

    #: create, delete, or change the behaviour of a resource.
    CONFIGURE = "configure"
    #: inject messages into a resource (publish to an exchange, bind a queue).
    WRITE = "write"
    #: take messages out of a resource (consume, get, purge, bind from).
    READ = "read"


class ResourceKind(str, enum.Enum):
    """The kinds of named resource a permission is checked against."""

    EXCHANGE = "exchange"
    QUEUE = "queue"


def checked_name(name: str) -> str:
    """The name a permission is matched against: ``""`` becomes ``amq.default``."""
    return name or DEFAULT_EXCHANGE


@dataclass(frozen=True)
class Permissions:
    """One user's configure, write and read expressions on one virtual host.

    :raises ValueError: an expression is not a valid regular expression.
    """

    configure: str
    write: str
    read: str
    _compiled: dict[Permission, re.Pattern[str] | None] = field(
        init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        compiled: dict[Permission, re.Pattern[str] | None] = {}
        for permission in Permission:
            expression = getattr(self, permission.value)
            try:
                compiled[permission] = re.compile(expression) if expression else None
            except re.error as error:
                raise ValueError(
                    f"{permission.value} permission {expression!r} is not a regular "
                    f"expression: {error}"
                ) from None
        object.__setattr__(self, "_compiled", compiled)

    def allows(self, permission: Permission, name: str) -> bool:
        """Whether ``permission`` on the resource called ``name`` is granted."""
        pattern = self._compiled[permission]
        return pattern is not None and pattern.search(checked_name(name)) is not None

    def holds(self, permission: Permission) -> bool:
        """Whether ``permission`` is granted on some resource (its expression is not empty)."""
        return self._compiled[permission] is not None
