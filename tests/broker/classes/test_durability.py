"""File and message-class messages in a transaction survive a killed broker once committed."""

from __future__ import annotations

from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks

from tests.broker.test_restart import BrokerProcessTestCase
from txamqp09.client import connect
from txamqp09.client.classes import DtxClass, FileClass, MessageClass


class CommittedClassMessagesTests(BrokerProcessTestCase):
    @inlineCallbacks
    def channel09(self, broker: Any) -> Any:
        connection = yield connect(reactor, broker.url, version="0-9")
        self.addCleanup(connection.dropConnection)
        channel = yield connection.channel()
        return channel

    @inlineCallbacks
    def test_commit_ok_means_stored(self) -> Any:
        data_dir = self.mktemp()
        broker = yield self.started(data_dir)
        channel = yield self.channel09(broker)
        yield channel.queue_declare("q", durable=True)
        dtx = DtxClass(channel)
        yield dtx.select()
        yield dtx.start("xid-durable")
        yield FileClass(channel).publish(
            b"file body", routing_key="q", identifier="f1", properties={"filename": "f.txt"}
        )
        yield MessageClass(channel).transfer(b"transfer body", routing_key="q", delivery_mode=2)
        yield channel.tx_commit()
        yield broker.kill()

        restarted = yield self.started(data_dir)
        channel = yield self.channel09(restarted)
        first = yield MessageClass(channel).get("q", no_ack=True)
        self.assertEqual(first.body, b"file body")
        self.assertEqual(first.headers, {"x-filename": b"f.txt"})
        second = yield channel.basic_get("q", no_ack=True)
        self.assertEqual((second.body, second.properties.delivery_mode), (b"transfer body", 2))
