"""Each rule of :mod:`txamqp09.broker.dialects`, on the dialect it concerns.

0-8 and 0-9 connections (:class:`SpecifiedDialectTests`, run once per
version) follow their specifications; 0-9-1 connections
(:class:`RabbitMQDialectTests`) follow RabbitMQ 3.10, whose answers
``tests/broker/dialects/test_rabbitmq.py`` also compares with a real node. The
client is made of bare frames (:class:`txamqp09.testing.scripted.ScriptedClient`), so that
every code, scope and text is seen as sent.
"""

from __future__ import annotations

from typing import Any

from twisted.cred.checkers import ICredentialsChecker
from twisted.cred.credentials import IUsernamePassword
from twisted.cred.error import UnauthorizedLogin
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock
from twisted.trial.unittest import SkipTest, TestCase
from zope.interface import implementer

from txamqp09.testing.scripted import ScriptedClient, server_factory
from txamqp09.broker.auth.errors import HardAccessRefused, LoginRefused, MalformedResponse
from txamqp09.broker.dialects import RABBITMQ, SPECIFIED, SPECIFIED_0_8, dialect_for
from txamqp09.broker.server import ServerFactory
from txamqp09.wire import errors
from txamqp09.wire.frames import FRAME_BODY, content_frames
from txamqp09.wire.versions import AMQP0_8, AMQP0_9, AMQP0_9_1, VERSIONS, ProtocolVersion


class _Cases(TestCase):
    """Helpers shared by the dialects' tests."""

    version: ProtocolVersion = AMQP0_9_1

    def setUp(self) -> None:
        self.clock = Clock()
        self.factory: ServerFactory = server_factory(self.clock)
        self.peer = self.connect()

    def connect(self) -> ScriptedClient:
        return ScriptedClient(self.factory, self.version)

    def ask(self, method: Any, peer: ScriptedClient | None = None) -> Any:
        """Send *method* on channel 1; the first method the server answers."""
        peer = peer or self.peer
        peer.send(1, method)
        methods = peer.methods()
        self.assertTrue(methods, f"the server did not answer {method.NAME}")
        return methods[0][1]

    def assertClosed(self, answer: Any, scope: str, code: int) -> Any:
        """*answer* closes the channel or the connection with *code*."""
        self.assertEqual((answer.NAME, answer.reply_code), (f"{scope}.close", code), answer)
        return answer

    def handshake(self, *, channel_max: int = 0, vhost: str = "/") -> ScriptedClient:
        """A new connection that sent everything up to connection.open."""
        peer = ScriptedClient(self.factory, self.version, handshake=False)
        peer.feed(self.version.header)
        peer.expect(0, "connection.start")
        peer.send(0, peer.spec.ConnectionStartOk(
            client_properties={}, mechanism="PLAIN", response=b"\x00guest\x00guest", locale="en_US"))
        peer.expect(0, "connection.tune")
        peer.send(0, peer.spec.ConnectionTuneOk(channel_max=channel_max, frame_max=4096, heartbeat=0))
        peer.send(0, peer.spec.ConnectionOpen(virtual_host=vhost))
        return peer

    def ack_in_transaction(self) -> None:
        """Deliver one message to a consumer and acknowledge it inside a transaction."""
        spec = self.peer.spec
        self.declare_queue("q")
        self.ask(spec.BasicConsume(queue="q", consumer_tag="c"))
        self.peer.publish(1, "q", b"one")
        self.assertEqual(self.peer.deliveries(), [b"one"])
        self.ask(spec.TxSelect())
        self.peer.send(1, spec.BasicAck(delivery_tag=1))

    def declare_queue(self, name: str, peer: ScriptedClient | None = None, **flags: Any) -> Any:
        return self.ask((peer or self.peer).spec.QueueDeclare(queue=name, **flags), peer)

    def declare_exchange(self, name: str, kind: str, **flags: Any) -> Any:
        return self.ask(self.peer.spec.ExchangeDeclare(exchange=name, type=kind, **flags))

    def deliveries_with_channel_qos_one(self) -> list[bytes]:
        """What two consumers on channel 1 get after basic.qos prefetch-count 1,
        global false, and one message for each."""
        spec = self.peer.spec
        self.assertEqual(self.ask(spec.BasicQos(prefetch_count=1, global_=False)).NAME, "basic.qos-ok")
        for queue in ("a", "b"):
            self.declare_queue(queue)
            self.ask(spec.BasicConsume(queue=queue, consumer_tag=queue))
        for queue in ("a", "b"):
            self.peer.publish(1, queue, queue.encode())
        return self.peer.deliveries()

    def publish_as(self, user_id: str) -> Any:
        """Publish a message with *user_id* to queue ``q``; what the server answers
        to a basic.get of it (or the close the publish caused)."""
        spec = self.peer.spec
        self.declare_queue("q")
        method = spec.BasicPublish(exchange="", routing_key="q")
        self.peer.feed(content_frames(1, method, spec.BasicProperties(user_id=user_id), b"x", 4096))
        return self.ask(spec.BasicGet(queue="q", no_ack=True))

    def got(self, queue: str) -> list[bytes]:
        """The bodies basic.get takes from *queue* until it is empty."""
        bodies = []
        while True:
            self.peer.send(1, self.peer.spec.BasicGet(queue=queue, no_ack=True))
            frames = self.peer.frames()
            if frames[0][2].NAME == "basic.get-empty":
                return bodies
            bodies.append(b"".join(body for kind, _, body in frames if kind == FRAME_BODY))

    def server_properties(self) -> Any:
        """The server-properties of connection.start on a new connection."""
        peer = ScriptedClient(self.factory, self.version, handshake=False)
        peer.feed(self.version.header)
        return peer.expect(0, "connection.start").server_properties


