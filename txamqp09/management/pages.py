"""Pages of lists, as RabbitMQ's management API cuts them.

A list query asks for a page with ``page`` and ``page_size`` (1-500, 100 by
default) and filters the list with ``name`` (a case-insensitive substring,
or a regular expression with ``use_regex=true``). :func:`page_of` cuts a
list so; the lists built row by row (:func:`~txamqp09.management.api.listing`)
and those answered from kept rows (:mod:`~txamqp09.management.rows`) both
use it, so that they refuse the same queries with the same texts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Optional, TypeVar

from txamqp09.management.answers import ApiError, bad_request

__all__ = ["DEFAULT_PAGE_SIZE", "MAX_PAGE_SIZE", "filtered_by_name", "page_of", "page_parameters", "query_int"]

T = TypeVar("T")

#: Page sizes RabbitMQ accepts.
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 500


def query_int(query: Mapping[str, str], name: str) -> Optional[int]:
    """Query parameter *name* as an integer, None when it is absent.

    :raises ApiError: 400 with RabbitMQ's text when it is not an integer.
    """
    value = query.get(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise bad_request("Pagination parameters are invalid") from None


def page_parameters(query: Mapping[str, str]) -> tuple[int, int]:
    """The page asked for and its size (``page``, ``page_size``: 1-500, 100 by default).

    :raises ApiError: 400 with RabbitMQ's text for bad values.
    """
    page = query_int(query, "page")
    size = query_int(query, "page_size")
    if page is None or page <= 0 or (size is not None and not 0 < size <= MAX_PAGE_SIZE):
        raise ApiError(
            400,
            "invalid_pagination_parameters",
            f"Invalid pagination parameters: page number {page}, page size "
            f"{'undefined' if size is None else size}",
        )
    return page, size or DEFAULT_PAGE_SIZE


def page_of(
    items: list[T], query: Mapping[str, str], name_of: Callable[[T], Any]
) -> tuple[int, int, list[T], list[T]]:
    """The page a list query asks for: (page, page size, the items the
    ``name`` filter keeps, the page's items).

    :raises ApiError: 400 with RabbitMQ's texts for bad page parameters, a
        page past the end, or a regular expression that does not compile.
    """
    page, size = page_parameters(query)
    filtered = filtered_by_name(items, query.get("name"), query.get("use_regex") == "true", name_of)
    start = (page - 1) * size
    if start > len(filtered):
        raise ApiError(
            400, "page_out_of_range", f"Page out of range, page: {page} page size: {size}, len: {len(filtered)}")
    return page, size, filtered, filtered[start:start + size]


def filtered_by_name(
    items: list[T], name: Optional[str], use_regex: bool, name_of: Callable[[T], Any]
) -> list[T]:
    """The items whose name (``name_of(item)``) contains *name*, or matches
    it as a regular expression with *use_regex*, ignoring case.

    :raises ApiError: 400 when the regular expression does not compile.
    """
    if not name:
        return items
    if use_regex:
        try:
            pattern = re.compile(name, re.IGNORECASE)
        except re.error:
            raise bad_request("Pagination parameters are invalid") from None
        return [item for item in items if isinstance(found := name_of(item), str) and pattern.search(found)]
    needle = name.lower()
    return [item for item in items if isinstance(found := name_of(item), str) and needle in found.lower()]
