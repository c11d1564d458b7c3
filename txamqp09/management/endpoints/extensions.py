"""``/api/extensions``: management UI extensions (this broker has none)."""

from __future__ import annotations

from typing import Any

from txamqp09.management.api import ApiRequest, Router

__all__ = ["register"]


def register(router: Router) -> None:
    """Add ``GET /api/extensions``."""
    router.add("GET", "/api/extensions", extensions)


def extensions(request: ApiRequest) -> list[Any]:
    """No UI extensions: an empty list."""
    return []