class SpecifiedDialectTests(_Cases):
    """0-9 connections follow the 0-9 specification's rules."""

    version = AMQP0_9

    def test_dialect(self) -> None:
        self.assertIs(dialect_for(self.version), SPECIFIED)

    def test_delete_missing_queue_is_not_found(self) -> None:
        self.assertClosed(self.ask(self.peer.spec.QueueDelete(queue="nowhere")), "channel", 404)

    def test_unbind_missing_queue_is_not_found(self) -> None:
        if not hasattr(self.peer.spec, "QueueUnbind"):
            raise SkipTest(f"AMQP {self.version.name} has no queue.unbind")
        answer = self.ask(self.peer.spec.QueueUnbind(queue="nowhere", exchange="amq.direct"))
        self.assertClosed(answer, "channel", 404)

    def test_qos_without_global_limits_the_channel(self) -> None:
        self.assertEqual(self.deliveries_with_channel_qos_one(), [b"a"])

    def test_user_id_of_another_user_is_accepted(self) -> None:
        self.assertEqual(self.publish_as("someone").NAME, "basic.get-ok")

    def test_no_capabilities_announced(self) -> None:
        self.assertNotIn("capabilities", self.server_properties())

    def test_delete_missing_exchange_is_not_found(self) -> None:
        answer = self.assertClosed(self.ask(self.peer.spec.ExchangeDelete(exchange="nowhere")), "channel", 404)
        self.assertEqual(answer.reply_text, "no exchange 'nowhere' in vhost '/'")

    def test_exclusive_queue_of_another_connection_is_a_channel_error(self) -> None:
        """0-9's rule names channel-error (504), a connection exception."""
        self.declare_queue("q", exclusive=True)
        answer = self.assertClosed(self.declare_queue("q", peer=self.connect()), "connection", 504)
        self.assertEqual(answer.reply_text, "queue 'q' in vhost '/' is exclusive to another connection")

    def test_bind_durable_queue_to_transient_exchange_is_not_allowed(self) -> None:
        self.declare_exchange("x", "direct")
        self.declare_queue("q", durable=True)
        answer = self.ask(self.peer.spec.QueueBind(queue="q", exchange="x", routing_key="k"))
        self.assertClosed(answer, "connection", 530)
        self.assertEqual(answer.reply_text, "cannot bind durable queue 'q' to transient exchange 'x'")

    def test_bind_to_internal_exchange_is_not_allowed(self) -> None:
        self.declare_exchange("x", "direct", internal=True)
        self.declare_queue("q")
        answer = self.ask(self.peer.spec.QueueBind(queue="q", exchange="x", routing_key="k"))
        self.assertClosed(answer, "connection", 530)
        self.assertEqual(answer.reply_text, "cannot bind queue 'q' to internal exchange 'x'")

    def test_bind_durable_queue_to_durable_exchange_succeeds(self) -> None:
        self.declare_exchange("x", "direct", durable=True)
        self.declare_queue("q", durable=True)
        answer = self.ask(self.peer.spec.QueueBind(queue="q", exchange="x", routing_key="k"))
        self.assertEqual(answer.NAME, "queue.bind-ok")

    def test_recover_on_transactional_channel_is_refused(self) -> None:
        self.ask(self.peer.spec.TxSelect())
        answer = self.assertClosed(self.ask(self.peer.spec.BasicRecover(requeue=True)), "channel", 406)
        self.assertEqual(answer.reply_text, "basic.recover is not allowed on a transactional channel")

    def test_unbind_from_missing_exchange_is_not_found(self) -> None:
        if not hasattr(self.peer.spec, "QueueUnbind"):
            raise SkipTest(f"AMQP {self.version.name} has no queue.unbind")
        self.declare_queue("q")
        answer = self.ask(self.peer.spec.QueueUnbind(queue="q", exchange="nowhere", routing_key="k"))
        self.assertClosed(answer, "channel", 404)

    def test_exchange_redeclared_with_another_type_closes_the_connection(self) -> None:
        self.assertEqual(self.declare_exchange("x", "direct").NAME, "exchange.declare-ok")
        answer = self.assertClosed(self.declare_exchange("x", "fanout"), "connection", 530)
        self.assertIn("of type 'direct' with type 'fanout'", answer.reply_text)
        self.assertFalse(answer.reply_text.startswith("NOT_ALLOWED"))

    def test_reserved_exchange_redeclared_with_its_type_ignores_durable(self) -> None:
        answer = self.declare_exchange("amq.direct", "direct", durable=False)
        self.assertEqual(answer.NAME, "exchange.declare-ok")

    def test_exchange_redeclared_with_other_flags_succeeds(self) -> None:
        self.declare_exchange("x", "topic", durable=True)
        answer = self.declare_exchange("x", "topic", durable=False, auto_delete=True)
        self.assertEqual(answer.NAME, "exchange.declare-ok")
        exchange = self.factory.broker.vhosts["/"].exchanges["x"]
        self.assertEqual((exchange.durable, exchange.auto_delete), (True, False))

    def test_new_reserved_exchange_is_access_refused(self) -> None:
        """0-9's XML: the reserved rule's on-failure is access-refused."""
        self.assertClosed(self.declare_exchange("amq.mine", "direct"), "channel", 403)

    def test_reserved_queue_name_closes_the_connection(self) -> None:
        self.assertClosed(self.declare_queue("amq.mine"), "connection", 530)

    def test_queue_redeclared_with_other_flags_succeeds(self) -> None:
        self.declare_queue("q", durable=True)
        answer = self.declare_queue("q", durable=False, auto_delete=True)
        self.assertEqual(answer.NAME, "queue.declare-ok")

    def test_queue_redeclared_with_other_exclusive_is_inequivalent(self) -> None:
        self.declare_queue("q")
        self.assertClosed(self.declare_queue("q", exclusive=True), "channel", 406)

    def test_empty_queue_name_without_declared_queue_closes_the_connection(self) -> None:
        spec = self.peer.spec
        for method in (
            spec.BasicConsume(queue=""),
            spec.BasicGet(queue=""),
            spec.QueuePurge(queue=""),
            spec.QueueDelete(queue=""),
            spec.QueueBind(queue="", exchange="amq.direct", routing_key="k"),
        ):
            peer = self.connect()
            answer = self.assertClosed(self.ask(method, peer), "connection", 530)
            self.assertEqual(
                answer.reply_text,
                "no previously declared queue; name the queue: none was declared on this channel",
            )

    def test_bind_to_the_default_exchange_routes_by_its_key(self) -> None:
        """0-9's default-exchange scenario: a binding with no exchange name,
        then a publish with its key and no exchange name arrives."""
        spec = self.peer.spec
        self.declare_queue("q")
        answer = self.ask(spec.QueueBind(queue="q", exchange="", routing_key="k"))
        self.assertEqual(answer.NAME, "queue.bind-ok")
        for key in ("k", "q"):
            self.peer.publish(1, key, key.encode())
        self.assertEqual(self.got("q"), [b"k", b"q"])
        self.assertEqual(self.ask(spec.QueueUnbind(queue="q", exchange="", routing_key="k")).NAME, "queue.unbind-ok")
        self.peer.publish(1, "k", b"unbound")
        self.assertEqual(self.got("q"), [])

    def test_passive_declare_of_the_default_exchange_succeeds(self) -> None:
        answer = self.declare_exchange("", "direct", passive=True)
        self.assertEqual(answer.NAME, "exchange.declare-ok")

    def test_rollback_redelivers_what_the_transaction_acknowledged(self) -> None:
        spec = self.peer.spec
        self.ack_in_transaction()
        self.peer.send(1, spec.TxRollback())
        frames = self.peer.frames()
        methods = {body.NAME: body for kind, _, body in frames if kind == 1}
        self.assertEqual(sorted(methods), ["basic.deliver", "tx.rollback-ok"])
        self.assertTrue(methods["basic.deliver"].redelivered)
        self.assertIn((3, 1, b"one"), frames)

    def test_unknown_vhost_is_invalid_path(self) -> None:
        peer = self.handshake(vhost="nowhere")
        self.assertClosed(peer.expect(0, "connection.close"), "connection", 402)

    def test_channel_number_above_channel_max_is_a_channel_error(self) -> None:
        self.peer.send(4000, self.peer.spec.ChannelOpen())
        self.assertClosed(self.peer.expect(0, "connection.close"), "connection", 504)

    def test_connection_open_twice_is_command_invalid(self) -> None:
        self.peer.send(0, self.peer.spec.ConnectionOpen(virtual_host="/"))
        answer = self.assertClosed(self.peer.expect(0, "connection.close"), "connection", 503)
        self.assertEqual(answer.reply_text, "connection.open arrived out of order during negotiation")

    def test_reply_texts_carry_advice_not_code_names(self) -> None:
        answer = self.assertClosed(
            self.ask(self.peer.spec.BasicAck(delivery_tag=7)), "channel", 406
        )
        self.assertEqual(
            answer.reply_text,
            "unknown delivery tag 7; it was not delivered on this channel or is already "
            "acknowledged, rejected or recovered",
        )


