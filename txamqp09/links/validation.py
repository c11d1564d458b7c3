"""RabbitMQ's checks of runtime-parameter values, with its texts.

RabbitMQ's plugins check a parameter's JSON value field by field
(``rabbit_parameter_validation``) and answer a management ``PUT`` that
fails with every problem, one line each, the offending values written as
Erlang terms (``<<"text">>`` for a string). :func:`proplist_errors` does
the same with :class:`Rule` lists, so a value refused by RabbitMQ is refused
here with the same text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Check",
    "Rule",
    "binary",
    "boolean",
    "enum",
    "erlang_term",
    "number",
    "proplist_errors",
    "queue_name",
]

#: A check of one field: ``check(key, value)`` gives its problems (none: valid).
Check = Callable[[str, Any], list[str]]


def erlang_term(value: Any) -> str:
    """*value* (decoded JSON) as RabbitMQ prints it in its texts (``~p``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return "<<" + json.dumps(value, ensure_ascii=False) + ">>"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, Mapping):
        return "[" + ",".join(f"{{{erlang_term(key)},{erlang_term(item)}}}" for key, item in value.items()) + "]"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(erlang_term(item) for item in value) + "]"
    return repr(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def number(key: str, value: Any) -> list[str]:
    """A JSON number."""
    return [] if _is_number(value) else [f"{key} should be a number, actually was {erlang_term(value)}"]


def binary(key: str, value: Any) -> list[str]:
    """A JSON string."""
    return [] if isinstance(value, str) else [f"{key} should be binary, actually was {erlang_term(value)}"]


def boolean(key: str, value: Any) -> list[str]:
    """``true`` or ``false``."""
    return [] if isinstance(value, bool) else [f"{key} should be boolean, actually was {erlang_term(value)}"]


def queue_name(key: str, value: Any) -> list[str]:
    """A string of at most 255 bytes (an AMQP 0-9-1 queue name)."""
    if not isinstance(value, str):
        return binary(key, value)
    size = len(value.encode("utf-8"))
    return [] if size <= 255 else [f"{key} should be less than 255 bytes, actually was {size}"]


def enum(*options: str) -> Check:
    """One of *options* (strings)."""

    def check(key: str, value: Any) -> list[str]:
        if not isinstance(value, str):
            return binary(key, value)
        if value in options:
            return []
        return [f"{key} should be one of {erlang_term(list(options))}, actually was {erlang_term(value)}"]

    return check


@dataclass(frozen=True)
class Rule:
    """One field of an object: its *key*, its *check*, whether it must be there."""

    key: str
    check: Check
    mandatory: bool = False


def proplist_errors(where: str, rules: Sequence[Rule], value: Any) -> list[str]:
    """The problems of object *value* (named *where* in the texts) against
    *rules*, in RabbitMQ's order: unknown keys first, then the rules' last
    to first."""
    if not isinstance(value, Mapping):
        return [f"{where} not a list {erlang_term(value)}"]
    found: list[list[str]] = []
    for rule in rules:
        if rule.key in value:
            found.append(rule.check(rule.key, value[rule.key]))
        elif rule.mandatory:
            found.append([f'Key "{rule.key}" not found in {where}'])
    errors = [text for texts in reversed(found) for text in texts]
    known = {rule.key for rule in rules}
    unknown = {key: item for key, item in value.items() if key not in known}
    if unknown:
        errors.insert(0, f"Unrecognised terms {erlang_term(unknown)} in {where}")
    return errors
