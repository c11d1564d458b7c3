"""``/api/whoami``: the authenticated user."""

from __future__ import annotations

from typing import Any

from txamqp09.management.api import ApiRequest, Router

__all__ = ["register"]


def register(router: Router) -> None:
    """Add ``GET /api/whoami``."""
    router.add("GET", "/api/whoami", whoami)


def whoami(request: ApiRequest) -> dict[str, Any]:
    """The user's name and tags."""
    return {"name": request.user.name, "tags": list(request.user.tags)}
