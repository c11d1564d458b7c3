"""Direct reply-to in the model: reply names, delivery of replies, and what
happens when the requester's channel goes."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from tests.broker.support import RecordingSink, message
from txamqp09.broker.model import Broker, Client, Message, Session
from txamqp09.broker.model.replies import DIRECT_REPLY_TO, ReplyConsumer
from txamqp09.broker.model.session import NO_ROUTE
from txamqp09.wire.errors import NotAllowed, NotFound, PreconditionFailed


class Requester:
    """A session consuming its replies, and what it was sent."""

    def __init__(self, broker: Broker, vhost: str = "/") -> None:
        self.sink = RecordingSink()
        self.session = Session(broker.vhosts[vhost], Client("requester"), self.sink)
        self.replies: list[tuple[str, int, bool, bytes]] = []
        self.consumer = self.session.consume_replies("mine", True, self.send)

    def send(self, consumer: ReplyConsumer, delivery_tag: int, redelivered: bool, reply: Message) -> None:
        self.replies.append((consumer.tag, delivery_tag, redelivered, reply.body or b""))


class RepliesTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.broker = Broker(vhosts=("/", "other"))
        self.requester = Requester(self.broker)
        self.server_sink = RecordingSink()
        self.server = Session(self.broker.vhosts["/"], Client("server"), self.server_sink)

    def reply(self, body: bytes, session: Any = None, mandatory: bool = False) -> None:
        """Publish *body* to the default exchange with the requester's reply name."""
        (session or self.server).publish("", message(body, self.requester.consumer.name), mandatory, False)

    def test_the_reply_name(self) -> None:
        name = self.requester.session.reply_name()
        self.assertTrue(name.startswith(DIRECT_REPLY_TO + "."))
        self.assertEqual(len(name), len(DIRECT_REPLY_TO) + 1 + 22)
        self.assertNotEqual(name, Requester(self.broker).session.reply_name(), "each channel has its own")

    def test_a_reply_takes_the_next_tag_without_using_it_up(self) -> None:
        self.reply(b"one")
        self.reply(b"two")
        self.assertEqual(self.requester.replies, [("mine", 1, False, b"one"), ("mine", 1, False, b"two")])
        self.assertEqual(self.requester.session.last_tag, 0)

    def test_a_mandatory_reply_is_returned_too(self) -> None:
        """It routes to no queue, as in RabbitMQ 3.10."""
        self.reply(b"one", mandatory=True)
        self.assertEqual(len(self.requester.replies), 1)
        self.assertEqual(self.server_sink.returns, [(*NO_ROUTE, b"one")])

    def test_a_reply_from_another_virtual_host_arrives(self) -> None:
        self.reply(b"one", Session(self.broker.vhosts["other"], Client("elsewhere"), RecordingSink()))
        self.assertEqual([body for *_, body in self.requester.replies], [b"one"])

    def test_the_requester_gone_drops_replies_and_its_name(self) -> None:
        name = self.requester.consumer.name
        self.requester.session.close()
        self.reply(b"late")
        self.assertEqual(self.requester.replies, [])
        self.assertRaises(NotFound, self.broker.vhosts["/"].reply_queue, name)

    def test_cancel_gives_the_name_up(self) -> None:
        name = self.requester.consumer.name
        self.assertEqual(self.broker.vhosts["/"].reply_queue(name + "\r\n"), name)
        self.assertIsNone(self.requester.session.cancel("mine"))
        self.reply(b"late")
        self.assertEqual(self.requester.replies, [])
        self.assertRaises(NotFound, self.broker.vhosts["/"].reply_queue, name)
        error = self.assertRaises(PreconditionFailed, self.requester.session.reply_name)
        self.assertEqual(error.reply_text, "fast reply consumer does not exist")

    def test_refusals(self) -> None:
        session = self.requester.session
        error = self.assertRaises(PreconditionFailed, session.consume_replies, "again", True, self.requester.send)
        self.assertEqual(error.reply_text, "reply consumer already set")
        error = self.assertRaises(PreconditionFailed, session.consume_replies, "again", False, self.requester.send)
        self.assertEqual(error.reply_text, "reply consumer cannot acknowledge")
        queue = self.broker.vhosts["/"].declare_queue("q", session.client)
        error = self.assertRaises(NotAllowed, session.consume, queue, "mine")
        self.assertEqual(error.reply_text, "attempt to reuse consumer tag 'mine'")
