"""The management HTTP API's framework: requests, routing, lists.

The errors and replies handlers use are :mod:`.answers`' (here too, for
the endpoints), the pages of lists :mod:`.pages`'.

The API speaks RabbitMQ 3.10's management plugin dialect (paths, verbs,
JSON field names, status codes, ``{"error": ..., "reason": ...}`` bodies),
so that rabbitmqadmin, pyrabbit2 and other tools written for RabbitMQ
work against this broker. docs/management.rst lists the endpoints.

Adding endpoints
================

Endpoints live in :mod:`txamqp09.management.endpoints`, one module per
topic. Each module has a ``register(router)`` function that adds its
routes; :data:`txamqp09.management.endpoints.MODULES` lists the modules
the API loads::

    from txamqp09.management.api import ApiError, ApiRequest, Reply, Router, listing

    def register(router: Router) -> None:
        router.add("GET", "/api/widgets/{vhost}", list_widgets)
        router.add("PUT", "/api/widgets/{vhost}/{name}", put_widget, tag="policymaker")

    def list_widgets(request: ApiRequest) -> object:
        vhost = request.vhost("vhost")          # 404 / 401 as RabbitMQ answers
        return listing(request, [{"name": n, "vhost": vhost.name} for n in ...])

    def put_widget(request: ApiRequest) -> object:
        body = request.json()                    # 400 on malformed JSON
        if "size" not in body:
            raise ApiError(400, "bad_request", "size is missing")
        ...
        return Reply(201)                        # or None: 204 No Content

The pieces:

* A **pattern** is a path whose ``{name}`` segments match one URL segment;
  the handler finds the decoded segment in ``request.args["name"]``
  (``%2F`` is ``/``, so ``/api/queues/%2F/q`` gives vhost ``/``).
* **tag** is the least user tag the route needs, by RabbitMQ's rules: any
  management tag for ``"management"``; ``policymaker`` or
  ``administrator`` for ``"policymaker"``; ``monitoring`` or
  ``administrator`` for ``"monitoring"``; ``administrator`` for
  ``"administrator"``. A user without it gets RabbitMQ's 401
  ``not_authorised`` body. Wrong credentials get 401 ``not_authorized``
  ("Login failed") and a ``WWW-Authenticate`` challenge; a request without
  credentials (or with another scheme than Basic or Bearer) gets the
  challenge without a body, Basic credentials that do not decode a 400
  without a body (as RabbitMQ 3.10 answers each).
* Per-vhost rights are the handler's job: :meth:`ApiRequest.vhost` checks
  that the vhost exists and that the user may see it;
  :meth:`ApiRequest.check` checks a configure/write/read permission on a
  resource as AMQP does.
* A **handler** returns something JSON-able (sent with 200), a
  :class:`Reply` (another status, headers), None (204 No Content), or a
  Deferred of any of these. It raises :class:`ApiError` for the client's
  mistakes; any other exception is logged and answered with a 500 body
  that names the error, never a traceback.
* A **list** goes through :func:`listing`, which applies ``columns``,
  ``sort``, ``sort_reverse``, ``page``, ``page_size``, ``name`` and
  ``use_regex`` as RabbitMQ does, and answers in its paginated shape when
  a page is asked for.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional
from urllib.parse import unquote

from txamqp09.broker.auth.permissions import Permission, checked_name
from txamqp09.management.answers import ApiError, Encoded, Reply, bad_request, not_authorised, not_found
from txamqp09.management.pages import page_of, query_int
from txamqp09.management.stats import RangeError, Ranges

if TYPE_CHECKING:
    from txamqp09.broker.auth.cred import IAMQPUser
    from txamqp09.broker.model import VirtualHost
    from txamqp09.management.node import Node

__all__ = [
    "ApiError",
    "ApiRequest",
    "Handler",
    "MANAGEMENT_TAGS",
    "Reply",
    "Route",
    "Router",
    "has_tag",
    "Basic",
    "Encoded",
    "bad_request",
    "listing",
    "not_authorised",
    "not_found",
    "MAX_NAME_BYTES",
]

#: The tags that let a user use the management API at all.
MANAGEMENT_TAGS = frozenset({"management", "policymaker", "monitoring", "administrator"})
#: Route tag -> the user tags that satisfy it, and RabbitMQ's refusal text.
_TAG_RULES: dict[str, tuple[frozenset[str], str]] = {
    "management": (MANAGEMENT_TAGS, "Not management user"),
    "policymaker": (frozenset({"policymaker", "administrator"}), "Not policymaker user"),
    "monitoring": (frozenset({"monitoring", "administrator"}), "Not monitor user"),
    "administrator": (frozenset({"administrator"}), "Not administrator user"),
}
#: The longest name (queue, exchange, vhost, user) the API accepts, in UTF-8 bytes.
MAX_NAME_BYTES = 255


def has_tag(tags: Iterable[str], required: str) -> bool:
    """Whether a user with *tags* satisfies the route tag *required*."""
    return bool(_TAG_RULES[required][0].intersection(tags))


class ApiRequest:
    """What a handler gets: who asks, for what, and the broker.

    :ivar user: the authenticated user (``name``, ``tags`` and the
        permission questions of :class:`~txamqp09.broker.auth.IAMQPUser`).
    :ivar method: the HTTP verb.
    :ivar args: the pattern's path parameters, URL-decoded.
    :ivar query: the query string, one value per name (the last given).
    :ivar headers: the request headers, lower-case names.
    :ivar node: the broker facade (:class:`~txamqp09.management.node.Node`).
    """

    def __init__(
        self,
        user: IAMQPUser,
        method: str,
        args: Mapping[str, str],
        query: Mapping[str, str],
        headers: Mapping[str, str],
        body: bytes,
        node: Node,
    ) -> None:
        self.user = user
        self.method = method
        self.args = dict(args)
        self.query = dict(query)
        self.headers = dict(headers)
        self.body = body
        self.node = node

    def json(self) -> dict[str, Any]:
        """The body as a JSON object (an empty body is ``{}``).

        :raises ApiError: 400 ``not_json`` when it is not a JSON object.
        """
        if not self.body.strip():
            return {}
        try:
            value = json.loads(self.body)
        except ValueError:
            raise bad_request("not_json") from None
        if not isinstance(value, dict):
            raise bad_request("not_json")
        return value

    def ranges(self, *, ceil_lengths: bool = False) -> Ranges:
        """The sample histories the query asks for (``msg_rates_age`` and
        ``msg_rates_incr``, ...; see :class:`~txamqp09.management.stats.Ranges`).

        :param ceil_lengths: end the lengths' range at the next point (queues).
        :raises ApiError: 400 as RabbitMQ refuses a range.
        """
        try:
            return Ranges.from_query(self.query, self.node.clock.seconds(), ceil_lengths=ceil_lengths)
        except RangeError as error:
            raise bad_request(str(error)) from None

    def is_tagged(self, required: str) -> bool:
        """Whether the user satisfies the route tag *required* (e.g. ``monitoring``)."""
        return has_tag(self.user.tags, required)

    def may_see_vhost(self, name: str) -> bool:
        """RabbitMQ's rule: administrators and monitors see every vhost,
        other users those they have permissions on."""
        return self.is_tagged("monitoring") or self.user.may_open_vhost(name)

    def may_use_vhost(self, name: str) -> bool:
        """Administrators use every vhost, others those they have permissions on."""
        return self.is_tagged("administrator") or self.user.may_open_vhost(name)

    def vhost(self, arg: str = "vhost", *, use: bool = False) -> VirtualHost:
        """The model virtual host named by path parameter *arg*.

        :param use: the request changes something in it (administrators and
            users with permissions on it), rather than only reading it
            (monitors too).
        :raises ApiError: 404 when it does not exist, 401 when the user may
            not see (or use) it.
        """
        name = self.args[arg]
        vhost = self.node.vhost(name)
        if vhost is None:
            raise ApiError(404, "not_found", "vhost_not_found") if use else not_found()
        if not (self.may_use_vhost(name) if use else self.may_see_vhost(name)):
            raise not_authorised("User not authorised to access virtual host")
        return vhost

    def check(self, permission: Permission, vhost: str, resource: str) -> None:
        """Refuse (401 ``not_authorised``, as RabbitMQ) unless the user holds
        *permission* on *resource* in *vhost*, by the same rule as AMQP."""
        if not self.user.allows(permission, vhost, checked_name(resource)):
            raise not_authorised(
                f"access to {resource!r} in vhost {vhost!r} refused for user "
                f"{self.user.name!r}: no {permission.value} permission"
            )

    def name(self, arg: str, what: str) -> str:
        """Path parameter *arg*, refused with RabbitMQ's 400 when longer than 255 bytes."""
        value = self.args[arg]
        size = len(value.encode("utf-8"))
        if size > MAX_NAME_BYTES:
            raise bad_request(f"{what} should be less than 255 bytes, actually was {size}")
        return value


