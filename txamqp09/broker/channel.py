"""The server side of one channel: commands in, model calls, frames out.

:class:`ServerChannel` handles every exchange, queue, basic, tx, confirm,
access and channel method of the three versions through a table built once
per version from the handler names (``exchange_declare`` handles
exchange.declare). The file, stream, dtx, tunnel and message classes and
0-9's channel.ping, pong and ok are served by :mod:`txamqp09.broker.classes`;
methods of the 0-8 test class are refused with 540 not-implemented.

The publish -> route -> deliver -> ack path does not go through the table:
the channel's :class:`~txamqp09.broker.publishing.Publisher` takes
basic.publish, its content frames and basic.ack straight from the
connection's frame scanner, and writes deliveries, returns and confirms.

The classes of :mod:`txamqp09.broker.classes` use the channel through its
public interface, which they name as
:class:`~txamqp09.broker.classes.registry.ChannelLike`:
:meth:`~ServerChannel.reply`, :meth:`~ServerChannel.write`,
:meth:`~ServerChannel.queue_name` and the attributes documented on the
class. The channel sees its connection as a
:class:`~txamqp09.broker.base.ConnectionLike`.

Every method is checked against the user's permissions and access tickets
before its handler runs (:class:`~txamqp09.broker.auth.methods.AccessGuard`,
one table lookup for methods without rules); basic.publish on the hot path
is checked from its decoded ticket and exchange name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, cast

from twisted.internet.interfaces import IReactorTime
from twisted.python.failure import Failure

from txamqp09.broker.classes import ChannelClasses, class_handler
from txamqp09.broker.dialects import Dialect
from txamqp09.broker.held import HeldOutput
from txamqp09.broker.model import Client, Consumer, Mode, VirtualHost
from txamqp09.broker.model.replies import DIRECT_REPLY_TO
from txamqp09.broker.model.names import unique_name
from txamqp09.broker.publishing import Publisher, blame
from txamqp09.wire.base import Method
from txamqp09.wire.errors import (
    AMQPError,
    AMQPNotImplemented,
    CommandInvalid,
    InternalError,
    NotAllowed,
    NotFound,
    PreconditionFailed,
    ResourceError,
)
from txamqp09.store.interface import WriteFailed
from txamqp09.wire.frames import Command, method_frame
from txamqp09.wire.versions import ProtocolVersion

if TYPE_CHECKING:
    from txamqp09.broker.auth import AccessGuard
    from txamqp09.broker.base import ConnectionLike
    from txamqp09.protocol import OutputBatch
    from txamqp09.wire import methods

__all__ = ["ServerChannel"]

#: Handler of one method: (channel, method) -> None.
Handler = Callable[["ServerChannel", Any], None]


class ServerChannel:
    """One open channel of a :class:`~txamqp09.broker.server.ServerConnection`.

    :param connection: the connection the channel belongs to.
    :param number: the channel number.
    :param vhost: the virtual host the connection opened.
    :param client: the connection's model counterpart.

    :ivar publisher: the channel's hot path (publish, deliver, ack, confirms).
    :ivar session: the channel's model session (the publisher is its sink).
    :ivar spec: the generated module of the connection's version, as a
        :class:`~txamqp09.wire.methods.Spec` (the methods every version
        has; :meth:`build` makes the others).
    :ivar classes: the state of the classes beyond basic used on this
        channel (None until one is used; always there on 0-9, for the
        channel-id).
    """

    def __init__(
        self, connection: ConnectionLike, number: int, vhost: VirtualHost, client: Client
    ) -> None:
        assert connection.version is not None and connection.guard is not None
        assert connection.user is not None
        self.connection = connection
        self.number = number
        self.version: ProtocolVersion = connection.version
        self.spec: methods.Spec = connection.version.spec
        self.vhost = vhost
        self.client = client
        self.handlers = handlers_for(self.version)
        persistence = vhost.persistence
        #: Confirms and answers, each sent once what it follows is durable.
        self._output = HeldOutput(
            persistence.store if persistence is not None else None,
            connection.write, self._sessionClosed, self._storeFailed,
        )
        self.publisher = Publisher(
            self, self._output, self._consumerCancelled,
            per_consumer_qos=connection.dialect.per_consumer_qos,
            rollback_redelivers=not connection.dialect.rollback_keeps_acked,
            user_id=connection.dialect.publisher_user_id(connection.user.name, connection.user.tags),
        )
        self.session = self.publisher.session
        #: The queue most recently declared here (the empty-name shortcut).
        self.last_queue = ""
        #: The name the next server-named queue gets, once checked.
        self._next_queue_name: Optional[str] = None
        self.classes: Optional[ChannelClasses] = None

    # -- dispatch --------------------------------------------------------------

    def methodReceived(self, method: Method, command: Optional[Command] = None) -> None:
        """Handle a method (other than channel.open/close) arriving on this channel.

        :param command: the method with its content, for a content method
            (whose handler receives the command instead of the method).
        """
        handler = self.handlers.get(type(method))
        if handler is None:
            raise _refusal(method)
        try:
            if not _for_replies(method):
                self.guard.check(self.number, method, queue=self._checked_queue(method))
            self._output.method_started()
            handler(self, method if command is None else command)
        except AMQPError as error:
            blame(error, method.CLASS_ID, method.METHOD_ID)
            raise

    @property
    def dialect(self) -> Dialect:
        """The rules of the connection's protocol version."""
        return self.connection.dialect

    @property
    def guard(self) -> AccessGuard:
        """The connection's access guard."""
        guard = self.connection.guard
        assert guard is not None
        return guard

    def _checked_queue(self, method: Method) -> Optional[str]:
        """The queue *method* acts on when its ``queue`` field is empty (None otherwise).

        That is the queue last declared on this channel, or for a new
        server-named queue the name it will get, so that permissions are
        checked on the real name, as RabbitMQ does.

        :raises NotFound: the channel has declared no queue yet.
        """
        if getattr(method, "queue", None) != "":
            return None
        if method.NAME == "queue.declare":
            if cast("methods.QueueDeclare", method).passive:
                return self.last_queue or None
            if self._next_queue_name is None:
                self._next_queue_name = unique_name("amq.gen-")
            return self._next_queue_name
        return self.queue_name("")

    # -- the interface of the classes (classes.registry.ChannelLike) -----------

    @property
    def frame_max(self) -> int:
        """The connection's negotiated frame_max."""
        return self.connection.frame_max

    @property
    def max_body_size(self) -> int:
        """The largest message body the connection accepts."""
        return self.connection.max_body_size

    @property
    def clock(self) -> IReactorTime:
        """The connection's clock."""
        return self.connection.clock

    @property
    def batch(self) -> OutputBatch:
        """The output batch the connection writes through."""
        return self.connection.batch

    @property
    def user_name(self) -> str:
        """The name of the user that opened the connection."""
        user = self.connection.user
        return user.name if user is not None else ""

    def build(self, name: str, **fields: Any) -> Method:
        """Method *name* (``"exchange.bind-ok"``) of the channel's version with
        *fields*: for the methods only some versions have, which
        :attr:`spec` does not offer by attribute."""
        return self.spec.BY_NAME[name](**fields)

    def reply(self, method: Method) -> None:
        """Answer the current method, once what it wrote to the store is durable."""
        self._output.answer(method_frame(self.number, method))

    def send(self, frames: bytes) -> None:
        """Write *frames* now, or after the answers held for the store."""
        self._output.send_after(0, frames)

    def write(self, frames: bytes) -> None:
        """Write *frames* now, ahead of any answer held for the store."""
        self.connection.write(frames)

    def queue_name(self, name: str) -> str:
        """*name*, or the queue last declared on this channel when it is empty.

        :raises NotFound: none was declared (RabbitMQ's dialect, 404).
        :raises NotAllowed: none was declared (the specifications' dialect, 530).
        """
        if name:
            return name
        if not self.last_queue:
            refusal = NotFound if self.dialect.empty_queue_name_not_found else NotAllowed
            raise refusal("no previously declared queue", hint="name the queue: none was declared on this channel")
        return self.last_queue

    def _sessionClosed(self) -> bool:
        return self.session.closed

    def close(self, interrupted: bool = False) -> None:
        """The channel is closing: settle the model side (requeue unacked, end
        consumers) and destroy its access tickets.

        :param interrupted: the connection ended while the channel was open
            (0-9's channel.resume may take it over).
        """
        self.publisher.close()
        self._output.clear()
        if self.classes is not None:
            self.classes.close(interrupted)
        self.session.close()
        self.guard.channel_closed(self.number)

    def oldestUnacked(self) -> Optional[int]:
        """The delivery tag of the oldest delivery not yet acknowledged, or None."""
        return next(iter(self.session.unacked), None)

    def ackTimedOut(self, error: PreconditionFailed) -> None:
        """A delivery stayed unacknowledged too long: close the channel with
        *error* (what it had unacknowledged is requeued)."""
        self.connection.channelError(self.number, error)

    def _storeFailed(self, failure: Failure) -> None:
        """The store could not write what a method changed (the disk is full
        or failing: 506), or cannot make anything durable any more (541):
        what waits can never be sent."""
        if self.session.closed:
            return
        if failure.check(WriteFailed):
            self.connection.close(ResourceError(f"{failure.getErrorMessage()}: the disk is full or failing"))
        else:
            self.connection.close(InternalError(f"the message store failed: {failure.getErrorMessage()}"))

    def _consumerCancelled(self, consumer: Consumer) -> None:
        """Tell a client that advertises consumer_cancel_notify that its queue went."""
        if self.connection.cancel_notify:
            self.reply(self.spec.BasicCancel(consumer_tag=consumer.tag, nowait=True))

    # -- channel -------------------------------------------------------------

    def channel_flow(self, method: methods.ChannelFlow) -> None:
        """The client pauses (or resumes) deliveries to this channel."""
        self.session.flow(method.active)
        if self.classes is not None:
            self.classes.flow(method.active)
        self.reply(self.spec.ChannelFlowOk(active=method.active))

    def channel_flow_ok(self, method: methods.ChannelFlowOk) -> None:
        """The client confirms a channel.flow the server sent."""

    def access_request(self, method: methods.AccessRequest) -> None:
        """0-8 / 0-9: grant a ticket for the realm, if the user holds the rights asked for."""
        self.reply(self.build("access.request-ok", ticket=self.guard.request_ticket(self.number, method)))

    # -- exchange ------------------------------------------------------------

    def exchange_declare(self, method: methods.ExchangeDeclare) -> None:
        self.vhost.declare_exchange(
            method.exchange,
            method.type,
            passive=method.passive,
            durable=method.durable,
            auto_delete=method.auto_delete,
            internal=method.internal,
            arguments=method.arguments,
            dialect=self.dialect,
        )
        if not method.nowait:
            self.reply(self.spec.ExchangeDeclareOk())

    def exchange_delete(self, method: methods.ExchangeDelete) -> None:
        self.vhost.delete_exchange(method.exchange, if_unused=method.if_unused, dialect=self.dialect)
        if not method.nowait:
            self.reply(self.spec.ExchangeDeleteOk())

    def exchange_bind(self, method: methods.ExchangeBind) -> None:
        self.vhost.bind_exchange(method.destination, method.source, method.routing_key, method.arguments)
        if not method.nowait:
            self.reply(self.build("exchange.bind-ok"))

    def exchange_unbind(self, method: methods.ExchangeUnbind) -> None:
        self.vhost.unbind_exchange(method.destination, method.source, method.routing_key, method.arguments)
        if not method.nowait:
            self.reply(self.build("exchange.unbind-ok"))

    # -- queue ---------------------------------------------------------------

    def queue_declare(self, method: methods.QueueDeclare) -> None:
        name = method.queue
        if name.startswith(DIRECT_REPLY_TO):
            # The pseudo-queue holds nothing and has its consumer.
            self._declared(method, self.vhost.reply_queue(name), 0, 1)
            return
        server_named = not name and not method.passive
        if server_named:
            # Generated and checked by _checked_queue before this handler ran.
            assert self._next_queue_name is not None
            name, self._next_queue_name = self._next_queue_name, None
        elif method.passive:
            name = name or self.last_queue
        queue = self.vhost.declare_queue(
            name,
            self.client,
            passive=method.passive,
            durable=method.durable,
            exclusive=method.exclusive,
            auto_delete=method.auto_delete,
            arguments=method.arguments,
            server_named=server_named,
            dialect=self.dialect,
        )
        self._declared(method, queue.name, queue.message_count, queue.consumer_count)

    def _declared(self, method: methods.QueueDeclare, name: str, messages: int, consumers: int) -> None:
        """Queue *name* is the channel's last declared one: answer declare-ok (unless nowait)."""
        self.last_queue = name
        if not method.nowait:
            self.reply(self.spec.QueueDeclareOk(queue=name, message_count=messages, consumer_count=consumers))

    def _binding_names(self, method: methods.QueueBind | methods.QueueUnbind) -> tuple[str, str]:
        """Queue name and routing key of a bind/unbind, with the empty-name shortcut."""
        queue = self.queue_name(method.queue)
        routing_key = method.routing_key if method.queue or method.routing_key else queue
        return queue, routing_key

    def queue_bind(self, method: methods.QueueBind) -> None:
        queue, routing_key = self._binding_names(method)
        self.vhost.bind_queue(queue, method.exchange, routing_key, method.arguments, self.client, self.dialect)
        if not method.nowait:
            self.reply(self.spec.QueueBindOk())

    def queue_unbind(self, method: methods.QueueUnbind) -> None:
        queue, routing_key = self._binding_names(method)
        self.vhost.unbind_queue(queue, method.exchange, routing_key, method.arguments, self.client, self.dialect)
        self.reply(self.build("queue.unbind-ok"))

    def queue_purge(self, method: methods.QueuePurge) -> None:
        count = self.vhost.purge_queue(self.queue_name(method.queue), self.client)
        if not method.nowait:
            self.reply(self.spec.QueuePurgeOk(message_count=count))

    def queue_delete(self, method: methods.QueueDelete) -> None:
        count = self.vhost.delete_queue_named(
            self.queue_name(method.queue),
            self.client,
            if_unused=method.if_unused,
            if_empty=method.if_empty,
            dialect=self.dialect,
        )
        if not method.nowait:
            self.reply(self.spec.QueueDeleteOk(message_count=count))

    # -- basic ---------------------------------------------------------------

    def basic_qos(self, method: methods.BasicQos) -> None:
        self.session.qos(method.prefetch_size, method.prefetch_count, method.global_)
        self.reply(self.spec.BasicQosOk())

    def basic_consume(self, method: methods.BasicConsume) -> None:
        """basic.consume of a queue, or of the direct reply-to pseudo-queue."""
        consumer: Optional[Consumer] = None
        if method.queue == DIRECT_REPLY_TO:
            tag = self.session.consume_replies(method.consumer_tag, method.no_ack, self.publisher.deliver).tag
        else:
            queue = self.vhost.queue(self.queue_name(method.queue), self.client)
            consumer = self.session.consume(
                queue, method.consumer_tag, no_ack=method.no_ack,
                no_local=method.no_local, exclusive=method.exclusive, arguments=getattr(method, "arguments", None),
            )
            tag = consumer.tag
        self.publisher.consuming(tag)
        if not method.nowait:
            self.reply(self.spec.BasicConsumeOk(consumer_tag=tag))
        if consumer is not None:
            consumer.start()

    def basic_cancel(self, method: methods.BasicCancel) -> None:
        self.session.cancel(method.consumer_tag)
        self.publisher.stopped(method.consumer_tag)
        if not method.nowait:
            self.reply(self.spec.BasicCancelOk(consumer_tag=method.consumer_tag))

    def basic_get(self, method: methods.BasicGet) -> None:
        queue = self.vhost.queue(self.queue_name(method.queue), self.client)
        got = self.session.get(queue, method.no_ack)
        if got is None:
            self.send(method_frame(self.number, self.spec.BasicGetEmpty()))
            return
        tag, redelivered, message = got
        self.publisher.get_ok(tag, redelivered, message, queue.message_count)

    def basic_reject(self, method: methods.BasicReject) -> None:
        self.session.reject(method.delivery_tag, method.requeue)

    def basic_nack(self, method: methods.BasicNack) -> None:
        self.session.nack(method.delivery_tag, method.multiple, method.requeue)

    def basic_recover(self, method: methods.BasicRecover) -> None:
        """basic.recover; 0-9-1 answers recover-ok, 0-8 and 0-9 have no answer."""
        self._recover(method.requeue)
        recover_ok = getattr(self.spec, "BasicRecoverOk", None)
        if recover_ok is not None:
            self.reply(recover_ok())

    def basic_recover_async(self, method: methods.BasicRecoverAsync) -> None:
        self._recover(method.requeue)

    def _recover(self, requeue: bool) -> None:
        """basic.recover, refused on a transactional channel where the dialect says so."""
        if self.session.mode is Mode.TX and not self.dialect.recover_in_tx:
            raise PreconditionFailed("basic.recover is not allowed on a transactional channel")
        self.session.recover(requeue)

    # -- tx and confirm ------------------------------------------------------

    def transaction(self, verb: str) -> None:
        """``select``, ``commit`` or ``rollback`` the transaction of every class in use."""
        getattr(self.session, f"tx_{verb}")()
        if self.classes is not None:
            self.classes.tx(verb)

    def tx_select(self, method: methods.TxSelect) -> None:
        self.transaction("select")
        self.reply(self.spec.TxSelectOk())

    def tx_commit(self, method: methods.TxCommit) -> None:
        """Apply the transaction; commit-ok once what it wrote to the store is durable."""
        self.transaction("commit")
        self.reply(self.spec.TxCommitOk())

    def tx_rollback(self, method: methods.TxRollback) -> None:
        self.transaction("rollback")
        self.reply(self.spec.TxRollbackOk())

    def confirm_select(self, method: methods.ConfirmSelect) -> None:
        self.session.confirm_select()
        if not method.nowait:
            self.reply(self.build("confirm.select-ok"))


