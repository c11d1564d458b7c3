"""Matching rules of the topic and headers exchanges.

Topic keys are dot-separated words; in a binding key ``*`` matches exactly
one word and ``#`` matches zero or more words, as RabbitMQ matches them: the
empty key has no words, so ``#`` matches it and ``*`` does not, and ``a.#``
matches ``a``. Binding keys live in a trie walked once per routing key;
exchanges cache the results per routing key.

Headers bindings compare the ``x-match`` rule of the binding with a
message's ``headers`` table: ``all`` (the default) or ``any`` of the
binding's arguments must equal the message's, ignoring arguments whose names
start with ``x-``; ``all-with-x`` and ``any-with-x`` include those too. An
argument without a value (void) matches any message that has the header.
"""

from __future__ import annotations

import decimal
from typing import Any, Hashable, Mapping

from txamqp09.broker.model.arguments import field_type
from txamqp09.wire.errors import PreconditionFailed
from txamqp09.wire.fields import field_text

__all__ = ["TopicTrie", "topic_words", "XMatch", "parse_x_match", "headers_match", "freeze"]


def topic_words(key: str) -> tuple[str, ...]:
    """The words of a topic routing or binding key ("" has none)."""
    return tuple(key.split(".")) if key else ()


class _Node:
    __slots__ = ("children", "destinations")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        #: destination -> how many bindings with this exact key lead to it.
        self.destinations: dict[Hashable, int] = {}


class TopicTrie:
    """Binding keys of a topic exchange, matched against routing keys."""

    def __init__(self) -> None:
        self._root = _Node()

    def add(self, binding_key: str, destination: Hashable) -> None:
        """Route keys matching *binding_key* to *destination*."""
        node = self._root
        for word in topic_words(binding_key):
            node = node.children.setdefault(word, _Node())
        node.destinations[destination] = node.destinations.get(destination, 0) + 1

    def remove(self, binding_key: str, destination: Hashable) -> None:
        """Undo one :meth:`add`; prunes branches left without bindings."""
        path = [self._root]
        words = topic_words(binding_key)
        for word in words:
            path.append(path[-1].children[word])
        node = path[-1]
        remaining = node.destinations[destination] - 1
        if remaining:
            node.destinations[destination] = remaining
        else:
            del node.destinations[destination]
        for depth in range(len(words), 0, -1):
            child = path[depth]
            if child.destinations or child.children:
                break
            del path[depth - 1].children[words[depth - 1]]

    def match(self, routing_key: str) -> tuple[Hashable, ...]:
        """Every destination bound with a key that matches *routing_key*, once."""
        words = topic_words(routing_key)
        found: dict[Hashable, None] = {}
        seen: set[tuple[int, int]] = set()
        stack = [(self._root, 0)]
        count = len(words)
        while stack:
            node, position = stack.pop()
            if (id(node), position) in seen:
                continue
            seen.add((id(node), position))
            if position == count:
                found.update(dict.fromkeys(node.destinations))
            else:
                literal = node.children.get(words[position])
                if literal is not None:
                    stack.append((literal, position + 1))
                star = node.children.get("*")
                if star is not None:
                    stack.append((star, position + 1))
            hash_node = node.children.get("#")
            if hash_node is not None:
                stack.extend((hash_node, skip) for skip in range(position, count + 1))
        return tuple(found)


class XMatch:
    """The ``x-match`` rules of the headers exchange."""

    ALL = "all"
    ANY = "any"
    ALL_WITH_X = "all-with-x"
    ANY_WITH_X = "any-with-x"
    RULES = (ALL, ANY, ALL_WITH_X, ANY_WITH_X)


def parse_x_match(arguments: Mapping[str, Any]) -> str:
    """The binding's ``x-match`` rule.

    :raises PreconditionFailed: an ``x-match`` value that is not a rule (406).
    """
    value = field_text(arguments.get("x-match", XMatch.ALL))
    if value in XMatch.RULES:
        return str(value)
    if isinstance(value, str):
        raise PreconditionFailed(
            f'Invalid x-match field value <<"{value}">>; expected all, any, all-with-x, or any-with-x'
        )
    raise PreconditionFailed(
        f"Invalid x-match field type {field_type(value)} (value {value!r}); expected longstr"
    )


def _comparable(value: Any) -> tuple[str, Any]:
    """A value tagged with its kind, so that true never equals 1 and "1" never 1."""
    if isinstance(value, bool):
        return "bool", value
    if isinstance(value, int):
        return "int", value
    if isinstance(value, (float, decimal.Decimal)):
        return "number", value
    if isinstance(value, str):
        return "string", value.encode("utf-8")
    if isinstance(value, (bytes, bytearray)):
        return "string", bytes(value)
    return type(value).__name__, value


def headers_match(rule: str, arguments: Mapping[str, Any], headers: Mapping[str, Any]) -> bool:
    """Whether a message with *headers* matches a binding's *arguments*."""
    with_x = rule in (XMatch.ALL_WITH_X, XMatch.ANY_WITH_X)
    want_all = rule in (XMatch.ALL, XMatch.ALL_WITH_X)
    for name, expected in arguments.items():
        if name == "x-match" or (not with_x and name.startswith("x-")):
            continue
        if name not in headers:
            matched = False
        elif expected is None:
            matched = True
        else:
            matched = _comparable(expected) == _comparable(headers[name])
        if matched != want_all:
            return matched
    return want_all


def freeze(value: Any) -> Hashable:
    """A hashable form of a field value (tables and arrays included).

    Two bindings are the same binding when their arguments freeze equal.
    """
    if isinstance(value, dict):
        return ("table", tuple(sorted((name, freeze(item)) for name, item in value.items())))
    if isinstance(value, (list, tuple)):
        return ("array", tuple(freeze(item) for item in value))
    return _comparable(value)