class Specified08DialectTests(SpecifiedDialectTests):
    """0-8 connections follow the same rules, but two."""

    version = AMQP0_8

    def test_dialect(self) -> None:
        self.assertIs(dialect_for(self.version), SPECIFIED_0_8)

    def test_exclusive_queue_of_another_connection_is_a_channel_error(self) -> None:
        """0-8's rule amq_queue_04: a channel exception; 405, resource locked."""
        self.declare_queue("q", exclusive=True)
        for exclusive in (True, False):
            other = self.connect()
            answer = self.assertClosed(self.declare_queue("q", peer=other, exclusive=exclusive), "channel", 405)
            self.assertTrue(answer.reply_text.startswith("cannot obtain exclusive access to locked queue 'q'"))
            other.open(2)

    def test_bind_to_the_default_exchange_routes_by_its_key(self) -> None:
        """0-8's rule amq_exchange_22: the default exchange is internal and
        takes no explicit bindings; binding to an internal exchange is 530."""
        self.declare_queue("q")
        answer = self.ask(self.peer.spec.QueueBind(queue="q", exchange="", routing_key="k"))
        self.assertClosed(answer, "connection", 530)
        self.assertEqual(
            answer.reply_text,
            "cannot bind queue 'q' to the default exchange; the default exchange is internal: every queue "
            "is bound to it by its name, and it takes no other bindings",
        )


