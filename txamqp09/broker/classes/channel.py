"""0-9's channel.resume, ping, pong and ok.

channel.open-ok on 0-9 carries a channel-id. When a connection ends while
the channel is open, the virtual host remembers for that user and
channel-id the channel's last declared queue, its prefetch window and its
open message references. channel.resume with the channel-id, sent on any
unopened channel number of a later connection by the same user, opens the
channel with that state and is answered with channel.ok; consumers,
unacknowledged deliveries and transactions do not survive (unacknowledged
messages were requeued when the connection ended).

channel.ping is answered with channel.ok, after which the broker sends
channel.pong, which the client answers with channel.ok; a client's
channel.pong is answered with channel.ok.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from txamqp09.broker.classes.registry import ChannelLike, ClassState, channel_classes, register, vhost_classes
from txamqp09.broker.model.names import unique_name
from txamqp09.wire.base import Method
from txamqp09.wire.errors import CommandInvalid, NotFound
from txamqp09.wire.versions import AMQP0_9

if TYPE_CHECKING:
    from txamqp09.wire import methods

__all__ = ["ChannelMethods", "open_ok", "resume"]


@register
class ChannelMethods(ClassState):
    """0-9's ping, pong and ok on one channel."""

    AMQP_CLASS = "channel"

    def __init__(self, channel: Any) -> None:
        super().__init__(channel)
        #: channel.pong requests sent and not yet answered.
        self.pongs_unanswered = 0

    def channel_ping(self, method: methods.ChannelPing) -> None:
        """Answer ok, then ask the client for a pong."""
        self.reply("channel.ok")
        self.pongs_unanswered += 1
        self.send("channel.pong")

    def channel_pong(self, method: methods.ChannelPong) -> None:
        """A pong proves the client alive; answer ok."""
        self.reply("channel.ok")

    def channel_ok(self, method: methods.ChannelOk) -> None:
        """The client answered the server's pong.

        :raises CommandInvalid: the server sent nothing channel.ok could answer.
        """
        if not self.pongs_unanswered:
            raise CommandInvalid("channel.ok, but the server sent no channel.pong on this channel")
        self.pongs_unanswered -= 1


def open_ok(channel: ChannelLike) -> Method:
    """channel.open-ok for a new *channel*; on 0-9 with a fresh channel-id."""
    if channel.version is not AMQP0_9:
        return channel.spec.ChannelOpenOk()
    classes = channel_classes(channel)
    classes.channel_id = unique_name("amq.channel-").encode("ascii")
    return channel.build("channel.open-ok", channel_id=classes.channel_id)


def resume(channel: ChannelLike, channel_id: bytes) -> Method:
    """Give the new *channel* the state of the interrupted channel *channel_id*; channel.ok.

    :raises NotFound: the user has no interrupted channel with that id.
    """
    state = vhost_classes(channel.vhost).resume(channel.user_name, channel_id)
    if state is None:
        raise NotFound(
            f"no interrupted channel {channel_id!r} of this user to resume; open a new channel",
            20, 50,
        )
    classes = channel_classes(channel)
    classes.channel_id = channel_id
    classes.resumed(state)
    return channel.build("channel.ok")
