"""Messages the server delivers, returns or hands out through basic.get."""

from __future__ import annotations

from typing import Any, Optional

from txamqp09.client.base import ChannelLike
from txamqp09.client.errors import AlreadySettled
from txamqp09.wire.frames import Command

__all__ = ["Message"]


class Message:
    """A message with its body, properties and delivery information.

    :ivar channel: the channel it arrived on; acknowledgements go there.
    :ivar method: the method that carried it (basic.deliver, basic.get-ok,
        basic.return, or another class's deliver on 0-8 and 0-9): its
        fields are the delivery information, also offered as attributes
        below.
    :ivar body: the body, as bytes.
    """

    __slots__ = ("channel", "method", "body", "_command", "_settled")

    def __init__(self, channel: ChannelLike, command: Command, settled: bool = False) -> None:
        self.channel = channel
        self.method: Any = command.method
        self.body: bytes = command.body
        self._command = command
        self._settled = settled

    @property
    def properties(self) -> Any:
        """The content properties (decoded on first use); unset ones are None.

        A ``BasicProperties`` of the connection's version (``Any`` to type
        checkers, as each version has its own class).

        :raises AMQPSyntaxError: the server sent malformed properties.
        """
        return self._command.properties

    @property
    def raw_properties(self) -> bytes:
        """The content properties as they arrived, encoded."""
        return self._command.raw_properties

    @property
    def headers(self) -> dict[str, Any]:
        """The application headers table (empty when none were sent)."""
        return getattr(self.properties, "headers", None) or {}

    @property
    def delivery_tag(self) -> int:
        """The server's number for this delivery on its channel (0 for a returned message)."""
        return getattr(self.method, "delivery_tag", 0)  # type: ignore[no-any-return]

    @property
    def redelivered(self) -> bool:
        """The server delivered this message before, without an acknowledgement."""
        return bool(getattr(self.method, "redelivered", False))

    @property
    def exchange(self) -> str:
        """The exchange the message was published to."""
        return getattr(self.method, "exchange", "")  # type: ignore[no-any-return]

    @property
    def routing_key(self) -> str:
        """The routing key it was published with."""
        return getattr(self.method, "routing_key", "")  # type: ignore[no-any-return]

    @property
    def consumer_tag(self) -> Optional[str]:
        """The consumer it was delivered to, or None (basic.get, basic.return)."""
        return getattr(self.method, "consumer_tag", None)

    @property
    def settled(self) -> bool:
        """Acked, nacked, rejected, or delivered without acknowledgement."""
        return self._settled

    def _check_unsettled(self, action: str) -> None:
        if self._settled:
            raise AlreadySettled(
                f"cannot {action} delivery {self.delivery_tag}: it was already settled "
                "or needs no acknowledgement"
            )

    def ack(self, multiple: bool = False) -> None:
        """Acknowledge the message (and with *multiple* every earlier one on its channel).

        :raises AlreadySettled: it was settled already or needs no acknowledgement.
        :raises ChannelClosed: its channel is closed; the server requeued it.
            (A recovering channel's settlements of a lost channel are
            dropped instead: the broker delivers the message again.)
        """
        self._check_unsettled("ack")
        self.channel.ack(self.delivery_tag, multiple)
        self._settled = True

    def nack(self, multiple: bool = False, requeue: bool = True) -> None:
        """Refuse the message (0-9-1 basic.nack); requeue it unless *requeue* is false.

        :raises NotInThisVersion: on 0-8 and 0-9, which have no basic.nack.
        """
        self._check_unsettled("nack")
        self.channel.nack(self.delivery_tag, multiple, requeue)
        self._settled = True

    def reject(self, requeue: bool = True) -> None:
        """Refuse the message; requeue it unless *requeue* is false."""
        self._check_unsettled("reject")
        self.channel.reject(self.delivery_tag, requeue)
        self._settled = True

    def __repr__(self) -> str:
        return f"<Message {self.method.NAME} tag={self.delivery_tag} {len(self.body)} bytes>"

