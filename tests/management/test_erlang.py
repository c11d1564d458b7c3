"""Erlang's phash2 and binding properties keys, against values a RabbitMQ 3.10.8 node gave."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from txamqp09.management.erlang import Atom, amqp_table_term, phash2
from txamqp09.management.views import properties_key
from txamqp09.wire.fields import Int16, UInt8


class Phash2Tests(SynchronousTestCase):
    def test_terms(self) -> None:
        # erlang:phash2(T, 1 bsl 32) on Erlang/OTP 25
        self.assertEqual(phash2(Atom("a")), 97)
        self.assertEqual(phash2([]), 3468870702)
        self.assertEqual(phash2(1), 539485162)
        self.assertEqual(phash2(b"abc"), 1306188027)

    def test_booleans_and_strings_are_not_terms(self) -> None:
        self.assertRaises(TypeError, phash2, True)
        self.assertRaises(TypeError, phash2, "text")  # type: ignore[arg-type]

    def test_tables_become_sorted_typed_entries(self) -> None:
        self.assertEqual(amqp_table_term({"b": "s", "a": 1, "c": [UInt8(1), Int16(2)], "t": True, "n": None}), [
            (b"a", "signedint", 1), (b"b", "longstr", b"s"), (b"c", "array", [("unsignedbyte", 1), ("short", 2)]),
            (b"n", "void", "undefined"), (b"t", "bool", "true")])


class PropertiesKeyTests(SynchronousTestCase):
    """Keys RabbitMQ 3.10.8 showed for the same bindings (declared with pika)."""

    def test_keys_equal_rabbitmqs(self) -> None:
        for arguments, routing_key, key in [
            ({}, "", "~"),
            ({}, "a.~b c/d", "a.%7Eb+c%2Fd"),
            ({"a": 1}, "", "~rnJaMg"),
            ({"n": {"k": [1, "v"]}}, "rk", "rk~NgVGKw"),
            ({"a": 1, "b": "s", "x-match": "any"}, "rk", "rk~Y7AOyA"),
            ({"x-match": "all", "a": 1}, "rk", "rk~o9cLCw"),
            ({"l": 5000000000, "t": True}, "rk", "rk~qesuMg"),
            ({"b": "s"}, "rk", "rk~rGx1rg"),
        ]:
            self.assertEqual(properties_key(routing_key, arguments), key, arguments)
