"""Stream deliveries read into Arrow columns (:mod:`txamqp09.spark.deliveries`),
from frames the project's own encoders build, without a broker.

Every case compares the record batches with what
:func:`~txamqp09.spark.arrow.message_batch` makes of the same deliveries
decoded by the generic decoders, which the client's messages use.
"""

from __future__ import annotations

from typing import Any, Optional

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import TestCase

from tests.spark.session import arrow_missing
from tests.wire.strategies import properties as properties_strategy
from tests.wire.strategies import tables, wire_settings
from txamqp09.wire import _amqp0_9_1 as spec
from txamqp09.wire.errors import FrameError, UnexpectedFrame
from txamqp09.wire.frames import FRAME_MIN_SIZE, FrameScanner, content_frames, method_frame
from txamqp09.wire.versions import AMQP0_9_1

TAG = "reader"
#: Offsets at and above 2**31 are encoded as long-long ("l") by the client's
#: table codec, as brokers send them; smaller ones as "I".
LONG = 2**40


class _Connection:
    """What the taker asks of its client connection."""

    version = AMQP0_9_1
    max_body_size = 1 << 20

    def __init__(self) -> None:
        self.open = True

    def takesDeliveries(self, number: int) -> bool:
        return self.open


class _Delivery:
    """What message_batch reads of a client Message."""

    def __init__(self, method: Any, properties: Any, body: bytes) -> None:
        self.method = method
        self.properties = properties
        self.body = body


def deliver(offset: int, body: bytes = b"x", headers: Optional[dict[str, Any]] = None, tag: int = 1,
            consumer_tag: str = TAG, exchange: str = "", routing_key: str = "log", redelivered: bool = False,
            **properties: Any) -> tuple[Any, Any, bytes]:
    """(basic.deliver, properties, body) of a stream delivery at *offset*
    (its offset header after *headers*)."""
    table = {**(headers or {}), "x-stream-offset": offset}
    return (
        spec.BasicDeliver(consumer_tag=consumer_tag, delivery_tag=tag, redelivered=redelivered,
                          exchange=exchange, routing_key=routing_key),
        spec.BasicProperties(headers=table, **properties),
        body,
    )


def frames(deliveries: list[tuple[Any, Any, bytes]], frame_max: int = FRAME_MIN_SIZE) -> bytes:
    return b"".join(content_frames(1, method, properties, body, frame_max) for method, properties, body in deliveries)


