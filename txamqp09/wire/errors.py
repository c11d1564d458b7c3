"""AMQP reply codes as exceptions.

Every failure a peer can cause is an :class:`AMQPError` carrying the reply code
the specifications give for it, a reply text a person can act on, and the class
and method ids of the command that caused it (0 when no command did).

The specifications divide reply codes into *soft* errors, which close only the
channel they happen on, and *hard* errors, which close the whole connection.
:class:`ChannelLevelError` and :class:`ConnectionLevelError` are the two roots;
``hard`` tells which one an instance belongs to.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "AMQPError",
    "ChannelLevelError",
    "ConnectionLevelError",
    "EncodeError",
    "ContentTooLarge",
    "NoRoute",
    "NoConsumers",
    "ConnectionForced",
    "InvalidPath",
    "AccessRefused",
    "NotFound",
    "ResourceLocked",
    "PreconditionFailed",
    "FrameError",
    "AMQPSyntaxError",
    "CommandInvalid",
    "ChannelError",
    "UnexpectedFrame",
    "ResourceError",
    "NotAllowed",
    "AMQPNotImplemented",
    "InternalError",
    "error_for_code",
]


class EncodeError(ValueError):
    """A Python value cannot be put on the wire in the requested AMQP type."""


class AMQPError(Exception):
    """A failure with an AMQP reply code.

    :ivar reply_code: the spec's reply code.
    :ivar reply_text: what went wrong, in words a person can act on.
    :ivar class_id: class id of the offending method, or 0.
    :ivar method_id: method id of the offending method, or 0.
    :ivar hint: what the client may do about it, or empty; a dialect
        decides whether the reply text carries it (RabbitMQ's texts do not).
    """

    reply_code: int = 541
    hard: ClassVar[bool] = True

    def __init__(
        self,
        reply_text: str,
        class_id: int = 0,
        method_id: int = 0,
        *,
        reply_code: int | None = None,
        hint: str = "",
    ) -> None:
        super().__init__(reply_text)
        self.reply_text = reply_text
        self.class_id = class_id
        self.method_id = method_id
        self.hint = hint
        if reply_code is not None:
            self.reply_code = reply_code

    @property
    def full_text(self) -> str:
        """The reply text followed by the hint, if any."""
        return f"{self.reply_text}; {self.hint}" if self.hint else self.reply_text

    def __str__(self) -> str:
        return f"{self.reply_code} {self.full_text}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.reply_text!r}, {self.class_id}, "
            f"{self.method_id}, reply_code={self.reply_code})"
        )


class ChannelLevelError(AMQPError):
    """A soft error: the channel it happened on is closed."""

    hard = False


class ConnectionLevelError(AMQPError):
    """A hard error: the whole connection is closed."""

    hard = True


class ContentTooLarge(ChannelLevelError):
    """311: the content is larger than the peer accepts now."""

    reply_code = 311


class NoRoute(ChannelLevelError):
    """312: a mandatory message could not be routed to any queue."""

    reply_code = 312


class NoConsumers(ChannelLevelError):
    """313: an immediate message found no consumer ready to take it."""

    reply_code = 313


class ConnectionForced(ConnectionLevelError):
    """320: an operator or the server closed the connection."""

    reply_code = 320


class InvalidPath(ConnectionLevelError):
    """402: unknown virtual host."""

    reply_code = 402


class AccessRefused(ChannelLevelError):
    """403: the user may not do this."""

    reply_code = 403


class NotFound(ChannelLevelError):
    """404: the exchange, queue or other entity does not exist."""

    reply_code = 404


class ResourceLocked(ChannelLevelError):
    """405: another connection holds the entity exclusively."""

    reply_code = 405


class PreconditionFailed(ChannelLevelError):
    """406: the request conflicts with the entity's current state."""

    reply_code = 406


class FrameError(ConnectionLevelError):
    """501: a frame could not be decoded."""

    reply_code = 501


class AMQPSyntaxError(ConnectionLevelError):
    """502: a frame carried illegal values."""

    reply_code = 502


class CommandInvalid(ConnectionLevelError):
    """503: a command arrived that is invalid where it came."""

    reply_code = 503


class ChannelError(ConnectionLevelError):
    """504: a frame named a channel that is not open."""

    reply_code = 504


class UnexpectedFrame(ConnectionLevelError):
    """505: a frame of the wrong type arrived."""

    reply_code = 505


class ResourceError(ConnectionLevelError):
    """506: the server lacks the resources to go on."""

    reply_code = 506


class NotAllowed(ConnectionLevelError):
    """530: the server forbids this."""

    reply_code = 530


class AMQPNotImplemented(ConnectionLevelError):
    """540: the functionality is not implemented."""

    reply_code = 540


class InternalError(ConnectionLevelError):
    """541: the server failed."""

    reply_code = 541


_BY_CODE: dict[int, type[AMQPError]] = {
    cls.reply_code: cls
    for cls in (
        ContentTooLarge,
        NoRoute,
        NoConsumers,
        ConnectionForced,
        InvalidPath,
        AccessRefused,
        NotFound,
        ResourceLocked,
        PreconditionFailed,
        FrameError,
        AMQPSyntaxError,
        CommandInvalid,
        ChannelError,
        UnexpectedFrame,
        ResourceError,
        NotAllowed,
        AMQPNotImplemented,
        InternalError,
    )
}


def error_for_code(
    reply_code: int,
    reply_text: str,
    class_id: int = 0,
    method_id: int = 0,
    *,
    hard: bool,
) -> AMQPError:
    """The exception for a reply code received from a peer.

    :param hard: whether it arrived in connection.close (True) or channel.close.
    """
    known = _BY_CODE.get(reply_code)
    if known is not None and known.hard == hard:
        return known(reply_text, class_id, method_id)
    root: type[AMQPError] = ConnectionLevelError if hard else ChannelLevelError
    return root(reply_text, class_id, method_id, reply_code=reply_code)
