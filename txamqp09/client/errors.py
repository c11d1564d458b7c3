"""What the client raises, and how a peer's close turns into an exception.

A channel the server closes fails what is pending on it, and every later
call, with :class:`ChannelClosed`; a connection that ends fails everything
on it with :class:`ConnectionClosed`. Both carry the reply code, text and the
class and method ids the close named, and the matching
:class:`~txamqp09.wire.errors.AMQPError` subclass as :attr:`error` (so that
``isinstance(closed.error, NotFound)`` tells a missing queue).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Union

from OpenSSL import SSL
from service_identity import VerificationError
from twisted.python.failure import Failure

from txamqp09.wire.errors import AMQPError, error_for_code

__all__ = [
    "ClientError",
    "ChannelClosed",
    "ConnectionClosed",
    "ChannelEnding",
    "TLSFailed",
    "MessageNacked",
    "AlreadySettled",
    "NotInThisVersion",
    "channel_closed",
    "connection_closed",
]


class ClientError(Exception):
    """The root of the exceptions this client raises itself."""


class _Closed(ClientError):
    """A channel or connection that ended, with the close's details.

    :ivar reason: the AMQP error the close carried, or the Failure with which
        the transport was lost, or None after a normal close by this side.
    """

    #: "channel" or "connection", for messages.
    scope = ""

    def __init__(
        self,
        reply_code: int,
        reply_text: str,
        class_id: int = 0,
        method_id: int = 0,
        method_name: Optional[str] = None,
        error: Optional[AMQPError] = None,
        reason: Union[AMQPError, Failure, None] = None,
    ) -> None:
        super().__init__(reply_code, reply_text, class_id, method_id)
        self.reply_code = reply_code
        self.reply_text = reply_text
        self.class_id = class_id
        self.method_id = method_id
        #: "queue.declare" and the like when the close named a method.
        self.method_name = method_name
        #: The reply code as the spec's exception class.
        self.error = error or error_for_code(
            reply_code, reply_text, class_id, method_id, hard=self.scope == "connection"
        )
        self.reason = reason

    def __str__(self) -> str:
        caused = f" (caused by {self.method_name})" if self.method_name else ""
        code = f"{self.reply_code} " if self.reply_code else ""
        return f"{self.scope} closed: {code}{self.reply_text}{caused}"


class ChannelClosed(_Closed):
    """The channel is closed: by the server (with its reply) or by this side."""

    scope = "channel"


class ConnectionClosed(_Closed):
    """The connection is closed or was lost; nothing on it can go on."""

    scope = "connection"


#: Why a channel ended: its own close, or its connection's end.
ChannelEnding = Union[ChannelClosed, ConnectionClosed]


class TLSFailed(ConnectionClosed):
    """The TLS handshake failed: an untrusted or mismatched certificate, most often."""


class MessageNacked(ClientError):
    """The broker refused responsibility for a published message (basic.nack)."""

    def __init__(self, delivery_tag: int) -> None:
        super().__init__(f"the broker nacked published message {delivery_tag}")
        self.delivery_tag = delivery_tag


class AlreadySettled(ClientError):
    """A message was acked, nacked or rejected a second time."""


class NotInThisVersion(ClientError, NotImplementedError):
    """The method or option does not exist in the connection's AMQP version."""


def _method_name(error: AMQPError, method_names: Mapping[int, str]) -> Optional[str]:
    return method_names.get((error.class_id << 16) | error.method_id)


def channel_closed(error: AMQPError, method_names: Mapping[int, str]) -> ChannelClosed:
    """The :class:`ChannelClosed` for a channel.close that carried *error*.

    :param method_names: method names by ``(class id << 16) | method id``,
        to say which method the close blamed.
    """
    return ChannelClosed(
        error.reply_code,
        error.reply_text,
        error.class_id,
        error.method_id,
        _method_name(error, method_names),
        error,
        error,
    )


def connection_closed(
    reason: Union[AMQPError, Failure, None], method_names: Mapping[int, str]
) -> ConnectionClosed:
    """The :class:`ConnectionClosed` for a connection that ended because of *reason*."""
    if isinstance(reason, AMQPError):
        return ConnectionClosed(
            reason.reply_code,
            reason.reply_text,
            reason.class_id,
            reason.method_id,
            _method_name(reason, method_names),
            reason,
            reason,
        )
    if reason is None:
        return ConnectionClosed(200, "connection closed", reason=None)
    if reason.check(SSL.Error, VerificationError):
        return TLSFailed(0, f"TLS handshake failed: {_ssl_text(reason.value)}", reason=reason)
    return ConnectionClosed(0, f"connection lost: {reason.getErrorMessage()}", reason=reason)


def _ssl_text(error: Optional[BaseException]) -> str:
    """OpenSSL's error list, or the name check's mismatches, as one readable line."""
    if isinstance(error, VerificationError):
        names = ", ".join(_mismatched_name(mismatch) for mismatch in error.errors)
        return f"the server's certificate is not valid for {names}"
    details = error.args[0] if error is not None and error.args else []
    if isinstance(details, list) and details:
        return "; ".join(
            " ".join(str(part) for part in entry if part) if isinstance(entry, tuple) else str(entry)
            for entry in details
        )
    return str(error) or type(error).__name__


def _mismatched_name(mismatch: Any) -> str:
    identity = mismatch.mismatched_id
    for attribute in ("hostname", "ip"):
        value = getattr(identity, attribute, None)
        if value is not None:
            return value.decode("ascii") if isinstance(value, bytes) else str(value)
    return str(identity)
