"""The wire forms of forwarded messages: envelopes and headers set in encoded properties."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from txamqp09.wire import _amqp0_8, _amqp0_9
from txamqp09.wire import _amqp0_9_1 as spec
from txamqp09.wire.errors import EncodeError
from txamqp09.wire.fields import encode_shortstr
from txamqp09.wire.forwarding import LongHeader, envelope


class EnvelopeTests(SynchronousTestCase):
    def test_two_shortstrs(self) -> None:
        self.assertEqual(envelope("amq.direct", "k\u00e9"), b"\x0aamq.direct\x03k\xc3\xa9")
        self.assertEqual(envelope("", ""), b"\x00\x00")

    def test_what_basic_deliver_ends_with(self) -> None:
        fields = spec.BasicDeliver(consumer_tag="c", delivery_tag=1, exchange="x", routing_key="r").encode()
        self.assertTrue(fields.endswith(envelope("x", "r")))

    def test_one_object_for_one_pair(self) -> None:
        self.assertIs(envelope("x", "r" * 3), envelope("x", "rrr"))

    def test_names_too_long_are_refused(self) -> None:
        self.assertRaises(EncodeError, envelope, "x" * 256, "")


class LongHeaderTests(SynchronousTestCase):
    """A header set in the publisher's encoded properties."""

    header = LongHeader("x-stream-offset")

    def stamped(self, properties: Any, offset: int) -> Any:
        return spec.BasicProperties.decode(self.header.stamp(properties.encode(), offset), 0)

    def test_added_to_properties_without_headers(self) -> None:
        result = self.stamped(
            spec.BasicProperties(content_type="text/plain", content_encoding="gzip", priority=3), 7
        )
        self.assertEqual(result.headers, {"x-stream-offset": 7})
        self.assertEqual((result.content_type, result.content_encoding, result.priority), ("text/plain", "gzip", 3))

    def test_appended_to_existing_headers(self) -> None:
        result = self.stamped(spec.BasicProperties(headers={"a": b"x"}, message_id="m"), 2**40)
        self.assertEqual(result.headers, {"a": b"x", "x-stream-offset": 2**40})
        self.assertEqual(result.message_id, "m")

    def test_a_published_x_stream_offset_is_replaced(self) -> None:
        result = self.stamped(spec.BasicProperties(headers={"x-stream-offset": 99, "b": 1}), 3)
        self.assertEqual(result.headers, {"b": 1, "x-stream-offset": 3})

    def test_one_split_stamps_any_value(self) -> None:
        properties = spec.BasicProperties(headers={"x-stream-offset": 99, "b": 1}, message_id="m").encode()
        head, tail = self.header.split(properties)
        for value in (0, 3, -1, 2**62):
            stamped = head + value.to_bytes(8, "big", signed=True) + tail
            self.assertEqual(stamped, self.header.stamp(properties, value))
            result = spec.BasicProperties.decode(stamped, 0)
            self.assertEqual((result.headers, result.message_id), ({"b": 1, "x-stream-offset": value}, "m"))

    def test_encoded_as_a_long(self) -> None:
        raw = self.header.stamp(spec.BasicProperties().encode(), 1)
        self.assertIn(encode_shortstr("x-stream-offset") + b"l" + (1).to_bytes(8, "big"), raw)

    def test_every_version_lays_out_the_first_properties_alike(self) -> None:
        for module in (_amqp0_8, _amqp0_9, spec):
            properties = module.BasicProperties(content_type="a", content_encoding="b", headers={"h": 1})
            stamped = module.BasicProperties.decode(self.header.stamp(properties.encode(), 5), 0)
            self.assertEqual(stamped.headers, {"h": 1, "x-stream-offset": 5})
            self.assertEqual((stamped.content_type, stamped.content_encoding), ("a", "b"))
