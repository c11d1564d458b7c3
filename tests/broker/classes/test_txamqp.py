"""txAMQP, which builds every method of its spec file, using the stream and file classes."""

from __future__ import annotations

from typing import Any

from twisted.internet import defer
from txamqp.client import Closed, TwistedDelegate
from txamqp.content import Content

from tests.broker.support import LoopbackTestCase
from tests.broker.test_txamqp import TxAMQPConnecting


class _ClassesDelegate(TwistedDelegate):
    """txAMQP's delegate, with stream deliveries queued by consumer tag like basic ones."""

    stream_deliver = TwistedDelegate.basic_deliver


class TxAMQPClassesMixin(TxAMQPConnecting):
    delegate = _ClassesDelegate

    @defer.inlineCallbacks
    def test_stream_publish_and_consume(self) -> Any:
        client, channel = yield self.connect()
        yield channel.queue_declare(queue="stream")
        tag = (yield channel.stream_consume(queue="stream")).consumer_tag
        deliveries = yield client.queue(tag)
        channel.stream_publish(routing_key="stream", content=Content("frame", properties={"priority": 7}))
        message = yield deliveries.get(timeout=5)
        self.assertEqual(message.content.body, "frame")
        self.assertEqual(message.content.properties["priority"], 7)
        self.assertEqual(message.method.name, "deliver")
        self.assertEqual(message.queue, "stream")

    @defer.inlineCallbacks
    def test_file_staged_by_txamqp_is_delivered(self) -> Any:
        client, channel = yield self.connect()
        yield channel.queue_declare(queue="files")
        opened = yield channel.file_open(identifier="doc-1", content_size=11)
        self.assertEqual(opened.staged_size, 0)
        channel.file_stage(content=Content("hello files"))
        channel.file_publish(routing_key="files", identifier="doc-1")
        got = yield channel.basic_get(queue="files", no_ack=True)
        self.assertEqual(got.content.body, "hello files")
        self.assertEqual(got.content.properties["delivery mode" if self.version == "0-8" else "delivery-mode"], 2)

    def tunnel_properties(self, **properties: Any) -> dict[str, Any]:
        """Tunnel content properties under this version's names (0-8 spells them with spaces)."""
        separator = " " if self.version == "0-8" else "-"
        return {name.replace("_", separator): value for name, value in properties.items()}

    def tunnel_request(self, channel: Any, body: str, meta_data: dict[str, Any], **properties: Any) -> None:
        """tunnel.request as txAMQP sends it."""
        channel.tunnel_request(
            meta_data=meta_data, content=Content(body, properties=self.tunnel_properties(**properties))
        )

    @defer.inlineCallbacks
    def test_tunnel_request_to_an_existing_proxy(self) -> Any:
        """The block reaches the queues the proxy exchange routes data-name to, with
        the headers, the meta-data and durable as delivery mode; broadcast drops an
        unroutable block where a plain request comes back as basic.return 312."""
        client, channel = yield self.connect()
        yield channel.exchange_declare(exchange="proxy", type="direct")
        yield channel.queue_declare(queue="tunnelled")
        yield channel.queue_bind(queue="tunnelled", exchange="proxy", routing_key="block-1")
        self.tunnel_request(
            channel, "block", {"origin": "peer-7"},
            headers={"h": 1}, proxy_name="proxy", data_name="block-1", durable=1, broadcast=0,
        )
        self.tunnel_request(channel, "dropped", {}, proxy_name="proxy", data_name="nowhere", broadcast=1)
        self.tunnel_request(channel, "returned", {}, proxy_name="proxy", data_name="nowhere", broadcast=0)
        returned = yield client.basic_return_queue.get(timeout=5)
        self.assertEqual(
            (returned.reply_code, returned.exchange, returned.routing_key, returned.content.body),
            (312, "proxy", "nowhere", "returned"),
        )
        got = yield channel.basic_get(queue="tunnelled", no_ack=True)
        self.assertEqual((got.exchange, got.routing_key, got.content.body), ("proxy", "block-1", "block"))
        properties = got.content.properties
        self.assertEqual(properties["headers"], {"h": 1, "x-tunnel-meta-data": {"origin": "peer-7"}})
        self.assertEqual(properties["delivery mode" if self.version == "0-8" else "delivery-mode"], 2)
        declared = yield channel.queue_declare(queue="tunnelled", passive=True)
        self.assertEqual(declared.message_count, 0)

    @defer.inlineCallbacks
    def test_tunnel_request_to_a_missing_proxy(self) -> Any:
        """A proxy-name no exchange has closes the channel with 404, naming tunnel.request."""
        _client, channel = yield self.connect()
        self.tunnel_request(channel, "block", {}, proxy_name="no-such-proxy", data_name="d")
        with self.assertRaises(Closed) as caught:
            yield channel.queue_declare(queue="after", passive=True)
        close = caught.exception.args[0]
        self.assertEqual(
            (close.fields[0], close.fields[2], close.fields[3]), (404, 110, 10), close.fields
        )
        self.assertIn("no exchange 'no-such-proxy' in vhost '/'", close.fields[1])


class AMQP08ClassesTests(TxAMQPClassesMixin, LoopbackTestCase):
    spec_file = "amqp0-8.xml"
    version = "0-8"


class AMQP09ClassesTests(TxAMQPClassesMixin, LoopbackTestCase):
    spec_file = "amqp0-9.xml"
    version = "0-9"