#: A route's handler.
Handler = Callable[[ApiRequest], Any]


@dataclass(frozen=True)
class Route:
    """One pattern with a handler per verb."""

    pattern: str
    segments: tuple[str, ...]
    handlers: dict[str, tuple[Handler, str]] = field(default_factory=dict, hash=False)

    def match(self, segments: list[str]) -> Optional[dict[str, str]]:
        """The path parameters if *segments* (decoded) fit the pattern."""
        if len(segments) != len(self.segments):
            return None
        args: dict[str, str] = {}
        for expected, given in zip(self.segments, segments):
            if expected.startswith("{") and expected.endswith("}"):
                args[expected[1:-1]] = given
            elif expected != given:
                return None
        return args


def split_path(path: str) -> list[str]:
    """The URL-decoded segments of a raw request path (``%2F`` stays inside a segment)."""
    raw = path.split("?", 1)[0].rstrip("/").split("/")[1:]
    return [unquote(segment) for segment in raw]


class Router:
    """Patterns, verbs and the handlers registered for them."""

    def __init__(self) -> None:
        self.routes: list[Route] = []
        self._by_pattern: dict[str, Route] = {}

    def add(self, method: str, pattern: str, handler: Handler, *, tag: str = "management") -> None:
        """Route *method* requests on paths like *pattern* to *handler*.

        :param tag: the least user tag required (see the module docstring).
        """
        if tag not in _TAG_RULES:
            raise ValueError(f"unknown tag {tag!r}; use one of {', '.join(_TAG_RULES)}")
        route = self._by_pattern.get(pattern)
        if route is None:
            route = self._by_pattern[pattern] = Route(pattern, tuple(pattern.strip("/").split("/")))
            self.routes.append(route)
        if method in route.handlers:
            raise ValueError(f"{method} {pattern} is registered twice")
        route.handlers[method] = (handler, tag)

    def resolve(self, method: str, segments: list[str]) -> tuple[Handler, str, dict[str, str]]:
        """The handler, its tag and the path parameters for a request.

        Literal segments win over parameters (``/api/queues/{vhost}`` does
        not take ``/api/health/...``); among equals the first added wins.

        :raises ApiError: 404 when no pattern fits, 405 when the verb does not.
        """
        matches = []
        for route in self.routes:
            args = route.match(segments)
            if args is not None:
                matches.append((len(args), route, args))
        if not matches:
            raise not_found()
        matches.sort(key=lambda match: match[0])
        for _, route, args in matches:
            found = route.handlers.get(method)
            if found is None and method == "HEAD":
                found = route.handlers.get("GET")
            if found is not None:
                return found[0], found[1], args
        allowed = ", ".join(sorted(matches[0][1].handlers))
        raise ApiError(405, "method_not_allowed", f"{method} is not allowed here", {"Allow": allowed})

    def authorise(self, tags: Iterable[str], required: str) -> None:
        """Refuse with RabbitMQ's 401 texts unless *tags* satisfy *required*."""
        tags = tuple(tags)
        if not has_tag(tags, "management"):
            raise not_authorised(_TAG_RULES["management"][1])
        if not has_tag(tags, required):
            raise not_authorised(_TAG_RULES[required][1])