class RabbitMQDialectTests(_Cases):
    """0-9-1 connections follow RabbitMQ 3.10."""

    version = AMQP0_9_1

    def test_dialect(self) -> None:
        self.assertIs(dialect_for(self.version), RABBITMQ)

    def test_reply_texts_start_with_the_code_name(self) -> None:
        answer = self.assertClosed(self.ask(self.peer.spec.BasicAck(delivery_tag=7)), "channel", 406)
        self.assertEqual(answer.reply_text, "PRECONDITION_FAILED - unknown delivery tag 7")

    def test_delete_missing_queue_succeeds(self) -> None:
        answer = self.ask(self.peer.spec.QueueDelete(queue="nowhere"))
        self.assertEqual((answer.NAME, answer.message_count), ("queue.delete-ok", 0))

    def test_exclusive_mismatch_is_resource_locked(self) -> None:
        self.declare_queue("q", exclusive=True)
        answer = self.assertClosed(self.declare_queue("q"), "channel", 405)
        self.assertTrue(answer.reply_text.startswith("RESOURCE_LOCKED - cannot obtain exclusive"))

    def test_qos_without_global_limits_each_consumer(self) -> None:
        self.assertEqual(self.deliveries_with_channel_qos_one(), [b"a", b"b"])

    def test_user_id_of_another_user_is_refused(self) -> None:
        answer = self.assertClosed(self.publish_as("someone"), "channel", 406)
        self.assertEqual(
            answer.reply_text,
            "PRECONDITION_FAILED - user_id property set to 'someone' but authenticated user was 'guest'",
        )

    def test_own_user_id_is_accepted(self) -> None:
        self.assertEqual(self.publish_as("guest").NAME, "basic.get-ok")

    def test_impersonator_may_set_any_user_id(self) -> None:
        self.assertIsNone(RABBITMQ.publisher_user_id("relay", ("impersonator",)))
        self.assertEqual(RABBITMQ.publisher_user_id("relay", ("administrator",)), "relay")

    def test_exchange_unbind_of_missing_exchanges_succeeds(self) -> None:
        spec = self.peer.spec
        for source, destination in (("nowhere", "amq.direct"), ("amq.direct", "nowhere")):
            answer = self.ask(spec.ExchangeUnbind(destination=destination, source=source, routing_key="k"))
            self.assertEqual(answer.NAME, "exchange.unbind-ok")
        answer = self.ask(spec.ExchangeUnbind(destination="nowhere", source="", routing_key="k"))
        self.assertClosed(answer, "channel", 403)

    def test_exclusive_consumer_refused_on_single_active_consumer_queue(self) -> None:
        self.declare_queue("q", arguments={"x-single-active-consumer": True})
        answer = self.assertClosed(
            self.ask(self.peer.spec.BasicConsume(queue="q", exclusive=True)), "channel", 403
        )
        self.assertEqual(answer.reply_text, "ACCESS_REFUSED - queue 'q' in vhost '/' in exclusive use")

    def test_quorum_queue_refuses_global_qos(self) -> None:
        spec = self.peer.spec
        self.declare_queue("q", durable=True, arguments={"x-queue-type": "quorum"})
        self.ask(spec.BasicQos(prefetch_count=5, global_=False))
        self.assertEqual(self.ask(spec.BasicConsume(queue="q", consumer_tag="a")).NAME, "basic.consume-ok")
        self.ask(spec.BasicQos(prefetch_count=5, global_=True))
        answer = self.assertClosed(self.ask(spec.BasicConsume(queue="q", consumer_tag="b")), "connection", 540)
        self.assertEqual(
            answer.reply_text, "NOT_IMPLEMENTED - queue 'q' in vhost '/' does not support global qos"
        )

    def test_capabilities_announced(self) -> None:
        capabilities = self.server_properties()["capabilities"]
        self.assertIs(capabilities["publisher_confirms"], True)
        self.assertIs(capabilities["per_consumer_qos"], True)
        self.assertIs(capabilities["consumer_priorities"], True)

    def test_unbind_from_missing_exchange_succeeds(self) -> None:
        self.declare_queue("q")
        answer = self.ask(self.peer.spec.QueueUnbind(queue="q", exchange="nowhere", routing_key="k"))
        self.assertEqual(answer.NAME, "queue.unbind-ok")

    def test_delete_missing_exchange_succeeds(self) -> None:
        self.assertEqual(self.ask(self.peer.spec.ExchangeDelete(exchange="nowhere")).NAME, "exchange.delete-ok")

    def test_exclusive_queue_of_another_connection_is_resource_locked(self) -> None:
        self.declare_queue("q", exclusive=True)
        answer = self.assertClosed(self.declare_queue("q", peer=self.connect(), exclusive=True), "channel", 405)
        self.assertTrue(answer.reply_text.startswith("RESOURCE_LOCKED - cannot obtain exclusive"))

    def test_bind_takes_transient_and_internal_exchanges(self) -> None:
        self.declare_exchange("transient", "direct")
        self.declare_exchange("internal", "direct", internal=True, durable=True)
        self.declare_queue("q", durable=True)
        for exchange in ("transient", "internal"):
            answer = self.ask(self.peer.spec.QueueBind(queue="q", exchange=exchange, routing_key="k"))
            self.assertEqual(answer.NAME, "queue.bind-ok", exchange)

    def test_recover_on_transactional_channel_is_allowed(self) -> None:
        self.ask(self.peer.spec.TxSelect())
        self.assertEqual(self.ask(self.peer.spec.BasicRecover(requeue=True)).NAME, "basic.recover-ok")

    def test_passive_declare_of_the_default_exchange_is_refused(self) -> None:
        answer = self.declare_exchange("", "direct", passive=True)
        self.assertClosed(answer, "channel", 403)
        self.assertEqual(answer.reply_text, "ACCESS_REFUSED - operation not permitted on the default exchange")

    def test_rollback_keeps_acknowledged_deliveries_unacknowledged(self) -> None:
        spec = self.peer.spec
        self.ack_in_transaction()
        self.assertEqual(self.peer.names(), [])
        self.assertEqual(self.ask(spec.TxRollback()).NAME, "tx.rollback-ok")
        self.assertEqual(self.peer.deliveries(), [])
        self.assertEqual(len(self.peer.server.channels[1].session.unacked), 1)

    def test_channel_max_limits_open_channels_not_numbers(self) -> None:
        peer = self.handshake(channel_max=2)
        peer.expect(0, "connection.open-ok")
        peer.open(65535)
        peer.open(7)
        peer.send(1, peer.spec.ChannelClose(reply_code=200, reply_text="", class_id=0, method_id=0))
        peer.send(65535, peer.spec.ChannelClose(reply_code=200, reply_text="", class_id=0, method_id=0))
        self.assertEqual(peer.names(), ["channel.close-ok", "channel.close-ok"])
        peer.open(3)
        peer.send(9, peer.spec.ChannelOpen())
        answer = self.assertClosed(peer.expect(0, "connection.close"), "connection", 530)
        self.assertEqual(
            answer.reply_text,
            "NOT_ALLOWED - number of channels opened (2) has reached the negotiated channel_max (2)",
        )

    def test_connection_open_twice_is_a_channel_error(self) -> None:
        self.peer.send(0, self.peer.spec.ConnectionOpen(virtual_host="/"))
        answer = self.assertClosed(self.peer.expect(0, "connection.close"), "connection", 504)
        self.assertEqual(answer.reply_text, "CHANNEL_ERROR - unexpected method in connection state running")

    def test_update_secret_with_another_secret_keeps_the_connection(self) -> None:
        """The user database's passwords do not expire: any new secret is
        accepted, as RabbitMQ's internal users accept it."""
        self.peer.send(0, self.peer.spec.ConnectionUpdateSecret(new_secret=b"new_secret", reason="rotation"))
        self.peer.expect(0, "connection.update-secret-ok")
        self.assertEqual(self.declare_queue("q").NAME, "queue.declare-ok")

    def test_update_secret_checked_by_an_expiring_checker(self) -> None:
        self.factory.security.portal.registerChecker(_TokenChecker(b"token-2"))
        self.peer.send(0, self.peer.spec.ConnectionUpdateSecret(new_secret=b"token-2", reason="refresh"))
        self.peer.expect(0, "connection.update-secret-ok")
        self.peer.send(0, self.peer.spec.ConnectionUpdateSecret(new_secret=b"token-1", reason="refresh"))
        answer = self.assertClosed(self.peer.expect(0, "connection.close"), "connection", 530)
        self.assertEqual(answer.reply_text, "NOT_ALLOWED - New secret was refused by one of the backends")

    def test_unknown_vhost_is_not_allowed(self) -> None:
        peer = self.handshake(vhost="nowhere")
        answer = self.assertClosed(peer.expect(0, "connection.close"), "connection", 530)
        self.assertEqual(answer.reply_text, "NOT_ALLOWED - vhost nowhere not found")


