"""Message: what one queued message costs, and what it reads from its origin."""

from __future__ import annotations

import struct
import weakref

from twisted.trial.unittest import SynchronousTestCase

from tests.broker.support import message
from txamqp09.broker.model import Client, origin
from txamqp09.broker.model.message import PAGED_OUT, UNTRACKED, Message, Tracking
from txamqp09.wire import _amqp0_9_1 as spec
from txamqp09.wire.fields import encode_shortstr


class MessageTests(SynchronousTestCase):
    def test_a_message_is_six_slots(self) -> None:
        """The object's header and six pointers, no dictionary, no weak
        reference list (a backlog of millions of messages pays this per
        message: 80 bytes with the collector's header on CPython 3.11)."""
        published = message(b"x" * 16)
        self.assertEqual(type(published).__basicsize__, object.__basicsize__ + 6 * struct.calcsize("P"))
        self.assertFalse(hasattr(published, "__dict__"))
        self.assertRaises(TypeError, weakref.ref, published)

    def test_names_come_from_the_origin(self) -> None:
        publisher = Client("c")
        published = Message(origin("amq.topic", "a.b", publisher), b"\x00\x00", b"body", spec.BasicProperties)
        self.assertEqual(
            (published.exchange, published.routing_key, published.envelope, published.publisher),
            ("amq.topic", "a.b", encode_shortstr("amq.topic") + encode_shortstr("a.b"), publisher),
        )
        self.assertEqual(published.size, 4)

    def test_messages_without_a_publisher_share_their_origin(self) -> None:
        self.assertIs(origin("x", "k"), origin("x", "k"))
        self.assertIsNot(origin("x", "k"), origin("x", "other"))
        publisher = Client("c")
        self.assertEqual(origin("x", "k", publisher)[3], publisher)

    def test_a_copy_has_its_own_names_and_the_same_body(self) -> None:
        published = message(b"body", "k", "x", publisher=Client("c"))
        copied = published.copy("dlx", "dead", b"\x00\x00")
        self.assertEqual((copied.exchange, copied.routing_key, copied.publisher), ("dlx", "dead", None))
        self.assertIs(copied.body, published.body)

    def test_paging_without_and_with_a_tracking_record(self) -> None:
        published = message(b"body")
        self.assertEqual((published.tracking, published.paging), (None, UNTRACKED))
        published.tracking = Tracking(7, PAGED_OUT, 1)
        self.assertEqual(published.paging, PAGED_OUT)
