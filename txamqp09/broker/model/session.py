"""What the broker knows of a client connection and of each of its channels.

A :class:`Client` stands for one connection: its exclusive queues and the
connection-wide prefetch window. A :class:`Session` stands for one channel:
its consumers, the messages delivered to it and not yet settled, its
prefetch windows, flow state, transaction and publisher confirms. Sessions
talk back to the server layer through an :class:`ISink`.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence

from zope.interface import Interface

from txamqp09.broker.model.exchange import Exchange
from txamqp09.broker.model.deadletter import REJECTED
from txamqp09.broker.model.message import EXPIRATION_FLAG, USER_ID_FLAG, Message, message_ttl
from txamqp09.broker.model.arguments import QUORUM, STREAM
from txamqp09.broker.model.names import unique_name
from txamqp09.broker.model.queue import Consumer, Delivery, Prefetch, Queue
from txamqp09.broker.model.replies import DIRECT_REPLY_TO, REPLY_NAME_PREFIX, ReplyConsumer, SendReply
from txamqp09.broker.model.stream import rejection_refused
from txamqp09.broker.model.stats import ChannelCounters
from txamqp09.wire.errors import AccessRefused, AMQPNotImplemented, NotAllowed, NotFound, PreconditionFailed

if TYPE_CHECKING:
    from txamqp09.broker.model.vhost import VirtualHost

__all__ = ["ISink", "Client", "Session", "Transaction", "NO_ROUTE", "NO_CONSUMERS"]

#: basic.return reply code and text for a mandatory message no queue took.
NO_ROUTE = (312, "NO_ROUTE")
#: basic.return reply code and text for an immediate message no consumer took.
NO_CONSUMERS = (313, "NO_CONSUMERS")
#: The delivery-mode bit in the first byte of the property flags.
_DELIVERY_MODE_FLAG = 0x10


class ISink(Interface):
    """How a session reaches its client (provided by the server's
    :class:`~txamqp09.broker.publishing.Publisher`)."""

    def deliver(consumer: Consumer, delivery_tag: int, redelivered: bool, message: Message) -> None:
        """Send basic.deliver with *message* to *consumer*."""

    def returned(reply_code: int, reply_text: str, message: Message) -> None:
        """Send basic.return: *message* could not be routed or delivered."""

    def confirmed(sequence: int, ack: bool) -> None:
        """Send a publisher confirm (basic.ack, or basic.nack when not *ack*)."""

    def cancelled(consumer: Consumer) -> None:
        """*consumer* ended because its queue was deleted."""


class Client:
    """A connection, as the model sees it.

    :param name: how errors and listings name the connection.
    """

    def __init__(self, name: str = "") -> None:
        self.name = name
        #: The connection-wide window (0-8 and 0-9 ``basic.qos global``).
        self.prefetch = Prefetch()
        self.sessions: dict[Session, None] = {}
        self.exclusive_queues: dict[Queue, None] = {}
        self.writable = True
        #: The store sequence number of the latest stream append of a message
        #: this connection published (its confirms wait for it).
        self.log_sequence = 0

    def set_writable(self, writable: bool) -> None:
        """The connection can (or cannot) take more output now."""
        self.writable = writable
        for session in list(self.sessions):
            session.update_sending()

    def refill(self) -> None:
        """Let every session's consumers take waiting messages."""
        for session in list(self.sessions):
            session.refill()

    def halt(self) -> None:
        """Deliver nothing more to this connection (it is about to close,
        with others: the messages their closing requeues stay queued)."""
        for session in list(self.sessions):
            session.flow(False)

    def close(self) -> None:
        """The connection ended: close its sessions, delete its exclusive queues."""
        for session in list(self.sessions):
            session.close()
        for queue in list(self.exclusive_queues):
            queue.vhost.delete_queue(queue)

    def __repr__(self) -> str:
        return f"<Client {self.name!r}>"


#: How deliveries are settled: acknowledged, rejected without requeue
#: (dropped or dead-lettered), or requeued.
ACK, REJECT, REQUEUE = "ack", "reject", "requeue"


