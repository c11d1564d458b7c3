"""AMQP URIs without their passwords, for logs, tools and the management API.

Standard library only, so that ``amqp09ctl`` can use it too.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = ["hide_passwords", "redacted"]

#: The password part of an AMQP URI inside some text.
_PASSWORD = re.compile(r"(amqps?://[^\s:@/\"']*:)[^\s@/\"']*@", re.IGNORECASE)


def redacted(uri: str) -> str:
    """*uri* without its credentials and query: safe to log and to show."""
    try:
        parts = urlsplit(uri)
        port = f":{parts.port}" if parts.port is not None else ""
        host = parts.hostname or ""
    except ValueError:
        return "(an unreadable URI)"
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{port}{parts.path}"


def hide_passwords(text: str) -> str:
    """*text* with the password of every AMQP URI in it replaced by ``***``."""
    return _PASSWORD.sub(r"\1***@", text)
