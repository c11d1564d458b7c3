"""txAMQP, which builds every method of its spec file, using the stream and file classes."""

from __future__ import annotations

from typing import Any

from twisted.internet import defer
from txamqp.client import TwistedDelegate
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


class AMQP08ClassesTests(TxAMQPClassesMixin, LoopbackTestCase):
    spec_file = "amqp0-8.xml"
    version = "0-8"


class AMQP09ClassesTests(TxAMQPClassesMixin, LoopbackTestCase):
    spec_file = "amqp0-9.xml"
    version = "0-9"