def _for_replies(method: Method) -> bool:
    """Whether *method* declares the direct reply-to pseudo-queue or a
    reply name, or consumes the pseudo-queue: RabbitMQ checks no
    permission for those (they touch no queue)."""
    queue = getattr(method, "queue", "")
    if method.NAME == "queue.declare":
        return bool(queue.startswith(DIRECT_REPLY_TO))
    return method.NAME == "basic.consume" and queue == DIRECT_REPLY_TO


def _refusal(method: Method) -> Exception:
    """The error for a method no handler serves."""
    if "server" not in method.CHASSIS:
        return CommandInvalid(
            "unimplemented method", method.CLASS_ID, method.METHOD_ID,
            hint=f"{method.NAME} is sent by servers, not clients",
        )
    return AMQPNotImplemented(
        f"{method.NAME} is not implemented by this broker", method.CLASS_ID, method.METHOD_ID
    )


_TABLES: dict[ProtocolVersion, dict[type[Method], Handler]] = {}


def handlers_for(version: ProtocolVersion) -> dict[type[Method], Handler]:
    """The handler of every method of *version* a channel serves, by method class."""
    table = _TABLES.get(version)
    if table is None:
        table = _TABLES[version] = {}
        for cls in version.methods.values():
            if "server" not in cls.CHASSIS or cls.NAME.startswith("connection."):
                continue
            handler = getattr(ServerChannel, cls.HANDLER, None)
            if handler is None:
                handler = class_handler(cls)
            if handler is not None:
                table[cls] = handler
    return table
