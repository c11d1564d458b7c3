"""The dtx class (0-8, 0-9): distributed transactions, as far as 0-9 defines them.

0-9 defines only dtx.select and dtx.start; the commit protocol belongs to
a coordinator outside AMQP. This broker has no such coordinator, so a
distributed transaction is carried out as a standard one: dtx.select puts
the channel in transaction mode exactly as tx.select does, dtx.start names
the transaction, and tx.commit or tx.rollback ends it. Atomicity and
durability are those of the tx class: publishes and acknowledgements wait
until commit and are then applied together; persistent messages routed to
durable queues are in the store before tx.commit-ok is sent. A broker crash
during the commit may leave part of it applied (no two-phase commit).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from txamqp09.broker.classes.registry import ClassState, register
from txamqp09.wire.errors import PreconditionFailed

if TYPE_CHECKING:
    from txamqp09.wire import methods

__all__ = ["DtxState"]


@register
class DtxState(ClassState):
    """The dtx class on one channel.

    :ivar identifier: the transaction identifier dtx.start gave (None before).
    """

    AMQP_CLASS = "dtx"

    def __init__(self, channel: Any) -> None:
        super().__init__(channel)
        self.selected = False
        self.identifier: Optional[str] = None

    def dtx_select(self, method: methods.DtxSelect) -> None:
        """Put the channel in transaction mode (as tx.select)."""
        self.channel.transaction("select")
        self.selected = True
        self.reply("dtx.select-ok")

    def dtx_start(self, method: methods.DtxStart) -> None:
        """Name the channel's distributed transaction.

        :raises PreconditionFailed: dtx.select did not come first, a
            transaction was already started, or the channel has already
            published or consumed.
        """
        channel = self.channel
        if not self.selected:
            raise PreconditionFailed("send dtx.select on this channel before dtx.start")
        if self.identifier is not None:
            raise PreconditionFailed(
                f"distributed transaction {self.identifier!r} is already started on this channel"
            )
        if channel.publisher.publishes or channel.session.unacked or channel.session.consumers:
            raise PreconditionFailed(
                "dtx.start must come before any method that publishes or consumes on this channel"
            )
        self.identifier = method.dtx_identifier
        self.reply("dtx.start-ok")