def _by_queue(deliveries: Iterable[Delivery]) -> dict[Queue, list[Delivery]]:
    """*deliveries* grouped by the queue they came from, in order."""
    by_queue: dict[Queue, list[Delivery]] = defaultdict(list)
    for delivery in deliveries:
        by_queue[delivery.queue].append(delivery)
    return by_queue


class Mode(enum.Enum):
    """What a session does with publishes and settlements.

    ::

        NONE --tx.select-->      TX       (tx.select again: stays)
        NONE --confirm.select--> CONFIRM  (confirm.select again: stays)

    A session never leaves TX or CONFIRM; switching from one to the other
    is refused with 406 precondition-failed (:meth:`Session.tx_select`,
    :meth:`Session.confirm_select`), and tx.commit or tx.rollback outside
    TX too.
    """

    #: Publishes are routed and settlements applied as they arrive.
    NONE = "none"
    #: Publishes and settlements are held until tx.commit.
    TX = "tx"
    #: Every publish is confirmed (basic.ack or basic.nack).
    CONFIRM = "confirm"


# The modes as module constants: compared on every publish and ack.
_TX = Mode.TX
_CONFIRM = Mode.CONFIRM
#: The refusal of a switch to a mode from the other one: (text, hint).
_SWITCH_REFUSED = {
    Mode.TX: ("cannot switch from confirm to tx mode", "the channel confirms publishes"),
    Mode.CONFIRM: ("cannot switch from tx to confirm mode", "the channel is transactional"),
}


class Transaction:
    """Publishes and settlements of a transactional session, held until commit."""

    def __init__(self) -> None:
        self.publishes: list[tuple[Exchange, Message, bool, bool]] = []
        #: (delivery tags, outcome: ACK, REJECT or REQUEUE) per ack, reject
        #: or nack, in order.
        self.settlements: list[tuple[list[int], str]] = []
        #: Tags already settled in this transaction.
        self.pending: set[int] = set()