@implementer(ICredentialsChecker)
class _TokenChecker:
    """A checker of short-lived tokens: its credentials expire, so a new
    secret is checked (any user, one valid token)."""

    credentialInterfaces = (IUsernamePassword,)
    credentials_expire = True

    def __init__(self, token: bytes) -> None:
        self.token = token

    def requestAvatarId(self, credentials: Any) -> Deferred[bytes]:
        if not credentials.checkPassword(self.token):
            return fail(UnauthorizedLogin("expired or unknown token"))
        return succeed(credentials.username.encode("utf-8"))


def _subclasses(root: type[errors.AMQPError]) -> list[type[errors.AMQPError]]:
    """*root*'s subclasses, recursively."""
    found: list[type[errors.AMQPError]] = []
    for cls in root.__subclasses__():
        found += [cls, *_subclasses(cls)]
    return found


#: 403s that close the connection: they answer connection.start-ok,
#: connection.open or access.request, where the XML asks for a connection
#: exception (there is no channel to close, or the rule says so).
_CONNECTION_403 = {HardAccessRefused, LoginRefused, MalformedResponse}

#: Every error the broker raises (the broker's modules are imported, so
#: every class is defined): each subclass of AMQPError with a code.
_ALL_ERRORS = [
    cls for cls in dict.fromkeys(_subclasses(errors.AMQPError))
    if cls not in (errors.ChannelLevelError, errors.ConnectionLevelError)
    and cls.__module__.startswith("txamqp09.")
    and not cls.__module__.startswith("txamqp09.client")
]
_ERRORS = [cls for cls in _ALL_ERRORS if cls not in _CONNECTION_403]