# -- lists ------------------------------------------------------------------


def _sort_value(value: Any) -> tuple[int, Any]:
    """A sort key that orders mixed values as RabbitMQ does (numbers, then
    atoms such as null and booleans, then strings; missing counts as 0)."""
    if isinstance(value, bool) or value is None:
        return (1, str(value))
    if isinstance(value, (int, float)):
        return (0, value)
    if isinstance(value, str):
        return (2, value)
    return (3, json.dumps(value, sort_keys=True))


def _dotted(row: Mapping[str, Any], key: str) -> Any:
    value: Any = row
    parts = key.split(".")
    for position, part in enumerate(parts):
        default: Any = 0 if position == len(parts) - 1 else {}
        value = value.get(part, default) if isinstance(value, Mapping) else default
    return value


def _columns(row: Any, wanted: list[list[str]]) -> Any:
    """*row* with only the (dotted) columns asked for."""
    if isinstance(row, list):
        return [_columns(item, wanted) for item in row]
    if not isinstance(row, Mapping):
        return row
    kept: dict[str, Any] = {}
    for key, value in row.items():
        below = [column[1:] for column in wanted if column[0] == key]
        if not below:
            continue
        kept[key] = value if any(not rest for rest in below) else _columns(value, below)
    return kept


class Basic(dict):  # type: ignore[type-arg]
    """A cheap row standing for an object in :func:`listing`: the columns to
    sort and filter on, and the object (:attr:`object`) its full row is made
    from."""

    def __init__(self, obj: Any, **columns: Any) -> None:
        super().__init__(columns)
        self.object = obj


