"""The 0-8 and 0-9 rules as txAMQP, a client written for those
specifications (loading their XML), sees them: codes, and whether the
channel or the whole connection is closed."""

from __future__ import annotations

from typing import Any

from twisted.internet import defer
from txamqp.client import Closed
from txamqp.content import Content

from tests.broker.support import LoopbackTestCase
from tests.broker.test_txamqp import TxAMQPConnecting


class SpecifiedRulesMixin(TxAMQPConnecting):
    """Cases run on 0-8 and on 0-9."""

    @defer.inlineCallbacks
    def closed(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        """(scope, reply code) of the close that *call* causes."""
        with self.assertRaises(Closed) as caught:  # type: ignore[attr-defined]
            yield call(*args, **kwargs)
        close = caught.exception.args[0]
        return close.method.klass.name, close.fields[0]

    @defer.inlineCallbacks
    def test_delete_missing_queue_is_not_found(self) -> Any:
        _client, channel = yield self.connect()
        closed = yield self.closed(channel.queue_delete, queue="nowhere")
        self.assertEqual(closed, ("channel", 404))  # type: ignore[attr-defined]

    @defer.inlineCallbacks
    def test_exchange_redeclared_with_another_type_closes_the_connection(self) -> Any:
        _client, channel = yield self.connect()
        yield channel.exchange_declare(exchange="typed", type="direct")
        closed = yield self.closed(channel.exchange_declare, exchange="typed", type="fanout")
        self.assertEqual(closed, ("connection", 530))  # type: ignore[attr-defined]

    @defer.inlineCallbacks
    def test_reserved_exchange_redeclared_ignores_durable(self) -> Any:
        _client, channel = yield self.connect()
        yield channel.exchange_declare(exchange="amq.direct", type="direct", durable=False)
        yield channel.exchange_declare(exchange="amq.topic", type="topic", durable=False, passive=False)

    @defer.inlineCallbacks
    def test_consume_without_a_queue_closes_the_connection(self) -> Any:
        _client, channel = yield self.connect()
        closed = yield self.closed(channel.basic_consume, queue="")
        self.assertEqual(closed, ("connection", 530))  # type: ignore[attr-defined]

    @defer.inlineCallbacks
    def test_rollback_redelivers_what_the_transaction_acknowledged(self) -> Any:
        client, channel = yield self.connect()
        yield channel.queue_declare(queue="work")
        tag = (yield channel.basic_consume(queue="work")).consumer_tag
        deliveries = yield client.queue(tag)
        channel.basic_publish(exchange="", routing_key="work", content=Content("job"))
        first = yield deliveries.get(timeout=5)
        yield channel.tx_select()
        channel.basic_ack(delivery_tag=first.delivery_tag)
        yield channel.tx_rollback()
        again = yield deliveries.get(timeout=5)
        self.assertEqual((again.content.body, again.redelivered), ("job", True))  # type: ignore[attr-defined]


    @defer.inlineCallbacks
    def exclusive_queue_declared_elsewhere(self) -> Any:
        """(scope, reply code) of declaring, on a second connection, a queue
        the first holds exclusively."""
        _client, channel = yield self.connect()
        yield channel.queue_declare(queue="mine", exclusive=True)
        _other, elsewhere = yield self.connect()
        closed = yield self.closed(elsewhere.queue_declare, queue="mine", exclusive=True)
        return closed


class AMQP08RulesTests(SpecifiedRulesMixin, LoopbackTestCase):
    spec_file = "amqp0-8.xml"
    version = "0-8"

    @defer.inlineCallbacks
    def test_exclusive_queue_of_another_connection_is_resource_locked(self) -> Any:
        """0-8's rule amq_queue_04 asks for a channel exception."""
        closed = yield self.exclusive_queue_declared_elsewhere()
        self.assertEqual(closed, ("channel", 405))

    @defer.inlineCallbacks
    def test_bind_to_the_default_exchange_is_not_allowed(self) -> Any:
        """0-8's default exchange is internal and takes no explicit bindings."""
        _client, channel = yield self.connect()
        yield channel.queue_declare(queue="bound")
        closed = yield self.closed(channel.queue_bind, queue="bound", exchange="", routing_key="key")
        self.assertEqual(closed, ("connection", 530))


class AMQP09RulesTests(SpecifiedRulesMixin, LoopbackTestCase):
    spec_file = "amqp0-9.xml"
    version = "0-9"

    @defer.inlineCallbacks
    def test_exclusive_queue_of_another_connection_is_a_channel_error(self) -> Any:
        """0-9's rule names channel-error, a connection exception."""
        closed = yield self.exclusive_queue_declared_elsewhere()
        self.assertEqual(closed, ("connection", 504))

    @defer.inlineCallbacks
    def test_bind_to_the_default_exchange_routes_by_its_key(self) -> Any:
        """0-9's default-exchange scenario: bind with no exchange name, publish with the key."""
        _client, channel = yield self.connect()
        yield channel.queue_declare(queue="bound")
        yield channel.queue_bind(queue="bound", exchange="", routing_key="key")
        channel.basic_publish(exchange="", routing_key="key", content=Content("one"))
        got = yield channel.basic_get(queue="bound", no_ack=True)
        self.assertEqual(got.content.body, "one")
