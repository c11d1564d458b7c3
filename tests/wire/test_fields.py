"""Helpers of the field codecs that the tables' typed values do not cover."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from txamqp09.wire.fields import RABBITMQ, field_text


class FieldTextTests(SynchronousTestCase):
    def test_long_strings_of_a_table_read_as_text(self) -> None:
        table, _ = RABBITMQ.decode_table(RABBITMQ.encode_table({"q": "caf\u00e9"}), 0)
        self.assertEqual(table["q"], "caf\u00e9".encode())
        self.assertEqual(field_text(table["q"]), "caf\u00e9")

    def test_undecodable_bytes_become_replacement_characters(self) -> None:
        self.assertEqual(field_text(b"a\xffb"), "a\ufffdb")

    def test_other_values_are_left_alone(self) -> None:
        for value in ("text", 7, None, [b"x"], {"k": b"v"}):
            self.assertIs(field_text(value), value)
