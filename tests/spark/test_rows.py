"""Column values, options and offset ranges of the data source, without Spark."""

from __future__ import annotations

import io
import traceback
from datetime import datetime, timezone

from twisted.trial.unittest import SkipTest, TestCase

from txamqp09.spark.options import OptionError, ReadOptions, WriteOptions
from txamqp09.spark.rows import checked_properties, header_text, message_body

from tests.spark.session import spark_missing


class ColumnValueTests(TestCase):
    def test_header_text(self) -> None:
        self.assertEqual(
            [header_text(value) for value in (None, "é", b"\xff", True, 1.5, datetime(2026, 1, 1, tzinfo=timezone.utc))],
            [None, "é", "\\xff", "True", "1.5", "2026-01-01T00:00:00+00:00"],
        )
        self.assertEqual(header_text({"b": [1, b"x"], "a": None}), '{"a": null, "b": [1, "x"]}')

    def test_message_body(self) -> None:
        self.assertEqual([message_body(value) for value in ("é", bytearray(b"x"), b"y")], [b"\xc3\xa9", b"x", b"y"])
        with self.assertRaisesRegex(ValueError, "body column is null"):
            message_body(None)
        with self.assertRaisesRegex(TypeError, "binary or string, not int"):
            message_body(3)

    def test_checked_properties(self) -> None:
        self.assertEqual(
            checked_properties({"delivery_mode": "1", "priority": "5", "type": "t", "app_id": None,
                                "timestamp": "2026-01-01T00:00:00+00:00"}),
            {"delivery_mode": 1, "priority": 5, "type": "t", "timestamp": datetime(2026, 1, 1, tzinfo=timezone.utc)},
        )
        with self.assertRaisesRegex(ValueError, "'colour' is not a basic property"):
            checked_properties({"colour": "red"})
        with self.assertRaisesRegex(ValueError, "invalid literal"):
            checked_properties({"priority": "high"})


class OptionTests(TestCase):
    def test_read_defaults(self) -> None:
        options = ReadOptions.parse({"url": "amqp://h/", "queue": "q"}, streaming=False)
        self.assertEqual(
            (options.stream, options.starting, options.ending, options.partitions, options.prefetch,
             options.max_per_trigger),
            (False, "first", "last", 2, 1000, None),
        )
        self.assertEqual(ReadOptions.parse({"url": "u", "queue": "q"}, streaming=True).starting, "next")

    def test_read_options(self) -> None:
        options = ReadOptions.parse(
            {"url": "u", "queue": "q", "queueType": "stream", "startingOffset": "7", "endingOffset": "9",
             "numPartitions": "4", "prefetch": "10", "maxMessagesPerTrigger": "3"},
            streaming=True,
        )
        self.assertEqual(
            (options.stream, options.starting, options.ending, options.partitions, options.prefetch,
             options.max_per_trigger),
            (True, 7, 9, 4, 10, 3),
        )

    def test_bad_read_options(self) -> None:
        cases = [
            ({"queue": "q"}, "needs the option 'url'"),
            ({"url": "u"}, "needs the option 'queue'"),
            ({"url": "u", "queue": "q", "queueType": "quorum"}, "classic or stream, not 'quorum'"),
            ({"url": "u", "queue": "q", "startingOffset": "last"}, "first, next or an offset"),
            ({"url": "u", "queue": "q", "startingOffset": "-1"}, "must not be negative"),
            ({"url": "u", "queue": "q", "numPartitions": "0"}, "at least 1, not 0"),
            ({"url": "u", "queue": "q", "prefetch": "many"}, "must be an integer, not 'many'"),
        ]
        for options, message in cases:
            with self.assertRaisesRegex(OptionError, message):
                ReadOptions.parse(options, streaming=False)

    def test_option_error_shows_its_message_first(self) -> None:
        """Formatted as Spark's worker formats it for the user (the cause
        cleared, the traceback shortened), an option error's first line is its
        message, before the traceback."""
        try:
            ReadOptions.parse({"url": "u", "queue": "q", "numPartitions": "x"}, streaming=False)
        except OptionError as error:
            error.__cause__ = None
            shown = "".join(traceback.TracebackException.from_exception(error, compact=True).format())
        lines = shown.splitlines()
        self.assertEqual(lines[0], "txamqp09.spark.options.OptionError: option 'numPartitions' must be an integer, not 'x'")
        self.assertIn("Traceback (most recent call last):", lines)
        self.assertEqual(lines[-1], lines[0])

    def test_option_error_first_in_pyspark_worker_report(self) -> None:
        """pyspark's own worker error report starts with the message."""
        if spark_missing():
            raise SkipTest(spark_missing())
        from pyspark.util import handle_worker_exception

        report = io.BytesIO()
        try:
            WriteOptions.parse({"url": "u", "deliveryMode": "3"})
        except OptionError as error:
            handle_worker_exception(error, report)
        text = report.getvalue()[8:].decode()
        self.assertTrue(text.startswith("txamqp09.spark.options.OptionError: option 'deliveryMode' must be 1 or 2, not 3\n"), text)

    def test_write_options(self) -> None:
        options = WriteOptions.parse({"url": "u", "exchange": "x", "routingKey": "k", "writeId": "w"})
        self.assertEqual(
            (options.exchange, options.routing_key, options.delivery_mode, options.write_id),
            ("x", "k", 2, "w"),
        )
        self.assertNotEqual(WriteOptions.parse({"url": "u"}).write_id, WriteOptions.parse({"url": "u"}).write_id)
        with self.assertRaisesRegex(OptionError, "1 or 2, not 3"):
            WriteOptions.parse({"url": "u", "deliveryMode": "3"})


class OffsetRangeTests(TestCase):
    skip = spark_missing()

    def test_contiguous_and_balanced(self) -> None:
        from txamqp09.spark.source import OffsetRange, offset_ranges

        self.assertEqual(
            offset_ranges(5, 15, 3), [OffsetRange(5, 9), OffsetRange(9, 12), OffsetRange(12, 15)]
        )
        self.assertEqual(offset_ranges(5, 7, 4), [OffsetRange(5, 6), OffsetRange(6, 7)])
        self.assertEqual(offset_ranges(5, 5, 2), [])
