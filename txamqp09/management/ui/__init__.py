"""The management web UI: static files the management listener serves at ``/``.

The UI (``static/``: ``index.html``, JavaScript modules under ``js/``, a
style sheet, and the uPlot charting library under ``vendor/``, unmodified
with its licence) runs in the browser as a view over the management HTTP
API: it logs in with HTTP basic auth as the API's users and polls the API.
Nothing is fetched from anywhere but this listener, so it works offline.
"""

from __future__ import annotations

import json
import os
from typing import Any

from twisted.web.resource import Resource
from twisted.web.server import Request
from twisted.web.static import File

from txamqp09.management.answers import not_found

__all__ = ["STATIC_DIR", "UiFiles"]

#: The directory holding the UI's files.
STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
#: Media types the UI's files are served with, whatever the system's
#: mime.types says (browsers run JavaScript modules only with a script type).
_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
    ".json": "application/json",
}
#: Where the UI's pages may load anything from: this listener only.
_CONTENT_SECURITY_POLICY = (
    "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'"
)


class NotFound(Resource):
    """RabbitMQ's JSON 404 body, for paths that are neither a file nor the API."""

    isLeaf = True

    def render(self, request: Request) -> bytes:
        """The 404 answer."""
        error = not_found()
        request.setResponseCode(error.status)
        request.setHeader(b"Content-Type", b"application/json")
        return json.dumps(error.body(), separators=(",", ":")).encode("utf-8")


class UiFiles(File):
    """The UI's files: ``index.html`` at ``/``, no directory listings.

    :param path: the directory served (:data:`STATIC_DIR` by default); the
        other arguments are :class:`File`'s (it passes them to the files
        it finds in the directory).
    """

    def __init__(self, path: str = STATIC_DIR, *args: Any) -> None:
        super().__init__(path, *args)
        self.contentTypes = {**self.contentTypes, **_CONTENT_TYPES}

    childNotFound = NotFound()  # type: ignore[assignment]  # File types it as its own NoResource

    def directoryListing(self) -> Resource:
        """Directories without an ``index.html`` are not found."""
        return self.childNotFound

    def render(self, request: Request) -> Any:
        """The file, with headers that keep the page to this listener."""
        request.setHeader(b"Content-Security-Policy", _CONTENT_SECURITY_POLICY.encode("ascii"))
        request.setHeader(b"X-Content-Type-Options", b"nosniff")
        request.setHeader(b"Cache-Control", b"no-cache")
        return super().render(request)
