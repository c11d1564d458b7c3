"""Reading the ``x-`` arguments of declarations and bindings.

Field tables decode long strings as bytes; these helpers accept bytes and
str alike and refuse a bad value with 406 and a text that lists what is
allowed.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from txamqp09.wire.errors import PreconditionFailed

__all__ = ["choice_argument", "count_argument"]


def choice_argument(
    arguments: Mapping[str, Any], name: str, choices: Sequence[str], default: str
) -> str:
    """The value of argument *name*, which must be one of *choices*.

    :raises PreconditionFailed: any other value (406).
    """
    value = arguments.get(name, default)
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if value not in choices:
        raise PreconditionFailed(
            f"invalid argument {name!r}: {value!r}; expected one of {', '.join(choices)}"
        )
    return str(value)


def count_argument(arguments: Mapping[str, Any], name: str) -> Optional[int]:
    """The value of argument *name*, a non-negative integer, or None if absent.

    :raises PreconditionFailed: any other value (406).
    """
    value = arguments.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PreconditionFailed(
            f"invalid argument {name!r}: {value!r}; expected a non-negative integer"
        )
    return value