class ScopeTests(TestCase):
    """Every reply code closes what its version's XML says: soft errors the
    channel, hard errors the connection."""

    def test_every_error_class_is_covered(self) -> None:
        self.assertEqual(len({cls.reply_code for cls in _ERRORS}), len(_ERRORS))
        self.assertGreaterEqual(len(_ERRORS), 18)
        self.assertEqual(set(_ALL_ERRORS) - set(_ERRORS), _CONNECTION_403)

    def test_connection_403s_close_the_connection(self) -> None:
        for cls in _CONNECTION_403:
            self.assertEqual((cls.reply_code, cls.hard), (403, True), cls)

    def test_every_error_closes_the_scope_of_the_xml(self) -> None:
        checked = 0
        for version in VERSIONS.values():
            reply_codes = version.spec.REPLY_CODES
            for cls in _ERRORS:
                # A code this version's XML lacks (0-8: 312, 313, 406, 505;
                # 0-9: 505; 0-9-1: 312) takes its scope from the other XMLs.
                expected = (
                    reply_codes.get(cls.reply_code)
                    or AMQP0_9.spec.REPLY_CODES.get(cls.reply_code)
                    or AMQP0_9_1.spec.REPLY_CODES[cls.reply_code]
                )
                peer = ScriptedClient(server_factory(), version)
                channel = peer.server.channels[1]

                def fail(method: Any, command: Any = None, error: type = cls) -> None:
                    raise error("probe")

                channel.methodReceived = fail  # type: ignore[method-assign]
                peer.send(1, version.spec.BasicQos(prefetch_size=0, prefetch_count=1, global_=False))
                [(number, answer)] = peer.methods()
                scope = "connection" if expected.hard else "channel"
                self.assertEqual(
                    (number, answer.NAME, answer.reply_code),
                    (0 if expected.hard else 1, f"{scope}.close", cls.reply_code),
                    f"{cls.__name__} on {version.name}",
                )
                checked += 1
        self.assertEqual(checked, len(_ERRORS) * len(VERSIONS))