class Session:
    """One channel's state.

    :param per_consumer_qos: ``basic.qos global=false`` limits each new
        consumer and ``global=true`` the channel (RabbitMQ's reading, for
        0-9-1); otherwise they limit the channel and the connection, as the
        0-8 and 0-9 specifications say.
    :param rollback_redelivers: tx.rollback delivers again what the
        transaction acknowledged, rejected or nacked (the 0-8/0-9 brokers'
        reading); otherwise those deliveries stay unacknowledged (RabbitMQ).
    :param user_id: the user-id a published message must carry if it carries
        one (RabbitMQ's check), or None to accept any.
    """

    def __init__(
        self, vhost: VirtualHost, client: Client, sink: ISink, *, per_consumer_qos: bool = True,
        rollback_redelivers: bool = False, user_id: Optional[str] = None,
    ) -> None:
        self.vhost = vhost
        self.client = client
        self.sink = sink
        self.per_consumer_qos = per_consumer_qos
        self.rollback_redelivers = rollback_redelivers
        self.user_id = user_id
        self.consumers: dict[str, Consumer] = {}
        #: Its consumer of the direct reply-to pseudo-queue, if any.
        self.reply_consumer: Optional[ReplyConsumer] = None
        #: Delivered, unsettled messages by delivery tag, in tag order.
        self.unacked: dict[int, Delivery] = {}
        self.last_tag = 0
        #: What this channel did (see :mod:`.stats`).
        self.stats = ChannelCounters()
        self.prefetch = Prefetch()
        self._consumer_window = (0, 0)
        self.flow_active = True
        self.closed = False
        #: Deliveries may be sent now (flow on, connection writable, open).
        self.sending = True
        #: Transactional, confirming, or neither.
        self.mode = Mode.NONE
        #: What a transactional session holds until commit (empty in other modes).
        self.tx = Transaction()
        self.published = 0
        #: The message store's sequence number of the last persistent message
        #: this session wrote (0: none); confirms wait until it is durable.
        self.stored_sequence = 0
        #: The store's sequence number of the write of the message being
        #: confirmed, while :meth:`ISink.confirmed` runs (0: not written).
        self.confirming_write = 0
        self._persistence = vhost.persistence
        client.sessions[self] = None

    # -- flow and qos ----------------------------------------------------------

    @property
    def flowing(self) -> bool:
        """The channel is open with its flow on: consumers bounded by a
        prefetch window may take messages, even while the connection's
        transport is paused (see :meth:`Consumer.can_take`); the others wait
        for :attr:`sending`."""
        return self.flow_active and not self.closed

    def update_sending(self) -> None:
        """Recompute :attr:`sending`; deliver waiting messages when it turns on."""
        sending = self.flowing and self.client.writable
        if sending and not self.sending:
            self.sending = True
            self.refill()
        self.sending = sending

    def flow(self, active: bool) -> None:
        """channel.flow from the client: pause or resume deliveries."""
        self.flow_active = active
        self.update_sending()
        if active and not self.sending:
            self.refill()  # windowed consumers take even while the transport is paused

    def qos(self, prefetch_size: int, prefetch_count: int, global_: bool) -> None:
        """basic.qos: set a prefetch window (see *per_consumer_qos*)."""
        if self.per_consumer_qos and not global_:
            self._consumer_window = (prefetch_count, prefetch_size)
            return
        connection_wide = global_ and not self.per_consumer_qos
        window = self.client.prefetch if connection_wide else self.prefetch
        window.count, window.size = prefetch_count, prefetch_size
        if connection_wide:
            self.client.refill()
        else:
            self.refill()

    @property
    def consumer_prefetch_count(self) -> int:
        """The prefetch count each new consumer gets (basic.qos global=false on 0-9-1)."""
        return self._consumer_window[0]

    def refill(self) -> None:
        """Deliver waiting messages of this session's queues while there is
        room (and their consumers may take them: :meth:`Consumer.can_take`)."""
        if not self.flowing:
            return
        for consumer in list(self.consumers.values()):
            queue = consumer.queue
            if queue.messages or queue.settings.queue_type == STREAM:
                queue.drain()

    # -- consumers -----------------------------------------------------------

    def consume(
        self,
        queue: Queue,
        tag: str = "",
        *,
        no_ack: bool = False,
        no_local: bool = False,
        exclusive: bool = False,
        arguments: Optional[Mapping[str, Any]] = None,
    ) -> Consumer:
        """basic.consume: add a consumer (a tag is generated when empty).

        Deliveries begin with :meth:`Consumer.start`, once the client has
        been told about the consumer.

        :param arguments: basic.consume's arguments (``x-priority``).
        :raises NotAllowed: the tag is in use on this channel (530).
        :raises AccessRefused: exclusive use conflicts with other consumers,
            or the queue has a single active consumer (403).
        :raises AMQPNotImplemented: a quorum queue with a channel-wide
            prefetch (RabbitMQ's global qos) (540).
        :raises PreconditionFailed: an invalid argument (406).
        """
        tag = tag or unique_name("amq.ctag-")
        reply_consumer = self.reply_consumer
        self._check_tag(tag, in_use=reply_consumer is not None and reply_consumer.tag == tag)
        if queue.has_exclusive_consumer or (exclusive and (queue.consumers or queue.settings.single_active_consumer)):
            raise AccessRefused(
                f"queue {queue.name!r} in vhost {self.vhost.name!r} in exclusive use",
                hint="another consumer holds it exclusively" if queue.has_exclusive_consumer
                else "it has consumers already" if queue.consumers
                else "it has a single active consumer, so consumers may not be exclusive",
            )
        if queue.settings.queue_type == QUORUM and self.per_consumer_qos and self.prefetch.count:
            raise AMQPNotImplemented(
                f"queue {queue.name!r} in vhost {self.vhost.name!r} does not support global qos",
                hint="set the prefetch count with basic.qos global=false",
            )
        consumer = queue.new_consumer(
            tag, self, no_ack=no_ack, no_local=no_local, exclusive=exclusive,
            limits=self._limits(), arguments=arguments or {},
        )
        self.consumers[tag] = consumer
        queue.add_consumer(consumer)
        return consumer

    def _check_tag(self, tag: str, in_use: bool = False) -> None:
        """Refuse *tag* if a consumer of a queue has it, or when *in_use*.

        :raises NotAllowed: it is in use on this channel (530).
        """
        if in_use or tag in self.consumers:
            raise NotAllowed(f"attempt to reuse consumer tag {tag!r}", hint="it is in use on this channel")

    # -- direct reply-to -----------------------------------------------------

    def consume_replies(self, tag: str, no_ack: bool, send: SendReply) -> ReplyConsumer:
        """basic.consume of the direct reply-to pseudo-queue (see :mod:`.replies`):
        give the channel its reply name (a tag is generated when empty).

        :param send: sends the replies to the client (the server channel's
            basic.deliver).

        :raises NotAllowed: a queue's consumer has the tag (530).
        :raises PreconditionFailed: the consumer would acknowledge, or the
            channel consumes its replies already (406, RabbitMQ's texts).
        """
        tag = tag or unique_name("amq.ctag-")
        self._check_tag(tag)
        if not no_ack:
            raise PreconditionFailed(
                "reply consumer cannot acknowledge", hint=f"consume {DIRECT_REPLY_TO!r} with no-ack"
            )
        if self.reply_consumer is not None:
            raise PreconditionFailed(
                "reply consumer already set",
                hint=f"this channel consumes its replies as {self.reply_consumer.tag!r} already",
            )
        consumer = self.reply_consumer = ReplyConsumer(tag, unique_name(REPLY_NAME_PREFIX), self, send)
        self.vhost.replies.add(consumer)
        return consumer

    def reply_name(self) -> str:
        """The channel's reply name, which replaces the pseudo-queue in the
        ``reply_to`` of the messages it publishes.

        :raises PreconditionFailed: the channel does not consume the
            pseudo-queue (406, RabbitMQ's text).
        """
        if self.reply_consumer is None:
            raise PreconditionFailed(
                "fast reply consumer does not exist",
                hint=f"consume {DIRECT_REPLY_TO!r} with no-ack on this channel before publishing "
                "requests that name it as their reply-to",
            )
        return self.reply_consumer.name

    def deliver_reply(self, consumer: ReplyConsumer, message: Message) -> None:
        """Deliver a reply to this channel's reply name to *consumer*, under
        the tag the next delivery will have (not used up: no reply is acknowledged)."""
        if consumer is self.reply_consumer and not self.closed:
            consumer.send(consumer, self.last_tag + 1, False, message)

    def _stop_replies(self, consumer: ReplyConsumer) -> None:
        """The channel stops consuming its replies: they are dropped from now on."""
        self.reply_consumer = None
        self.vhost.replies.remove(consumer)

    def _limits(self) -> tuple[Prefetch, ...]:
        if not self.per_consumer_qos:
            return (self.prefetch, self.client.prefetch)
        count, size = self._consumer_window
        if count or size:
            return (Prefetch(count, size), self.prefetch)
        return (self.prefetch,)

    def cancel(self, tag: str) -> Optional[Consumer]:
        """basic.cancel: stop a consumer; the consumer of a queue that had
        *tag*, or None (none had it, or the reply consumer had it)."""
        reply_consumer = self.reply_consumer
        if reply_consumer is not None and reply_consumer.tag == tag:
            self._stop_replies(reply_consumer)
            return None
        consumer = self.consumers.pop(tag, None)
        if consumer is not None:
            consumer.queue.remove_consumer(consumer)
        return consumer

    def queue_deleted(self, consumer: Consumer) -> None:
        """*consumer*'s queue was deleted: forget it and tell the client."""
        if self.consumers.pop(consumer.tag, None) is not None:
            self.sink.cancelled(consumer)

    # -- publishing ----------------------------------------------------------

    def publish(self, exchange_name: str, message: Message, mandatory: bool, immediate: bool) -> None:
        """basic.publish, held until commit in a transaction.

        :raises NotFound: no such exchange (404).
        :raises AccessRefused: the exchange is internal (403).
        :raises PreconditionFailed: the message's expiration is invalid, or
            its user-id is not the connection's user's (406).
        """
        exchange = self.vhost.exchanges.get(exchange_name)
        if exchange is None:
            raise NotFound(f"no exchange {exchange_name!r} in vhost {self.vhost.name!r}")
        if exchange.internal:
            raise AccessRefused(
                f"cannot publish to internal exchange {exchange_name!r} in vhost "
                f"{self.vhost.name!r}",
                hint="bind it to another exchange and publish there",
            )
        if message.raw_properties[0] & EXPIRATION_FLAG:
            message_ttl(message)
        if self.user_id is not None and message.raw_properties[1] & USER_ID_FLAG:
            claimed = getattr(message.properties, "user_id", None)
            if claimed is not None and claimed != self.user_id:
                raise PreconditionFailed(
                    f"user_id property set to '{claimed}' but authenticated user was '{self.user_id}'"
                )
        self.stats.publish += 1
        if self.mode is _TX:
            self.tx.publishes.append((exchange, message, mandatory, immediate))
        else:
            self._route(exchange, message, mandatory, immediate)

    def _route(self, exchange: Exchange, message: Message, mandatory: bool, immediate: bool) -> None:
        """Route and deliver *message*."""
        queues = self.vhost.route(exchange, message)
        persistence = self._persistence
        written = 0
        if persistence is not None and (
            message.raw_properties[0] & _DELIVERY_MODE_FLAG or persistence.over_budget
        ):
            written = self._store(message, queues)
        accepted = True
        counters = exchange.stats
        counters.publish_in += 1
        if not queues:
            counters.unroutable += 1
            if mandatory:
                self.stats.return_unroutable += 1
                self.sink.returned(*NO_ROUTE, message)
            else:
                self.stats.drop_unroutable += 1
        elif immediate:
            taken = [queue.publish_immediately(message) for queue in queues]
            for queue, took in zip(queues, taken):
                if not took:
                    queue.discard((message,))
            if not any(taken):
                self.sink.returned(*NO_CONSUMERS, message)
        else:
            for queue in queues:
                accepted = queue.publish(message) and accepted
        if self.mode is _CONFIRM:
            self.published += 1
            self.stats.confirm += accepted
            self.confirming_write = written
            self.sink.confirmed(self.published, accepted)

    def _store(self, message: Message, queues: Sequence[Queue]) -> int:
        """Write *message* if it is persistent and a queue keeps it, and
        track it under the memory budget (before any queue can deliver it,
        so that its store id is known); the store's sequence number of the
        write (0: none)."""
        assert self._persistence is not None
        sequence = self._persistence.publish(message, queues)
        if sequence:
            self.stored_sequence = sequence
        return sequence

    def confirm_select(self) -> None:
        """confirm.select: confirm every later publish.

        :raises PreconditionFailed: the channel is transactional (406).
        """
        self._enter(Mode.CONFIRM)

    def _enter(self, mode: Mode) -> None:
        """Switch to *mode* (staying in it is allowed).

        :raises PreconditionFailed: the session is in the other of TX and CONFIRM (406).
        """
        if self.mode is not mode and self.mode is not Mode.NONE:
            text, hint = _SWITCH_REFUSED[mode]
            raise PreconditionFailed(text, hint=hint)
        self.mode = mode

    # -- getting -------------------------------------------------------------

    def get(self, queue: Queue, no_ack: bool) -> Optional[tuple[int, bool, Message]]:
        """basic.get: (delivery tag, redelivered, message as sent), or None if empty."""
        entry = queue.get()
        stats, counters = self.stats, queue.stats
        if entry is None:
            stats.get_empty += 1
            counters.get_empty += 1
            return None
        sequence, message, redelivered, deadline = entry
        if redelivered:
            stats.redeliver += 1
            counters.redeliver += 1
        sent = queue.as_sent(sequence, message, settled=no_ack, got=True)
        if no_ack:
            stats.get_no_ack += 1
            counters.get_no_ack += 1
            if message.tracking is not None:
                queue.discard((message,))
            return self.issue_tag(None), redelivered, sent
        stats.get += 1
        counters.get += 1
        return self.issue_tag(queue.delivery_type(queue, sequence, message, None, deadline)), redelivered, sent

    # -- delivery tags -------------------------------------------------------

    def issue_tag(self, delivery: Optional[Delivery]) -> int:
        """The channel's next delivery tag; *delivery* is kept under it until
        the client settles it (None: a message sent without acknowledgement).

        Every tag of the channel comes from here or from :meth:`deliver`,
        which does the same in line because it runs for every message.
        """
        tag = self.last_tag = self.last_tag + 1
        if delivery is not None:
            self.unacked[tag] = delivery
        return tag

    def deliver(
        self, consumer: Consumer, queue: Queue, sequence: int, message: Message, redelivered: bool,
        deadline: Optional[float] = None,
    ) -> None:
        """Send *message* from *queue* to *consumer* under the next delivery tag.

        Unless the consumer takes messages without acknowledgement, the
        delivery (of the consumer's :attr:`~Consumer.delivery_type`) is kept
        until the client settles it, and its size counts against the
        consumer's prefetch windows until then.

        :param sequence: the message's place in *queue* (its offset in a stream).
        :param deadline: when the message expires if it comes back to the queue.
        """
        tag = self.last_tag = self.last_tag + 1
        sent = message
        if redelivered:
            self.stats.redeliver += 1
            queue.stats.redeliver += 1
            sent = queue.as_sent(sequence, message, settled=consumer.no_ack, got=False)
        if consumer.no_ack:
            self.stats.deliver_no_ack += 1
            queue.stats.deliver_no_ack += 1
            if message.tracking is not None:
                queue.discard((message,))
        else:
            self.stats.deliver += 1
            queue.stats.deliver += 1
            self.unacked[tag] = consumer.delivery_type(queue, sequence, message, consumer, deadline)
            size = message.size
            for limit in consumer.limits:
                limit.take(size)
        self.sink.deliver(consumer, tag, redelivered, sent)

    # -- settling ------------------------------------------------------------

    def ack(self, tag: int, multiple: bool = False) -> None:
        """basic.ack from the client.

        :raises PreconditionFailed: *tag* is not an unsettled delivery (406).
        """
        if multiple or self.mode is _TX:
            self._settle_later_or_now(self._select(tag, multiple), ACK)
            return
        delivery = self.unacked.pop(tag, None)
        if delivery is None:
            raise self._unknown(tag)
        self.stats.ack += 1
        delivery.queue.stats.ack += 1
        if delivery.message.tracking is not None:
            delivery.queue.discard((delivery.message,))
        consumer = delivery.consumer
        if consumer is not None:
            delivery.release()
            queue = consumer.queue
            if queue.messages:
                queue.drain()
            if len(self.consumers) > 1 or not self.per_consumer_qos:
                self.refill_shared()

    def refill_shared(self) -> None:
        """Room opened in a window shared by several consumers (or connection-wide)."""
        if self.per_consumer_qos:
            self.refill()
        else:
            self.client.refill()

    def reject(self, tag: int, requeue: bool) -> None:
        """basic.reject: drop or requeue one delivery."""
        self._settle_later_or_now(self._rejectable(self._select(tag, False)), REQUEUE if requeue else REJECT)

    def nack(self, tag: int, multiple: bool, requeue: bool) -> None:
        """basic.nack: drop or requeue one or several deliveries."""
        self._settle_later_or_now(self._rejectable(self._select(tag, multiple)), REQUEUE if requeue else REJECT)

    def _rejectable(self, tags: list[int]) -> list[int]:
        """*tags*, unless one came from a stream (streams refuse rejection).

        :raises AMQPNotImplemented: a delivery of a stream is among them (540).
        """
        unacked = self.unacked
        for tag in tags:
            queue = unacked[tag].queue
            if queue.settings.queue_type == STREAM:
                raise rejection_refused(queue)
        return tags

    def _unknown(self, tag: int) -> PreconditionFailed:
        return PreconditionFailed(
            f"unknown delivery tag {tag}",
            hint="it was not delivered on this channel or is already acknowledged, rejected "
            "or recovered",
        )

    def _select(self, tag: int, multiple: bool) -> list[int]:
        pending = self.tx.pending
        if multiple and tag == 0:
            return [each for each in self.unacked if each not in pending]
        if tag not in self.unacked or tag in pending:
            raise self._unknown(tag)
        if not multiple:
            return [tag]
        selected = []
        for each in self.unacked:
            if each > tag:
                break
            if each not in pending:
                selected.append(each)
        return selected

    def _settle_later_or_now(self, tags: list[int], outcome: str) -> None:
        if self.mode is _TX:
            self.tx.settlements.append((tags, outcome))
            self.tx.pending.update(tags)
        else:
            self._settle(tags, outcome)

    def _settle(self, tags: Iterable[int], outcome: str) -> None:
        """Settle the deliveries under *tags*: acknowledged (:data:`ACK`: forgotten),
        rejected (:data:`REJECT`: dropped or dead-lettered) or :data:`REQUEUE`."""
        deliveries = [self.unacked.pop(tag) for tag in tags if tag in self.unacked]
        for delivery in deliveries:
            delivery.release()
        by_queue = _by_queue(deliveries)
        if outcome == ACK:
            self.stats.ack += len(deliveries)
            for queue, settled in by_queue.items():
                queue.stats.ack += len(settled)
                queue.discard([delivery.message for delivery in settled if delivery.message.tracking is not None])
        else:
            self.stats.reject += len(deliveries)
            for queue, settled in by_queue.items():
                queue.stats.reject += len(settled)
                if outcome == REJECT:
                    queue.drop((delivery.message for delivery in settled), REJECTED)
            if outcome == REQUEUE:
                self._requeue(deliveries)
        self.refill_shared()

    def _requeue(self, deliveries: list[Delivery]) -> None:
        for queue, returned in _by_queue(deliveries).items():
            queue.requeue(returned)

    def recover(self, requeue: bool) -> None:
        """basic.recover: resend every unsettled delivery, marked redelivered.

        With *requeue* the messages go back to their queues (and may reach
        another consumer); without it each goes again to the consumer it went
        to, or back to its queue when that consumer is gone.
        """
        deliveries = list(self.unacked.values())
        self.unacked.clear()
        self.tx.pending.clear()
        self.tx.settlements.clear()
        back: list[Delivery] = []
        for delivery in deliveries:
            consumer = delivery.consumer
            if requeue or consumer is None or self.consumers.get(consumer.tag) is not consumer:
                delivery.release()
                back.append(delivery)
            else:
                if delivery.message.body is None:
                    delivery.queue.read_back([delivery.message])
                for counters in (self.stats, delivery.queue.stats):
                    counters.deliver += 1
                    counters.redeliver += 1
                self.sink.deliver(consumer, self.issue_tag(delivery), True, delivery.resent())
        self._requeue(back)
        self.refill_shared()

    # -- transactions --------------------------------------------------------

    def tx_select(self) -> None:
        """tx.select: hold publishes and settlements until commit.

        :raises PreconditionFailed: the channel is in confirm mode (406).
        """
        self._enter(Mode.TX)

    def _transaction(self, verb: str) -> Transaction:
        if self.mode is not _TX:
            raise PreconditionFailed("channel is not transactional", hint=f"send tx.select before tx.{verb}")
        return self.tx

    def tx_commit(self) -> None:
        """tx.commit: apply every held settlement and publish, in order."""
        tx = self._transaction("commit")
        self.tx = Transaction()
        for tags, outcome in tx.settlements:
            self._settle(tags, outcome)
        for exchange, message, mandatory, immediate in tx.publishes:
            self._route(exchange, message, mandatory, immediate)

    def tx_rollback(self) -> None:
        """tx.rollback: forget held publishes and settlements; with
        ``rollback_redelivers`` the settled deliveries go back to their
        queues, marked redelivered, to be delivered again."""
        tx = self._transaction("rollback")
        self.tx = Transaction()
        if self.rollback_redelivers and tx.pending:
            self._settle(sorted(tx.pending), REQUEUE)

    # -- closing -------------------------------------------------------------

    def close(self) -> None:
        """The channel closed: requeue unsettled messages, end consumers."""
        if self.closed:
            return
        self.closed = True
        self.sending = False
        self.tx = Transaction()
        self.vhost.retired.add(self.stats)
        deliveries = list(self.unacked.values())
        self.unacked.clear()
        for delivery in deliveries:
            delivery.release()
        self._requeue(deliveries)
        for tag in list(self.consumers):
            self.cancel(tag)
        if self.reply_consumer is not None:
            self._stop_replies(self.reply_consumer)
        self.client.sessions.pop(self, None)
        if not self.per_consumer_qos and deliveries:
            self.client.refill()

    def __repr__(self) -> str:
        return f"<Session of {self.client!r}: {len(self.consumers)} consumers, {len(self.unacked)} unacked>"
