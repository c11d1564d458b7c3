"""What a handler answers with, at the bottom of the package.

A handler of the management API returns something JSON-able (sent with
200), a :class:`Reply` (another status, headers), an :class:`Encoded`
answer (JSON already encoded), or None (204); it raises :class:`ApiError`
for the client's mistakes, which the client gets as RabbitMQ's
``{"error": ..., "reason": ...}`` body. :func:`encode` writes JSON as the
API sends it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

__all__ = ["ApiError", "Encoded", "Reply", "bad_request", "encode", "not_authorised", "not_found"]


class ApiError(Exception):
    """A refusal the client gets as RabbitMQ's ``{"error": ..., "reason": ...}``.

    :param status: the HTTP status (400, 401, 404, ...).
    :param error: the short error name, e.g. ``bad_request``.
    :param reason: what went wrong, for a person.
    :param headers: extra response headers (e.g. ``WWW-Authenticate``).
    """

    def __init__(
        self, status: int, error: str, reason: str, headers: Optional[Mapping[str, str]] = None
    ) -> None:
        super().__init__(f"{status} {error}: {reason}")
        self.status = status
        self.error = error
        self.reason = reason
        self.headers = dict(headers or {})

    def body(self) -> dict[str, str]:
        """The JSON body of the answer."""
        return {"error": self.error, "reason": self.reason}


def not_found(reason: str = "Not Found") -> ApiError:
    """RabbitMQ's 404 for an object that does not exist."""
    return ApiError(404, "Object Not Found", reason)


def bad_request(reason: str) -> ApiError:
    """RabbitMQ's 400 for a request it cannot act on."""
    return ApiError(400, "bad_request", reason)


def not_authorised(reason: str) -> ApiError:
    """RabbitMQ's 401 for an authenticated user who may not do this."""
    return ApiError(401, "not_authorised", reason)


@dataclass(frozen=True)
class Encoded:
    """A JSON answer already encoded, sent with 200 as it is.

    :ivar data: the UTF-8 JSON text.
    """

    data: bytes


@dataclass
class Reply:
    """An answer other than ``200`` with a JSON body.

    :ivar status: the HTTP status.
    :ivar body: JSON-able, or None for no body.
    :ivar headers: extra response headers.
    """

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


def encode(value: Any) -> bytes:
    """*value* as the API writes JSON."""
    return json.dumps(value, separators=(",", ":")).encode("utf-8")
