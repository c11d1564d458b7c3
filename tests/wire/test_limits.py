"""Properties of the frame reader and the field-table codec on any bytes at all.

Every byte string either decodes or raises the wire's own error
(:class:`~txamqp09.wire.errors.AMQPError`), never another exception, and
nothing allocates in proportion to a length the input merely claims: what a
decoder holds at its peak is bounded by the bytes it was actually given.
"""

from __future__ import annotations

import struct
import tracemalloc
from typing import Any, Callable

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from tests.wire import strategies as s
from txamqp09.wire.errors import AMQPError
from txamqp09.wire.fields import AMQP0_9, RABBITMQ, TableCodec
from txamqp09.wire.frames import FRAME_OVERHEAD, FrameReader
from txamqp09.wire.versions import AMQP0_9 as VERSION_0_9

CODECS = [RABBITMQ, AMQP0_9]
#: These properties are cheap to check: more examples than the wire's default.
limits_settings = settings(s.wire_settings, max_examples=max(200, s.EXAMPLES))
#: Bytes of Python objects a decoded table may take per byte of input (a
#: two-byte void value becomes a dict entry and a key string).
OBJECT_BYTES_PER_INPUT_BYTE = 100
#: Room for the interpreter's own small allocations during a call.
SLACK = 64 * 1024


def peak_bytes(work: Callable[[], Any]) -> int:
    """The most memory *work* held at once (tracemalloc), whatever it raised."""
    tracemalloc.start()
    try:
        try:
            work()
        except AMQPError:
            pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


class FrameReaderProperties(SynchronousTestCase):
    @limits_settings
    @given(
        data=st.binary(max_size=3000),
        cuts=st.lists(st.integers(0, 3000), max_size=8),
        frame_max=st.sampled_from([4096, 131072]),
        reserved=st.booleans(),
    )
    def test_any_bytes_any_chunks(self, data: bytes, cuts: list[int], frame_max: int, reserved: bool) -> None:
        """Frames come out no larger than frame_max, or the wire's error; what
        stays buffered is less than one frame."""
        reader = FrameReader(frame_max, VERSION_0_9.reserved_frame_types if reserved else frozenset())
        bounds = [0, *sorted(cuts), len(data)]
        try:
            for start, end in zip(bounds, bounds[1:]):
                for frame_type, channel, payload in reader.feed(data[start:end]):
                    self.assertLessEqual(len(payload) + FRAME_OVERHEAD, frame_max)
                    self.assertTrue(0 <= channel <= 0xFFFF and 0 <= frame_type <= 0xFF)
        except AMQPError as error:
            self.assertTrue(error.reply_text)
            return
        self.assertLess(reader.buffered, frame_max)

    @limits_settings
    @given(length=st.integers(0, 2**32 - 1), frame_type=st.integers(0, 255))
    def test_claimed_sizes_allocate_nothing(self, length: int, frame_type: int) -> None:
        """A frame header claiming any size costs no more than the bytes sent."""
        header = struct.pack(">BHI", frame_type, 1, length) + b"\x00" * 100
        reader = FrameReader(131072)
        peak = peak_bytes(lambda: list(reader.feed(header)))
        self.assertLess(peak, 10 * len(header) + SLACK)


class FieldTableProperties(SynchronousTestCase):
    def decodes_or_refuses(self, codec: TableCodec, data: bytes, array: bool = False) -> None:
        decode = codec.decode_array if array else codec.decode_table
        try:
            _value, end = decode(data, 0)
        except AMQPError as error:
            self.assertEqual(error.reply_code, 502)
            return
        self.assertLessEqual(end, len(data))

    @limits_settings
    @given(codec=st.sampled_from(CODECS), data=st.binary(max_size=400), array=st.booleans())
    def test_any_bytes(self, codec: TableCodec, data: bytes, array: bool) -> None:
        self.decodes_or_refuses(codec, data, array)

    @limits_settings
    @given(codec=st.sampled_from(CODECS), body=st.binary(max_size=400))
    def test_any_body_with_a_right_length(self, codec: TableCodec, body: bytes) -> None:
        """Past the length check: keys and values of any bytes."""
        self.decodes_or_refuses(codec, struct.pack(">I", len(body)) + body)

    @limits_settings
    @given(data=st.data(), codec=st.sampled_from(CODECS))
    def test_mutated_tables(self, data: st.DataObject, codec: TableCodec) -> None:
        encoded = bytearray(codec.encode_table(data.draw(s.tables(codec))))
        for _ in range(data.draw(st.integers(1, 3))):
            where = data.draw(st.integers(0, len(encoded) - 1))
            encoded[where] = data.draw(st.integers(0, 255))
        self.decodes_or_refuses(codec, bytes(encoded))

    @limits_settings
    @given(
        codec=st.sampled_from(CODECS),
        letter=st.sampled_from([b"S", b"x", b"F", b"A"]),
        length=st.integers(0, 2**32 - 1),
        tail=st.binary(max_size=50),
    )
    def test_claimed_lengths_allocate_nothing(
        self, codec: TableCodec, letter: bytes, length: int, tail: bytes
    ) -> None:
        """A string, byte array, table or array claiming any length costs no
        more than the bytes given."""
        entry = b"\x01k" + letter + struct.pack(">I", length) + tail
        data = struct.pack(">I", len(entry)) + entry
        peak = peak_bytes(lambda: codec.decode_table(data, 0))
        self.assertLess(peak, OBJECT_BYTES_PER_INPUT_BYTE * len(data) + SLACK)

    def test_deep_nesting_is_refused_without_recursion_errors(self) -> None:
        inner = b""
        for _ in range(1000):
            entry = b"\x01kF" + struct.pack(">I", len(inner)) + inner
            inner = entry
        data = struct.pack(">I", len(inner)) + inner
        self.assertRaises(AMQPError, RABBITMQ.decode_table, data, 0)
