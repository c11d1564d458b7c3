"""The security layer's errors, each an AMQP reply the broker can send as is."""

from __future__ import annotations

from txamqp09.wire.errors import ConnectionLevelError

__all__ = ["HardAccessRefused", "LoginRefused", "MalformedResponse"]


class HardAccessRefused(ConnectionLevelError):
    """403 that closes the whole connection.

    Raised for a refused login, a refused virtual host and a refused
    access.request (the 0-8 and 0-9 specifications make that last one a
    connection exception).
    """

    reply_code = 403


class LoginRefused(HardAccessRefused):
    """Authentication failed at connection.start-ok (class 10, method 11)."""

    def __init__(self, reply_text: str, class_id: int = 10, method_id: int = 11) -> None:
        super().__init__(reply_text, class_id, method_id)


class MalformedResponse(LoginRefused):
    """A SASL response is not in the form its mechanism defines."""