def listing(
    request: ApiRequest,
    rows: Iterable[Mapping[str, Any]],
    default_sort: tuple[str, ...] = ("vhost", "name"),
    *,
    expand: Optional[Callable[[Any], Mapping[str, Any]]] = None,
) -> Any:
    """A list answer with RabbitMQ's query parameters applied.

    ``columns`` (comma-separated, dotted for nested keys) keeps only those
    fields; the list is sorted by ``sort`` (then *default_sort*), reversed
    by ``sort_reverse=true``; with ``page`` (and ``page_size``, 1-500,
    default 100) the answer is the paginated object, filtered by ``name``
    (a case-insensitive substring, or a regular expression with
    ``use_regex=true``).

    With *expand*, *rows* are :class:`Basic` rows and ``expand(obj)`` makes
    an object's full row. Only the rows of the page asked for are expanded
    when the sort keys are among the basic rows' columns (as RabbitMQ
    builds only one page of a paginated list); otherwise every row is.

    :raises ApiError: 400 with RabbitMQ's texts for bad page parameters, a
        page past the end, or a regular expression that does not compile.
    """
    query = request.query
    page = query_int(query, "page")
    items: list[Any] = list(rows)
    total = len(items)
    sort = query.get("sort")
    keys = (((sort,) if sort else ()) + default_sort) if sort != "" else ()
    late = expand is not None and page is not None and all(
        key.split(".")[0] in row for key in keys for row in items[:1]
    )
    if expand is not None and not late:
        items = [expand(row.object) for row in items]
    columns = query.get("columns")
    wanted = [column.split(".") for column in columns.split(",") if column] if columns else None
    if wanted and not late:
        items = [_columns(item, wanted) for item in items]
    if keys:
        items.sort(key=lambda row: [_sort_value(_dotted(row, key)) for key in keys])
    if query.get("sort_reverse") == "true":
        items.reverse()
    if page is None:
        return items
    page, size, filtered, chosen = page_of(items, query, _row_name)
    if late:
        assert expand is not None
        chosen = [expand(row.object) for row in chosen]
        if wanted:
            chosen = [_columns(item, wanted) for item in chosen]
    return {
        "filtered_count": len(filtered),
        "item_count": len(chosen),
        "items": chosen,
        "page": page,
        "page_count": (len(filtered) + size - 1) // size,
        "page_size": size,
        "total_count": total,
    }


def _row_name(row: Mapping[str, Any]) -> Any:
    return row.get("name")