class _Reader:
    """A taker on channel 1 of a frame scanner (and the scanner's run
    taker, unless *runs* is false), and what it reported."""

    def __init__(self, start: int = 0, end: int = 2**63 - 1, gets: bool = False, runs: bool = True) -> None:
        from txamqp09.spark.deliveries import DeliveryTaker, GetTaker, StreamDeliveryTaker

        self.connection = _Connection()
        #: (offset, tag, count) of each report.
        self.reports: list[tuple[Optional[int], int, int]] = []
        self.failures: list[Exception] = []
        self.other: list[tuple[int, bytes]] = []
        self.emptied = 0
        self.taker: DeliveryTaker
        if gets:
            self.taker = GetTaker(self.connection, 1, self._fallback, self._arrived, self._emptied,
                                  self.failures.append)
        else:
            self.taker = StreamDeliveryTaker(
                self.connection, 1, TAG, self._fallback, start, end, self._arrived, self.failures.append,
            )
        self.scanner = FrameScanner(lambda kind, channel, payload: self.other.append((kind, payload)), 1 << 20)
        self.scanner.takers[1] = self.taker.take
        if runs:
            self.scanner.run_taker = self.taker.take_run

    def _arrived(self, offset: Optional[int], tag: int, count: int) -> None:
        assert count > 0
        self.reports.append((offset, tag, count))

    @property
    def arrived(self) -> int:
        """How many deliveries were reported."""
        return sum(count for _, _, count in self.reports)

    def assertReported(self, case: TestCase, each: list[tuple[Optional[int], int]]) -> None:
        """The reports count *each* delivery's (offset, tag), each report
        naming the last of those it counts."""
        case.assertEqual(self.arrived, len(each))
        counted = 0
        for offset, tag, count in self.reports:
            counted += count
            case.assertEqual((offset, tag), each[counted - 1])

    def _fallback(self, frame_type: int, buf: bytearray, start: int, end: int) -> bool:
        return False

    def _emptied(self) -> None:
        self.emptied += 1

    def rows(self, data: bytes, pieces: int = 1) -> list[dict[str, Any]]:
        """The rows of *data*'s deliveries, fed in *pieces* parts with a take after each."""
        from txamqp09.spark.arrow import ARROW_SCHEMA

        rows = []
        size = max(1, -(-len(data) // pieces))
        for start in range(0, len(data), size):
            self.scanner.scan(data[start : start + size])
            for batch in self.taker.take_columns().record_batches():
                assert batch.schema.equals(ARROW_SCHEMA)
                rows += batch.to_pylist()
        return rows


def expected(deliveries: list[tuple[Any, Any, bytes]]) -> list[dict[str, Any]]:
    """message_batch's rows of *deliveries* after an encode/decode round trip."""
    from txamqp09.spark.arrow import message_batch

    decoded = [
        _Delivery(method, spec.BasicProperties.decode(properties.encode(), 0), body)
        for method, properties, body in deliveries
    ]
    return message_batch(decoded).to_pylist() if decoded else []


class _ReaderCase(TestCase):
    skip = arrow_missing()
    #: Whether the scanner's run taker takes what it can (else the frame taker takes each frame).
    runs = True

    def reader(self, start: int = 0, end: int = 2**63 - 1, gets: bool = False) -> _Reader:
        return _Reader(start, end, gets, self.runs)


class StreamDeliveryTakerTests(_ReaderCase):

    def assertRows(self, deliveries: list[tuple[Any, Any, bytes]], frame_max: int = FRAME_MIN_SIZE,
                   pieces: int = 1) -> _Reader:
        reader = self.reader()
        self.assertEqual(reader.rows(frames(deliveries, frame_max), pieces), expected(deliveries))
        self.assertEqual(reader.failures, [])
        return reader

    def test_alike_deliveries(self) -> None:
        """Deliveries that differ in offset, tag and body only: every column
        as message_batch gives it, offsets as long-long and as int."""
        for base in (0, LONG):
            deliveries = [deliver(base + number, b"%d" % number, tag=number + 1) for number in range(50)]
            reader = self.assertRows(deliveries)
            reader.assertReported(self, [(base + number, number + 1) for number in range(50)])

    def test_every_property(self) -> None:
        """Properties of every kind, the offset among other headers (nested
        tables, arrays, bytes, None), first, in the middle and last."""
        from datetime import datetime, timezone

        stamp = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
        others = {"text": "é", "raw": b"\xff\x01", "nested": {"a": [1, b"b"]}, "none": None}
        deliveries = []
        for number in range(30):
            place = number % 3
            items = list(others.items())
            headers = dict(items[:place] + [("x-stream-offset", LONG + number)] + items[place:])
            deliveries.append((
                spec.BasicDeliver(consumer_tag=TAG, delivery_tag=number + 1, redelivered=number % 4 == 0,
                                  exchange="amq.direct", routing_key=f"key-{number % 2}"),
                spec.BasicProperties(content_type="application/json", delivery_mode=2, priority=number % 10,
                                     message_id=f"m-{number % 5}", timestamp=stamp, app_id="app", headers=headers),
                b"body %d" % number,
            ))
        self.assertRows(deliveries)

    def test_properties_of_each_delivery(self) -> None:
        """Properties that differ in every delivery (message ids, types,
        timestamps), some set in some deliveries only."""
        from datetime import datetime, timezone

        deliveries = [
            deliver(LONG + number, b"%d" % number, message_id=f"id-{number}" * (number % 3),
                    type=None if number % 2 else "t\u00e9",
                    timestamp=datetime.fromtimestamp(number * 1000, timezone.utc) if number % 4 else None,
                    delivery_mode=number % 3 or None, priority=None if number % 5 else number % 10,
                    user_id="" if number % 7 == 0 else None)
            for number in range(40)
        ]
        self.assertRows(deliveries)

    def test_malformed_properties(self) -> None:
        """Properties that do not decode fail the batch with 502 syntax-error,
        as the generic decoder does: text that is not UTF-8, a timestamp
        beyond what Python holds, a short string longer than the
        properties, a byte after the last property."""
        from txamqp09.wire.errors import AMQPSyntaxError

        import struct
        from datetime import datetime, timezone

        text = frames([deliver(LONG, message_id="\u00e9\u00e9")])
        stamp = frames([deliver(LONG, timestamp=datetime.fromtimestamp(12345, timezone.utc))])
        string = frames([deliver(LONG, app_id="m")])
        method, properties, body = deliver(LONG, app_id="m")
        trailing = content_frames(1, method, properties.encode() + b"m", body, FRAME_MIN_SIZE)
        for data in (
            text.replace("\u00e9\u00e9".encode(), b"\xff\xfe\xff\xfe"),
            stamp.replace(struct.pack(">Q", 12345), b"\x7f" * 8),
            string.replace(b"\x01m", b"\x09m"),
            trailing,
        ):
            reader = self.reader()
            reader.scanner.scan(data)
            columns = reader.taker.take_columns()
            self.assertEqual(len(columns), 1)
            with self.assertRaises(AMQPSyntaxError):
                list(columns.record_batches())

    def test_undecodable_table(self) -> None:
        """A headers table that does not decode is 502, raised when its
        delivery is taken; the deliveries before it were reported."""
        from txamqp09.wire.errors import AMQPSyntaxError

        reader = self.reader()
        deliveries = [deliver(LONG + number, b"%d" % number, tag=number + 1,
                              headers={"zz": "q" if number < 2 else "r"}) for number in range(3)]
        data = frames(deliveries)
        with self.assertRaises(AMQPSyntaxError):
            reader.scanner.scan(data.replace(b"zzS\x00\x00\x00\x01r", b"zz!\x00\x00\x00\x01r"))
        reader.assertReported(self, [(LONG, 1), (LONG + 1, 2)])
        self.assertEqual(reader.taker.take_columns().offsets, [LONG, LONG + 1])

    def test_only_the_offset(self) -> None:
        """No property but the headers table, which holds only the offset."""
        self.assertRows([deliver(LONG + number) for number in range(5)])

    def test_empty_and_multi_frame_bodies(self) -> None:
        """Empty bodies (no body frame) between bodies split over many frames."""
        deliveries = [deliver(LONG + number, b"" if number % 2 else bytes(range(256)) * (number + 1))
                      for number in range(12)]
        self.assertRows(deliveries, frame_max=FRAME_MIN_SIZE)
        small = [deliver(LONG + number, b"" if number % 2 else b"%d" % number * 3000) for number in range(12)]
        self.assertRows(small, frame_max=FRAME_MIN_SIZE)

    def test_taken_while_bodies_arrive(self) -> None:
        """Columns taken between any two reads of the socket (in the middle
        of a body, of a frame) hold whole deliveries, the rest the next."""
        deliveries = [deliver(LONG + number, b"%d" % number * 1500) for number in range(20)]
        for pieces in (7, 61, 400):
            self.assertRows(deliveries, frame_max=FRAME_MIN_SIZE, pieces=pieces)

    def test_range(self) -> None:
        """Deliveries outside [start, end) are no rows, but arrive (for the range's end)."""
        reader = self.reader(LONG + 3, LONG + 6)
        deliveries = [deliver(LONG + number, b"%d" % number, tag=number + 1) for number in range(8)]
        self.assertEqual(reader.rows(frames(deliveries)), expected(deliveries[3:6]))
        reader.assertReported(self, [(LONG + number, number + 1) for number in range(8)])

    def test_other_frames_go_to_the_fallback(self) -> None:
        """Another consumer's deliveries and other methods are not taken."""
        reader = self.reader()
        data = frames([deliver(LONG, consumer_tag="other")]) + method_frame(1, spec.BasicQosOk())
        self.assertEqual(reader.rows(data + frames([deliver(LONG + 1)])), expected([deliver(LONG + 1)]))
        self.assertEqual([kind for kind, _ in reader.other], [1, 2, 3, 1])

    def test_closed_channel(self) -> None:
        """Deliveries on a channel that is no longer open are not taken."""
        reader = self.reader()
        reader.connection.open = False
        self.assertEqual(reader.rows(frames([deliver(LONG)])), [])
        self.assertEqual([kind for kind, _ in reader.other], [1, 2, 3])

    def test_not_a_stream(self) -> None:
        """A delivery without an offset is reported and dropped."""
        from txamqp09.spark.deliveries import NotAStream

        reader = self.reader()
        method, _, body = deliver(LONG)
        plain = (method, spec.BasicProperties(headers={"a": 1}), body)
        self.assertEqual(reader.rows(frames([plain])), [])
        self.assertEqual([type(failure) for failure in reader.failures], [NotAStream])
        self.assertIn("stream queue", str(reader.failures[0]))

    def test_unexpected_frames(self) -> None:
        """A method frame where content is due is 505; a body longer than
        its header announced is 501."""
        reader = self.reader()
        method, properties, body = deliver(LONG)
        with self.assertRaises(UnexpectedFrame):
            reader.scanner.scan(method_frame(1, method) + method_frame(1, method))
        reader = self.reader()
        whole = frames([deliver(LONG, b"abc")])
        longer = whole[:-5] + b"abcd" + b"\xce"
        longer = longer[: len(whole) - 12] + (4).to_bytes(4, "big") + longer[len(whole) - 8 :]
        with self.assertRaises(FrameError):
            reader.scanner.scan(longer)

    def test_layouts_kept(self) -> None:
        """Alternating headers tables are both kept: each decoded once."""
        reader = self.reader()
        deliveries = [deliver(LONG + number, headers={"kind": "a"} if number % 2 else {"kind": 7, "more": "b"})
                      for number in range(10)]
        self.assertEqual(reader.rows(frames(deliveries)), expected(deliveries))
        self.assertEqual(len(reader.taker._tables), 2)

    @wire_settings
    @given(st.data())
    def test_any_deliveries(self, data: st.DataObject) -> None:
        """Any properties, headers, bodies, frame sizes and reads."""
        self.check_any_deliveries(data)

    def check_any_deliveries(self, data: st.DataObject) -> None:
        codec = AMQP0_9_1.tables
        count = data.draw(st.integers(0, 12))
        base = data.draw(st.sampled_from([0, LONG, -5]))
        deliveries = []
        for number in range(count):
            properties = data.draw(properties_strategy(spec.BasicProperties, codec))
            headers = data.draw(tables(codec))
            headers.pop("x-stream-offset", None)
            items = list(headers.items())
            place = data.draw(st.integers(0, len(items)))
            properties.headers = dict(items[:place] + [("x-stream-offset", base + number)] + items[place:])
            method = spec.BasicDeliver(
                consumer_tag=TAG, delivery_tag=number + 1, redelivered=data.draw(st.booleans()),
                exchange=data.draw(st.sampled_from(["", "amq.topic"])),
                routing_key=data.draw(st.sampled_from(["k", "é"])),
            )
            deliveries.append((method, properties, data.draw(st.binary(max_size=9000))))
        reader = self.reader(start=-2**63)
        pieces = data.draw(st.integers(1, 9))
        self.assertEqual(reader.rows(frames(deliveries, FRAME_MIN_SIZE), pieces), expected(deliveries))


class GetTakerTests(_ReaderCase):

    @wire_settings
    @given(st.data())
    def test_any_messages(self, data: st.DataObject) -> None:
        """basic.get-ok with any properties (headers or none, an offset
        header or none), bodies and message counts, between get-empty
        answers, as message_batch gives them."""
        self.check_any_messages(data)

    def check_any_messages(self, data: st.DataObject) -> None:
        codec = AMQP0_9_1.tables
        answers = []
        messages = []
        for number in range(data.draw(st.integers(0, 10))):
            if data.draw(st.booleans()):
                answers.append(method_frame(1, spec.BasicGetEmpty()))
                continue
            properties = data.draw(properties_strategy(spec.BasicProperties, codec))
            method = spec.BasicGetOk(
                delivery_tag=number + 1, redelivered=data.draw(st.booleans()),
                exchange=data.draw(st.sampled_from(["", "amq.topic"])), routing_key="k",
                message_count=data.draw(st.integers(0, 2**32 - 1)),
            )
            message = (method, properties, data.draw(st.binary(max_size=5000)))
            messages.append(message)
            answers.append(frames([message]))
        reader = self.reader(gets=True)
        self.assertEqual(reader.rows(b"".join(answers), data.draw(st.integers(1, 5))), expected(messages))
        self.assertEqual(reader.emptied, len(answers) - len(messages))
        reader.assertReported(self, [(None, method.delivery_tag) for method, _, _ in messages])
        self.assertEqual(reader.failures, [])


class FramesOneByOneTests(StreamDeliveryTakerTests, GetTakerTests):
    """The same cases with every frame taken by the frame taker alone."""

    runs = False

    @wire_settings
    @given(st.data())
    def test_any_deliveries(self, data: st.DataObject) -> None:
        self.check_any_deliveries(data)

    @wire_settings
    @given(st.data())
    def test_any_messages(self, data: st.DataObject) -> None:
        self.check_any_messages(data)


class RunTests(TestCase):
    """Runs of messages taken whole by the scanner's run taker."""

    skip = arrow_missing()

    def test_one_call_for_a_run(self) -> None:
        """Alike deliveries in one read are taken in one call, reported once."""
        reader = _Reader()
        deliveries = [deliver(LONG + number, b"%d" % number, tag=number + 1, message_id=f"m{number}")
                      for number in range(50)]
        self.assertEqual(reader.rows(frames(deliveries)), expected(deliveries))
        self.assertEqual(reader.reports, [(LONG + 49, 50, 50)])

    def test_a_message_under_way_waits(self) -> None:
        """The frames of a message not all received stay unread until the
        rest comes: the frame taker sees none of them."""
        taken: list[int] = []
        deliveries = [deliver(LONG + number, b"%d" % number * 10, tag=number + 1) for number in range(3)]
        data = frames(deliveries)
        last = len(frames(deliveries[:2]))
        for cut in (last + 5, len(data) - 40, len(data) - 1):
            reader = _Reader()
            take = reader.taker.take
            reader.scanner.takers[1] = lambda kind, *frame: bool(taken.append(kind)) or take(kind, *frame)
            reader.scanner.scan(data[:cut])
            self.assertEqual(reader.scanner.buffered, len(data) - last - (len(data) - cut))
            self.assertEqual(reader.reports, [(LONG + 1, 2, 2)])
            reader.scanner.scan(data[cut:])
            self.assertEqual(reader.reports, [(LONG + 1, 2, 2), (LONG + 2, 3, 1)])
            self.assertEqual(reader.scanner.buffered, 0)
            self.assertEqual(reader.taker.take_columns().offsets, [LONG, LONG + 1, LONG + 2])
        self.assertEqual(taken, [])

    def test_other_frames_end_a_run(self) -> None:
        """A frame that is not a delivery of the consumer ends the run: the
        frame taker and the handler get what follows, in order."""
        reader = _Reader()
        data = (frames([deliver(LONG, tag=1), deliver(LONG + 1, tag=2)]) + method_frame(1, spec.BasicQosOk())
                + frames([deliver(LONG + 2, tag=3)]))
        self.assertEqual(reader.rows(data), expected([deliver(LONG + number) for number in range(3)]))
        self.assertEqual(reader.reports, [(LONG + 1, 2, 2), (LONG + 2, 3, 1)])
        self.assertEqual([kind for kind, _ in reader.other], [1])

    def test_a_broken_frame_end_in_a_run(self) -> None:
        """A frame without its frame-end octet ends the run; the scanner
        refuses it (501) after the messages before it were taken."""
        reader = _Reader()
        data = bytearray(frames([deliver(LONG + number, b"abc", tag=number + 1) for number in range(3)]))
        data[-1] = 0
        with self.assertRaises(FrameError):
            reader.scanner.scan(bytes(data))
        self.assertEqual(reader.taker.take_columns().offsets, [LONG, LONG + 1])

    def test_a_closed_channel_takes_no_run(self) -> None:
        """Deliveries on a channel no longer open go to the handler."""
        reader = _Reader()
        reader.connection.open = False
        reader.scanner.scan(frames([deliver(LONG), deliver(LONG + 1)]))
        self.assertEqual(reader.reports, [])
        self.assertEqual([kind for kind, _ in reader.other], [1, 2, 3, 1, 2, 3])
