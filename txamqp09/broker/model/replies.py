"""Direct reply-to: RabbitMQ's ``amq.rabbitmq.reply-to`` pseudo-queue.

An RPC client consumes the pseudo-queue, without acknowledgement, on the
channel it publishes its requests on, each with ``reply_to`` set to
``amq.rabbitmq.reply-to``. The broker gives that channel a *reply name*,
``amq.rabbitmq.reply-to.`` and 22 random characters, and puts it in the
``reply_to`` of every message the channel publishes with the pseudo-queue as
its reply-to. A server answers to the ``reply_to`` it received, on the
default exchange: a message published there with a reply name as routing key
reaches no queue and goes straight to the consuming channel, if it is still
consuming (otherwise it is dropped); nothing is stored. As in RabbitMQ 3.10
it routes to no queue, so with ``mandatory`` it is also returned (312
NO_ROUTE), delivered or not.

RabbitMQ's rules and texts, which :class:`~.session.Session` applies:
consuming the pseudo-queue with acknowledgements is 406 ``reply consumer
cannot acknowledge``, a second such consumer on a channel 406 ``reply
consumer already set``, and publishing with the pseudo-queue as reply-to on
a channel that does not consume it 406 ``fast reply consumer does not
exist``. queue.declare of the pseudo-queue, whatever its flags, answers
declare-ok with one consumer; of a reply name, the same while its channel
consumes, else 404.

A reply is delivered under the delivery tag the channel's next delivery will
have (it is not used up: replies are never acknowledged), as RabbitMQ does.
Reply names are unique in the broker: a reply reaches its channel from any
virtual host, as in RabbitMQ, where the name leads to the channel's process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol

from txamqp09.wire.versions import DIRECT_REPLY_TO

if TYPE_CHECKING:
    from txamqp09.broker.model.message import Message

__all__ = ["DIRECT_REPLY_TO", "REPLY_NAME_PREFIX", "ReplyConsumer", "ReplySession", "Replies", "SendReply"]

#: What every reply name starts with.
REPLY_NAME_PREFIX = DIRECT_REPLY_TO + "."


#: Sends a reply to the client: (the reply consumer, delivery tag,
#: redelivered, message); the server channel's basic.deliver.
SendReply = Callable[["ReplyConsumer", int, bool, "Message"], None]


class ReplySession(Protocol):
    """A channel's session as its reply consumer sees it (a
    :class:`~.session.Session`)."""

    def deliver_reply(self, consumer: ReplyConsumer, message: Message) -> None:
        """Deliver a reply to *consumer*, if it still consumes for the channel."""


class ReplyConsumer:
    """A channel's consumer of the pseudo-queue.

    :ivar tag: its consumer tag.
    :ivar name: the channel's reply name.
    :ivar session: the channel's session.
    :ivar send: sends it a reply.
    """

    __slots__ = ("tag", "name", "session", "send")

    def __init__(self, tag: str, name: str, session: ReplySession, send: SendReply) -> None:
        self.tag = tag
        self.name = name
        self.session = session
        self.send = send

    def __repr__(self) -> str:
        return f"<ReplyConsumer {self.tag!r} as {self.name!r}>"


class Replies:
    """The reply names in use in a broker, and their consumers."""

    def __init__(self) -> None:
        self._consumers: dict[str, ReplyConsumer] = {}

    def add(self, consumer: ReplyConsumer) -> None:
        """Deliver the replies to *consumer*'s name to it from now on."""
        self._consumers[consumer.name] = consumer

    def remove(self, consumer: ReplyConsumer) -> None:
        """Its channel stopped consuming: replies to its name are dropped."""
        if self._consumers.get(consumer.name) is consumer:
            del self._consumers[consumer.name]

    def declared(self, name: str) -> bool:
        """Whether queue.declare of *name* finds it: the pseudo-queue, or a
        reply name whose channel consumes."""
        return name == DIRECT_REPLY_TO or name in self._consumers

    def route(self, routing_key: str, message: Message) -> None:
        """*message* was published to the default exchange with *routing_key*,
        a reply name: deliver it to that name's consumer, if there is one."""
        consumer = self._consumers.get(routing_key)
        if consumer is not None:
            consumer.session.deliver_reply(consumer, message)
