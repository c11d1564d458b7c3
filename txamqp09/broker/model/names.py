"""Names the broker makes up: of server-named queues (``amq.gen-``),
consumer tags (``amq.ctag-``), direct reply-to names and 0-9 channel ids."""

from __future__ import annotations

import base64
import os

__all__ = ["unique_name"]


def unique_name(prefix: str) -> str:
    """A server-generated name: *prefix* and 22 random URL-safe characters."""
    return prefix + base64.urlsafe_b64encode(os.urandom(16)).decode("ascii").rstrip("=")
