"""Messages as Arrow record batches and record batches as messages
(:mod:`txamqp09.spark.arrow`), without Spark."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from twisted.trial.unittest import TestCase

from tests.spark.session import arrow_missing
from txamqp09.wire import _amqp0_9_1 as spec


class _Delivery:
    """What message_batch reads of a client Message."""

    def __init__(self, properties: spec.BasicProperties, body: bytes = b"payload", redelivered: bool = False) -> None:
        self.body = body
        self.method = spec.BasicDeliver(
            consumer_tag="c", delivery_tag=1, redelivered=redelivered, exchange="amq.direct", routing_key="events"
        )
        self.properties = properties


class MessageBatchTests(TestCase):
    skip = arrow_missing()

    def batch(self, deliveries: list[Any]) -> Any:
        from txamqp09.spark.arrow import ARROW_SCHEMA, message_batch

        batch = message_batch(deliveries)
        self.assertTrue(batch.schema.equals(ARROW_SCHEMA))
        return batch

    def test_schema(self) -> None:
        """Column names in SCHEMA's order, the Arrow types Spark gives them,
        every column (and every map value) nullable, map keys not."""
        import pyarrow as pa

        from txamqp09.spark.arrow import ARROW_SCHEMA
        from txamqp09.spark.rows import SCHEMA

        self.assertEqual(ARROW_SCHEMA.names, [column.split()[0] for column in SCHEMA.split(", ")])
        text = pa.map_(pa.string(), pa.string())
        self.assertEqual(
            ARROW_SCHEMA.types,
            [pa.binary(), pa.string(), pa.string(), text, text, pa.int64(), pa.timestamp("us", tz="UTC"), pa.bool_()],
        )
        self.assertTrue(all(field.nullable for field in ARROW_SCHEMA))
        self.assertFalse(text.key_field.nullable)
        self.assertTrue(text.item_field.nullable)

    def test_every_column(self) -> None:
        stamp = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)
        properties = spec.BasicProperties(
            content_type="application/json", delivery_mode=2, priority=7, message_id="m-1", timestamp=stamp,
            app_id="app", headers={"x-stream-offset": 42, "text": "é", "raw": b"\xff\x01", "nested": {"a": [1, b"b"]},
                                   "none": None},
        )
        rows = self.batch([_Delivery(properties, redelivered=True)]).to_pylist()
        self.assertEqual(
            rows,
            [{
                "body": b"payload", "routing_key": "events", "exchange": "amq.direct",
                "properties": [("content_type", "application/json"), ("delivery_mode", "2"), ("priority", "7"),
                               ("message_id", "m-1"), ("app_id", "app")],
                "headers": [("x-stream-offset", "42"), ("text", "é"), ("raw", "\\xff\x01"),
                            ("nested", '{"a": [1, "b"]}'), ("none", None)],
                "offset": 42, "timestamp": stamp, "redelivered": True,
            }],
        )

    def test_nulls(self) -> None:
        """A message without properties: empty maps, null offset and timestamp."""
        rows = self.batch([_Delivery(spec.BasicProperties(), body=b"")]).to_pylist()
        self.assertEqual(
            rows,
            [{"body": b"", "routing_key": "events", "exchange": "amq.direct", "properties": [], "headers": [],
              "offset": None, "timestamp": None, "redelivered": False}],
        )

    def test_empty(self) -> None:
        self.assertEqual(self.batch([]).num_rows, 0)

    def test_many_deliveries(self) -> None:
        """A row per delivery, in order, each with its own maps and offset."""
        deliveries = [
            _Delivery(spec.BasicProperties(headers={"x-stream-offset": offset} if offset % 3 else None,
                                           message_id=None if offset % 2 else f"id-{offset}"),
                      body=b"%d" % offset)
            for offset in range(3000)
        ]
        batch = self.batch(deliveries)
        self.assertEqual(batch.column("body").to_pylist(), [b"%d" % offset for offset in range(3000)])
        self.assertEqual(batch.column("offset").to_pylist(), [offset if offset % 3 else None for offset in range(3000)])
        self.assertEqual(
            batch.column("properties").to_pylist(),
            [[] if offset % 2 else [("message_id", f"id-{offset}")] for offset in range(3000)],
        )
        self.assertEqual(
            batch.column("headers").to_pylist(),
            [[("x-stream-offset", str(offset))] if offset % 3 else [] for offset in range(3000)],
        )


class BatchPublicationsTests(TestCase):
    skip = arrow_missing()

    def publications(self, columns: dict[str, Any], exchange: str = "ex", key: str = "default-key") -> list[Any]:
        import pyarrow as pa

        from txamqp09.spark.arrow import BatchPublications

        batch = pa.RecordBatch.from_pydict(columns)
        return list(BatchPublications(exchange, key, {"delivery_mode": 2}).of(batch))

    def test_rows_override_defaults(self) -> None:
        import pyarrow as pa

        text = pa.map_(pa.string(), pa.string())
        columns = {
            "body": pa.array(["text", "more"]),
            "routing_key": pa.array(["k", None]),
            "exchange": pa.array([None, "other"]),
            "properties": pa.array(
                [[("delivery_mode", "1"), ("priority", "5"), ("timestamp", "2026-01-01T00:00:00+00:00")], None],
                text,
            ),
            "headers": pa.array([[("h", "v")], []], text),
            "ignored": pa.array([1, 2]),
        }
        self.assertEqual(
            self.publications(columns),
            [
                (b"text", "ex", "k", {
                    "delivery_mode": 1, "priority": 5, "headers": {"h": "v"},
                    "timestamp": datetime(2026, 1, 1, tzinfo=timezone.utc),
                }),
                (b"more", "other", "default-key", {"delivery_mode": 2}),
            ],
        )

    def test_body_only(self) -> None:
        import pyarrow as pa

        self.assertEqual(
            self.publications({"body": pa.array([b"x", b""], pa.binary())}, exchange="", key="q"),
            [(b"x", "", "q", {"delivery_mode": 2}), (b"", "", "q", {"delivery_mode": 2})],
        )

    def test_numbered_message_ids_encoded_for_rows_without_properties(self) -> None:
        """With an id prefix and the channel's properties class, rows that
        set no properties get the encoding of the defaults and their
        message-id; rows that set some get a mapping with the message-id
        unless they set one; the numbers run on across batches."""
        import pyarrow as pa

        from txamqp09.spark.arrow import BatchPublications
        from txamqp09.wire import _amqp0_9_1 as spec

        text = pa.map_(pa.string(), pa.string())
        publications = BatchPublications("", "q", {"delivery_mode": 2}, "w-1", spec.BasicProperties)
        first = pa.RecordBatch.from_pydict({
            "body": pa.array([b"a", b"b", b"c"], pa.binary()),
            "properties": pa.array([None, [("priority", "3")], [("message_id", "mine")]], text),
            "headers": pa.array([None, None, None], text),
        })
        second = pa.RecordBatch.from_pydict({"body": pa.array([b"d"] * 12, pa.binary())})
        rows = list(publications.of(first)) + list(publications.of(second))
        self.assertEqual(rows[0][3], spec.BasicProperties(delivery_mode=2, message_id="w-1-0").encode())
        self.assertEqual(rows[1][3], {"delivery_mode": 2, "priority": 3, "message_id": "w-1-1"})
        self.assertEqual(rows[2][3], {"delivery_mode": 2, "message_id": "mine"})
        self.assertEqual(
            [spec.BasicProperties.decode(row[3], 0) for row in rows[3:]],
            [spec.BasicProperties(delivery_mode=2, message_id=f"w-1-{n}") for n in range(3, 15)],
        )
        self.assertEqual(publications.count, 15)

    def test_encoded_properties_keep_every_default(self) -> None:
        import pyarrow as pa

        from txamqp09.spark.arrow import BatchPublications
        from txamqp09.wire import _amqp0_9_1 as spec

        defaults = {"content_type": "text/plain", "delivery_mode": 1, "priority": 7, "app_id": "spark"}
        batch = pa.RecordBatch.from_pydict({"body": pa.array([b"x"], pa.binary())})
        [row] = BatchPublications("", "q", defaults, "p", spec.BasicProperties).of(batch)
        self.assertEqual(spec.BasicProperties.decode(row[3], 0), spec.BasicProperties(**defaults, message_id="p-0"))
        [row] = BatchPublications("", "q", defaults, None, spec.BasicProperties).of(batch)
        self.assertEqual(row[3], spec.BasicProperties(**defaults).encode())

    def test_a_default_message_id_is_not_numbered(self) -> None:
        """A message-id among the defaults is every row's that sets none,
        whether its row is encoded or a mapping (as without an encoder)."""
        import pyarrow as pa

        from txamqp09.spark.arrow import BatchPublications
        from txamqp09.wire import _amqp0_9_1 as spec

        text = pa.map_(pa.string(), pa.string())
        batch = pa.RecordBatch.from_pydict({
            "body": pa.array([b"a", b"b"], pa.binary()),
            "properties": pa.array([None, [("priority", "1")]], text),
        })
        plain = pa.RecordBatch.from_pydict({"body": pa.array([b"c"], pa.binary())})
        for encoder in (spec.BasicProperties, None):
            publications = BatchPublications("", "q", {"message_id": "fixed"}, "w", encoder)
            rows = [*publications.of(batch), *publications.of(plain)]
            self.assertEqual(
                [row[3]["message_id"] if isinstance(row[3], dict) else spec.BasicProperties.decode(row[3], 0).message_id
                 for row in rows],
                ["fixed"] * 3,
            )
        encoded = BatchPublications("", "q", {"message_id": "fixed"}, "w", spec.BasicProperties).encoded(plain)
        self.assertEqual(encoded, ([spec.BasicProperties(message_id="fixed").encode()], [b"c"]))

    def test_encoded_column_wise_as_row_by_row(self) -> None:
        """A batch whose rows set nothing but a body (binary or string;
        absent or all-null exchange and routing key, absent, null or empty
        properties and headers) is encoded column-wise: the same properties
        and bodies as row by row, the numbers running on across batches
        whichever way each was taken."""
        import pyarrow as pa

        from txamqp09.spark.arrow import BatchPublications
        from txamqp09.wire import _amqp0_9_1 as spec

        text = pa.map_(pa.string(), pa.string())
        batches = [
            pa.RecordBatch.from_pydict({"body": pa.array([b"a", b""], pa.binary())}),
            pa.RecordBatch.from_pydict({
                "body": pa.array(["text", "t\u00e9xt"]),
                "exchange": pa.array([None, None], pa.string()),
                "routing_key": pa.array([None, None], pa.string()),
                "properties": pa.array([None, []], text),
                "headers": pa.array([[], None], text),
            }),
            pa.RecordBatch.from_pydict({"body": pa.array([b"p"], pa.binary()), "properties": pa.array([[("priority", "1")]], text)}),
            pa.RecordBatch.from_pydict({"body": pa.array([b"x"] * 11, pa.binary())}),
            pa.RecordBatch.from_pydict({"body": pa.array([b"large", b""], pa.large_binary())}),
            pa.RecordBatch.from_pydict({"body": pa.array(["large text"], pa.large_string())}),
        ]
        by_rows = BatchPublications("", "q", {"delivery_mode": 2}, "w", spec.BasicProperties)
        columns = BatchPublications("", "q", {"delivery_mode": 2}, "w", spec.BasicProperties)
        for batch in batches:
            expected = list(by_rows.of(batch))
            encoded = columns.encoded(batch)
            if "properties" in batch.schema.names and batch.num_rows == 1:
                self.assertIsNone(encoded)
                self.assertEqual(list(columns.of(batch)), expected)
                continue
            assert encoded is not None
            self.assertEqual([(body, "", "q", raw) for raw, body in zip(*encoded)], expected)
        self.assertEqual(columns.count, by_rows.count)
        self.assertEqual(spec.BasicProperties.decode(expected[-1][3], 0).message_id, "w-18")

    def test_rows_setting_anything_are_not_encoded_column_wise(self) -> None:
        import pyarrow as pa

        from txamqp09.spark.arrow import BatchPublications
        from txamqp09.wire import _amqp0_9_1 as spec

        text = pa.map_(pa.string(), pa.string())
        body = pa.array([b"a", b"b"], pa.binary())
        batches = [
            {"body": pa.array([b"a", None], pa.binary())},
            {"body": pa.array([1, 2])},
            {"text": pa.array(["a", "b"])},
            {"body": body, "exchange": pa.array([None, "x"])},
            {"body": body, "routing_key": pa.array(["k", None])},
            {"body": body, "properties": pa.array([None, [("priority", "1")]], text)},
            {"body": body, "headers": pa.array([[("h", "v")], None], text)},
            {"body": body, "headers": pa.array(["not", "a map"])},
        ]
        publications = BatchPublications("", "q", {}, "w", spec.BasicProperties)
        for columns in batches:
            self.assertIsNone(publications.encoded(pa.RecordBatch.from_pydict(columns)))
        self.assertEqual(publications.count, 0)
        without_encoder = BatchPublications("", "q", {}, "w")
        self.assertIsNone(without_encoder.encoded(pa.RecordBatch.from_pydict({"body": body})))
        unnumbered = BatchPublications("", "q", {"priority": 2}, None, spec.BasicProperties)
        encoded = unnumbered.encoded(pa.RecordBatch.from_pydict({"body": body}))
        self.assertEqual(encoded, ([spec.BasicProperties(priority=2).encode()] * 2, [b"a", b"b"]))

    def test_a_message_id_too_long_for_a_short_string_is_refused(self) -> None:
        import pyarrow as pa

        from txamqp09.spark.arrow import BatchPublications
        from txamqp09.wire import _amqp0_9_1 as spec

        batch = pa.RecordBatch.from_pydict({"body": pa.array([b"x"], pa.binary())})
        with self.assertRaisesRegex(ValueError, "longer than 255 bytes"):
            list(BatchPublications("", "q", {}, "p" * 300, spec.BasicProperties).of(batch))
        with self.assertRaisesRegex(ValueError, "longer than 255 bytes"):
            BatchPublications("", "q", {}, "p" * 300, spec.BasicProperties).encoded(batch)
        many = pa.RecordBatch.from_pydict({"body": pa.array([b"x"] * 11, pa.binary())})
        fits = BatchPublications("", "q", {}, "p" * 253, spec.BasicProperties)  # "-9" fits, "-10" does not
        with self.assertRaisesRegex(ValueError, "longer than 255 bytes"):
            fits.encoded(many)

    def test_bad_rows(self) -> None:
        import pyarrow as pa

        with self.assertRaisesRegex(ValueError, "body column is null"):
            self.publications({"body": pa.array([None], pa.binary())})
        with self.assertRaisesRegex(TypeError, "binary or string, not int"):
            self.publications({"body": pa.array([3])})
        with self.assertRaisesRegex(ValueError, "has no body column"):
            self.publications({"text": pa.array(["x"])})
        with self.assertRaisesRegex(ValueError, "'colour' is not a basic property"):
            self.publications({
                "body": pa.array([b""]),
                "properties": pa.array([[("colour", "red")]], pa.map_(pa.string(), pa.string())),
            })
