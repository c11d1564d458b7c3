"""Hostile and broken input: every failure is an AMQPError with the spec's code.

Nothing a peer sends may crash the decoder with another exception, recurse
without bound, allocate what a header merely announces, or wait forever for
bytes that a header has already shown to be unacceptable.
"""

from __future__ import annotations

import struct
from typing import Any, Iterable, Optional

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from tests.wire import strategies as s
from txamqp09.wire import _amqp0_9, _amqp0_9_1, fields
from txamqp09.wire.base import (
    CONTENT_HEADER,
    Method,
    decode_method,
    decode_properties,
)
from txamqp09.wire.errors import (
    AMQPError,
    AMQPNotImplemented,
    AMQPSyntaxError,
    CommandInvalid,
    EncodeError,
    FrameError,
    PreconditionFailed,
    UnexpectedFrame,
)
from txamqp09.wire.frames import (
    FRAME_BODY,
    FRAME_HEADER,
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    HEARTBEAT_FRAME,
    Command,
    ContentAssembler,
    FrameReader,
    content_frames,
    method_frame,
)
from txamqp09.wire.versions import AMQP0_8, AMQP0_9, AMQP0_9_1, VERSIONS, ProtocolVersion

M = _amqp0_9_1


def frame(frame_type: int, channel: int, payload: bytes, end: bytes = b"\xce") -> bytes:
    """A raw frame, possibly with a wrong frame-end octet."""
    return struct.pack(">BHI", frame_type, channel, len(payload)) + payload + end


def header_payload(class_id: int, size: int, properties: bytes = b"\x00\x00") -> bytes:
    """A content header frame payload."""
    return CONTENT_HEADER.pack(class_id, 0, size) + properties


class _Errors(SynchronousTestCase):
    """Assertion helper for AMQP errors."""

    def assertAMQPError(
        self, error: type[AMQPError], code: int, words: Iterable[str], call: Any, *args: Any
    ) -> AMQPError:
        """*call(*args)* raises *error* with *code* and all of *words* in its
        text or hint (RabbitMQ's wording is the text, the detail the hint)."""
        with self.assertRaises(error) as caught:
            call(*args)
        exc = caught.exception
        self.assertEqual(exc.reply_code, code)
        self.assertTrue(exc.hard if code >= 500 or code in (320, 402) else not exc.hard)
        for word in words:
            self.assertIn(word, exc.full_text)
        self.assertIn(str(code), str(exc))
        return exc


class FrameReaderTests(_Errors):
    """The frame reader: limits, framing errors, and chunking."""

    def test_truncated_frame_waits(self) -> None:
        """A partial frame yields nothing and stays buffered, at every cut."""
        data = method_frame(1, M.BasicAck(delivery_tag=5))
        for cut in range(len(data)):
            reader = FrameReader()
            self.assertEqual(list(reader.feed(data[:cut])), [])
            self.assertEqual(reader.buffered, cut)
            self.assertEqual(len(list(reader.feed(data[cut:]))), 1)
            self.assertEqual(reader.buffered, 0)

    def test_wrong_frame_end(self) -> None:
        reader = FrameReader()
        frames = reader.feed(frame(FRAME_METHOD, 1, b"\x00\x3c\x00\x50", end=b"\x00"))
        self.assertAMQPError(FrameError, 501, ["frame-end", "0x00"], list, frames)

    def test_frames_before_the_error_are_yielded(self) -> None:
        """Iteration gives the good frames first, then fails."""
        good = method_frame(1, M.BasicAck(delivery_tag=1))
        frames = FrameReader().feed(good + frame(FRAME_METHOD, 1, b"xxxx", end=b"\xcd"))
        self.assertEqual(next(frames)[0], FRAME_METHOD)
        self.assertRaises(FrameError, next, frames)

    def test_oversize_refused_on_header(self) -> None:
        """frame_max is checked with only the 7-byte header in."""
        reader = FrameReader(frame_max=4096)
        header = struct.pack(">BHI", FRAME_BODY, 1, 4096 - 8 + 1)
        self.assertAMQPError(
            FrameError, 501, ["4097", "frame_max 4096"], list, reader.feed(header)
        )
        self.assertEqual(reader.buffered, 7)

    def test_huge_size_refused_on_header(self) -> None:
        """A 4 GB announced payload is refused without waiting for it."""
        reader = FrameReader(frame_max=131072)
        frames = reader.feed(b"\x03\x00\x01\xff\xff\xff\xff")
        self.assertAMQPError(FrameError, 501, ["exceeds frame_max"], list, frames)

    def test_frame_max_exactly(self) -> None:
        """A frame of exactly frame_max bytes is accepted."""
        reader = FrameReader(frame_max=4096)
        body = b"x" * (4096 - 8)
        self.assertEqual(list(reader.feed(frame(FRAME_BODY, 1, body))), [(FRAME_BODY, 1, body)])

    def test_frame_max_raised_after_tuning(self) -> None:
        reader = FrameReader(frame_max=4096)
        reader.frame_max = 8192
        body = b"y" * 5000
        self.assertEqual(list(reader.feed(frame(FRAME_BODY, 2, body))), [(FRAME_BODY, 2, body)])

    def test_unknown_frame_type(self) -> None:
        """Type 9 is a frame error, noticed on the header alone."""
        for version in VERSIONS.values():
            reader = FrameReader(reserved_types=version.reserved_frame_types)
            frames = reader.feed(b"\x09\x00\x00\x00\x00\x01\x00")
            self.assertAMQPError(FrameError, 501, ["unknown frame type 9"], list, frames)
            self.assertEqual(reader.buffered, 7)

    def test_0_9_oob_and_trace_frames(self) -> None:
        """0-8 and 0-9 define types 4..7; they are refused as not implemented."""
        names = {4: "out-of-band method", 5: "out-of-band header",
                 6: "out-of-band body", 7: "trace"}
        for version in (AMQP0_8, AMQP0_9):
            for frame_type, name in names.items():
                reader = FrameReader(reserved_types=version.reserved_frame_types)
                frames = reader.feed(frame(frame_type, 1, b"abc"))
                self.assertAMQPError(AMQPNotImplemented, 540, [name, "not supported"],
                                     list, frames)

    def test_0_9_1_has_no_oob_frames(self) -> None:
        """0-9-1 dropped types 4..7: they are plain frame errors there."""
        reader = FrameReader(reserved_types=AMQP0_9_1.reserved_frame_types)
        self.assertAMQPError(FrameError, 501, ["unknown frame type 4"], list,
                             reader.feed(frame(4, 1, b"")))

    def test_heartbeat_on_channel(self) -> None:
        reader = FrameReader()
        self.assertAMQPError(FrameError, 501, ["heartbeat", "channel 0"], list,
                             reader.feed(frame(FRAME_HEARTBEAT, 3, b"")))

    def test_heartbeat_with_payload(self) -> None:
        reader = FrameReader()
        self.assertAMQPError(FrameError, 501, ["heartbeat", "no payload"], list,
                             reader.feed(frame(FRAME_HEARTBEAT, 0, b"\x00")[:7]))

    def test_heartbeat(self) -> None:
        reader = FrameReader()
        self.assertEqual(list(reader.feed(HEARTBEAT_FRAME)), [(FRAME_HEARTBEAT, 0, b"")])

    def _stream(self) -> tuple[bytes, list[tuple[int, int, bytes]]]:
        props = M.BasicProperties(content_type="text/plain", headers={"a": 1})
        data = b"".join([
            HEARTBEAT_FRAME,
            method_frame(0, M.ConnectionTuneOk(channel_max=10, frame_max=4096, heartbeat=5)),
            content_frames(7, M.BasicPublish(exchange="x", routing_key="k"), props,
                           b"b" * 10000, 4096),
            method_frame(65535, M.BasicAck(delivery_tag=2**64 - 1, multiple=True)),
            HEARTBEAT_FRAME,
        ])
        expected = []
        pos = 0
        while pos < len(data):
            kind, channel, size = struct.unpack_from(">BHI", data, pos)
            expected.append((kind, channel, data[pos + 7 : pos + 7 + size]))
            pos += 8 + size
        return data, expected

    def test_byte_by_byte(self) -> None:
        """Feeding one byte at a time yields the same frames as one feed."""
        data, expected = self._stream()
        reader = FrameReader()
        got: list[tuple[int, int, bytes]] = []
        for n in range(len(data)):
            got.extend(reader.feed(data[n : n + 1]))
        self.assertEqual(got, expected)
        self.assertEqual(reader.buffered, 0)

    def test_many_frames_in_one_feed(self) -> None:
        data, expected = self._stream()
        reader = FrameReader()
        self.assertEqual(list(reader.feed(data)), expected)
        self.assertEqual(len(expected), 9)  # 3 body frames
        self.assertEqual(reader.buffered, 0)
        for payload in (p for _, _, p in expected):
            self.assertIs(type(payload), bytes)

    def test_buffer_like_input(self) -> None:
        """bytearray and memoryview chunks work; payloads are always bytes."""
        data, expected = self._stream()
        reader = FrameReader()
        got = list(reader.feed(bytearray(data[:100])))
        got += reader.feed(memoryview(data)[100:5000])
        got += reader.feed(data[5000:])
        self.assertEqual(got, expected)
        self.assertEqual({type(p) for _, _, p in got}, {bytes})

    @s.wire_settings
    @given(cuts=st.lists(st.integers(0, 10300), max_size=12))
    def test_any_chunking(self, cuts: list[int]) -> None:
        """Any split of the stream into chunks gives the same frames."""
        data, expected = self._stream()
        reader = FrameReader()
        got: list[tuple[int, int, bytes]] = []
        last = 0
        for cut in sorted(cuts) + [len(data)]:
            got.extend(reader.feed(data[last:cut]))
            last = max(last, cut)
        self.assertEqual(got, expected)


class MethodDecodeTests(_Errors):
    """Method payloads that cannot be decoded."""

    def test_unknown_class(self) -> None:
        exc = self.assertAMQPError(CommandInvalid, 503, ["unknown method", "class 999"],
                                   decode_method, M.METHODS, b"\x03\xe7\x00\x0a")
        self.assertEqual((exc.class_id, exc.method_id), (999, 10))

    def test_unknown_method(self) -> None:
        self.assertAMQPError(CommandInvalid, 503, ["class 60, method 99"],
                             decode_method, M.METHODS, b"\x00\x3c\x00\x63")

    def test_method_of_another_version(self) -> None:
        """0-9's message.transfer does not exist in 0-9-1."""
        payload = _amqp0_9.MessageTransfer().encode()
        self.assertAMQPError(CommandInvalid, 503, ["class 120"],
                             decode_method, M.METHODS, payload)

    def test_too_short_for_ids(self) -> None:
        for payload in (b"", b"\x00", b"\x00\x3c\x00"):
            self.assertAMQPError(AMQPSyntaxError, 502, ["too short"],
                                 decode_method, M.METHODS, payload)

    def test_invalid_utf8_shortstr(self) -> None:
        payload = b"\x00\x3c\x00\x28\x00\x00" + b"\x02\xc3\x28" + b"\x00" + b"\x00"
        exc = self.assertAMQPError(AMQPSyntaxError, 502, ["basic.publish", "UTF-8"],
                                   decode_method, M.METHODS, payload)
        self.assertEqual((exc.class_id, exc.method_id), (60, 40))

    def test_truncated_field(self) -> None:
        """Every cut of a valid payload is a 502 naming the method."""
        payload = M.QueueDeclare(queue="q", arguments={"x-max-length": 10}).encode()
        for cut in range(4, len(payload)):
            self.assertAMQPError(AMQPSyntaxError, 502, ["queue.declare"],
                                 decode_method, M.METHODS, payload[:cut])

    def test_trailing_bytes(self) -> None:
        payload = M.BasicAck(delivery_tag=1).encode() + b"\x00"
        self.assertAMQPError(AMQPSyntaxError, 502, ["basic.ack", "1 unexpected bytes"],
                             decode_method, M.METHODS, payload)

    def test_table_nested_1000_deep(self) -> None:
        """Deep nesting is refused at MAX_DEPTH, without a RecursionError."""
        table = b""
        for _ in range(1000):
            body = b"\x01aF" + struct.pack(">I", len(table)) + table
            table = body
        arguments = struct.pack(">I", len(table)) + table
        payload = b"\x00\x32\x00\x0a\x00\x00\x01q\x00" + arguments
        self.assertAMQPError(AMQPSyntaxError, 502, ["nest deeper than 64"],
                             decode_method, M.METHODS, payload)

    def test_array_nested_1000_deep(self) -> None:
        array = b""
        for _ in range(1000):
            array = b"A" + struct.pack(">I", len(array)) + array
        table = b"\x01a" + array
        payload = (b"\x00\x32\x00\x0a\x00\x00\x01q\x00"
                   + struct.pack(">I", len(table)) + table)
        self.assertAMQPError(AMQPSyntaxError, 502, ["nest deeper"],
                             decode_method, M.METHODS, payload)

    def test_encoding_too_deep(self) -> None:
        """Encoding refuses what decoding would refuse."""
        deep: dict[str, Any] = {}
        for _ in range(100):
            deep = {"a": deep}
        self.assertRaises(EncodeError, fields.RABBITMQ.encode_table, deep)

    def test_table_length_past_frame(self) -> None:
        """A table declaring more bytes than its frame holds."""
        payload = b"\x00\x32\x00\x0a\x00\x00\x01q\x00" + b"\x7f\xff\xff\xff" + b"\x01aV"
        self.assertAMQPError(AMQPSyntaxError, 502, ["declares 2147483647 bytes"],
                             decode_method, M.METHODS, payload)

    def test_nested_length_past_table(self) -> None:
        """A nested table longer than its parent."""
        inner = b"\x01aF\x00\x00\x00\x10" + b"\x01bV"
        payload = (b"\x00\x32\x00\x0a\x00\x00\x01q\x00"
                   + struct.pack(">I", len(inner)) + inner + b"\x00" * 16)
        self.assertAMQPError(AMQPSyntaxError, 502, ["queue.declare"],
                             decode_method, M.METHODS, payload)

    def test_unknown_table_type(self) -> None:
        table = b"\x01aZ"
        payload = (b"\x00\x32\x00\x0a\x00\x00\x01q\x00" + struct.pack(">I", len(table)) + table)
        self.assertAMQPError(AMQPSyntaxError, 502, ["unknown field table value type 'Z'"],
                             decode_method, M.METHODS, payload)

    def test_dialect_letters(self) -> None:
        """0-9's U and L are unknown to the 0-9-1 dialect, and the other way round."""
        self.assertRaises(AMQPSyntaxError, fields.RABBITMQ.decode_table,
                          b"\x00\x00\x00\x05\x01aU\x00\x01", 0)
        value, _ = fields.AMQP0_9.decode_table(b"\x00\x00\x00\x05\x01aU\xff\xff", 0)
        self.assertEqual(value, {"a": -1})

    def test_timestamp_beyond_python(self) -> None:
        table = b"\x01tT" + b"\xff" * 8
        self.assertAMQPError(AMQPSyntaxError, 502, ["timestamp"],
                             fields.RABBITMQ.decode_table,
                             struct.pack(">I", len(table)) + table, 0)

    def test_content_kind(self) -> None:
        """0-9 message.transfer's content octet is 0 or 1."""
        payload = bytearray(_amqp0_9.MessageTransfer(body=fields.Content(b"x")).encode())
        payload[-6] = 2
        self.assertAMQPError(AMQPSyntaxError, 502, ["message.transfer", "content kind 2"],
                             decode_method, _amqp0_9.METHODS, bytes(payload))


class PropertiesDecodeTests(_Errors):
    def test_unknown_property_flag(self) -> None:
        """Bit 1 of basic's flags names a 15th property basic does not have."""
        self.assertAMQPError(AMQPSyntaxError, 502, ["basic properties", "lacks"],
                             decode_properties, M.BasicProperties, b"\x00\x02", 0)

    def test_continuation_past_last_word(self) -> None:
        self.assertAMQPError(AMQPSyntaxError, 502, ["continue past"],
                             decode_properties, M.BasicProperties, b"\x00\x01\x80\x00", 0)

    def test_truncated_property(self) -> None:
        encoded = M.BasicProperties(content_type="text/plain", priority=3).encode()
        for cut in range(len(encoded)):
            self.assertAMQPError(AMQPSyntaxError, 502, ["basic properties"],
                                 decode_properties, M.BasicProperties, encoded[:cut], 0)

    def test_trailing_bytes(self) -> None:
        encoded = M.BasicProperties(priority=3).encode() + b"\x00"
        self.assertAMQPError(AMQPSyntaxError, 502, ["unexpected bytes"],
                             decode_properties, M.BasicProperties, encoded, 0)

    def test_lazy_properties_fail_when_read(self) -> None:
        """Command.properties decodes on first access and fails with 502 then."""
        command = Command(M.BasicPublish(), b"\x00\x02", b"", M.BasicProperties)
        self.assertAMQPError(AMQPSyntaxError, 502, ["lacks"], getattr, command, "properties")


class AssemblerTests(_Errors):
    """The content assembler's frame-order and size rules."""

    def setUp(self) -> None:
        self.assembler = ContentAssembler(M.PROPERTIES, max_body_size=1 << 20)

    def test_huge_announced_body(self) -> None:
        """2**63 bytes announced: 406 at once, nothing allocated, state reset."""
        self.assertIsNone(self.assembler.method(M.BasicPublish()))
        exc = self.assertAMQPError(
            PreconditionFailed, 406, ["basic.publish", str(2**63), str(1 << 20)],
            self.assembler.header, header_payload(60, 2**63),
        )
        self.assertEqual((exc.class_id, exc.method_id), (60, 40))
        self.assertFalse(exc.hard)
        self.assertFalse(self.assembler.busy)
        self.assertIsNotNone(self.assembler.method(M.BasicAck()))

    def test_max_announced_size(self) -> None:
        self.assembler.method(M.BasicPublish())
        self.assertRaises(PreconditionFailed, self.assembler.header,
                          header_payload(60, 2**64 - 1))

    def test_body_exceeds_declared_size(self) -> None:
        self.assembler.method(M.BasicPublish())
        self.assertIsNone(self.assembler.header(header_payload(60, 5)))
        self.assertIsNone(self.assembler.body(b"abc"))
        self.assertAMQPError(FrameError, 501, ["6 bytes", "announced 5"],
                             self.assembler.body, b"abc")

    def test_header_without_method(self) -> None:
        self.assertAMQPError(UnexpectedFrame, 505, ["content header", "without"],
                             self.assembler.header, header_payload(60, 1))

    def test_header_after_method_without_content(self) -> None:
        self.assertIsNotNone(self.assembler.method(M.BasicAck()))
        self.assertRaises(UnexpectedFrame, self.assembler.header, header_payload(60, 1))

    def test_second_header(self) -> None:
        self.assembler.method(M.BasicPublish())
        self.assembler.header(header_payload(60, 3))
        self.assertAMQPError(UnexpectedFrame, 505, ["content header"],
                             self.assembler.header, header_payload(60, 3))

    def test_body_without_header(self) -> None:
        self.assertAMQPError(UnexpectedFrame, 505, ["body frame", "without"],
                             self.assembler.body, b"x")
        self.assembler.method(M.BasicPublish())
        self.assertRaises(UnexpectedFrame, self.assembler.body, b"x")

    def test_method_while_content_pending(self) -> None:
        self.assembler.method(M.BasicPublish())
        self.assembler.header(header_payload(60, 10))
        self.assertAMQPError(UnexpectedFrame, 505, ["basic.ack", "basic.publish"],
                             self.assembler.method, M.BasicAck())
        self.assertFalse(self.assembler.busy)

    def test_header_for_other_class(self) -> None:
        self.assembler.method(M.BasicPublish())
        self.assertAMQPError(UnexpectedFrame, 505, ["class 70"],
                             self.assembler.header, header_payload(70, 1))

    def test_short_header(self) -> None:
        self.assembler.method(M.BasicPublish())
        self.assertAMQPError(FrameError, 501, ["too short"],
                             self.assembler.header, header_payload(60, 1)[:13])

    def test_complete_command(self) -> None:
        """The good path, for contrast: the body is joined and properties lazy."""
        props = M.BasicProperties(delivery_mode=2)
        self.assembler.method(M.BasicPublish(routing_key="r"))
        self.assertIsNone(self.assembler.header(header_payload(60, 6, props.encode())))
        self.assertIsNone(self.assembler.body(b"abc"))
        command = self.assembler.body(b"def")
        assert command is not None
        self.assertEqual(command.body, b"abcdef")
        self.assertEqual(command.raw_properties, props.encode())
        self.assertEqual(command.properties, props)
        self.assertFalse(self.assembler.busy)

    def test_empty_body(self) -> None:
        self.assembler.method(M.BasicPublish())
        command = self.assembler.header(header_payload(60, 0))
        assert command is not None
        self.assertEqual(command.body, b"")


class EncodeErrorTests(SynchronousTestCase):
    """Values that cannot be put on the wire fail before anything is sent."""

    def test_long_shortstr(self) -> None:
        with self.assertRaises(EncodeError) as caught:
            M.BasicPublish(exchange="x" * 256).encode()
        self.assertIn("256 bytes", str(caught.exception))
        M.BasicPublish(exchange="x" * 255).encode()
        self.assertRaises(EncodeError, M.BasicPublish(routing_key="é" * 128).encode)

    def test_longstr_given_str(self) -> None:
        with self.assertRaises(EncodeError) as caught:
            M.ConnectionStartOk(response="secret").encode()  # type: ignore[arg-type]
        self.assertIn("must be bytes, not str", str(caught.exception))

    def test_shortstr_given_bytes(self) -> None:
        self.assertRaises(EncodeError, M.BasicPublish(exchange=b"x").encode)  # type: ignore[arg-type]

    def test_table_values(self) -> None:
        for bad in ({"a": object()}, {1: 2}, {"a": 2**64}, {"a": fields.Int8(200)},
                    {"a": fields.UInt64(2**63)}):
            self.assertRaises(EncodeError, fields.RABBITMQ.encode_table, bad)

    def test_properties(self) -> None:
        self.assertRaises(EncodeError, M.BasicProperties(content_type="x" * 300).encode)
        self.assertRaises(EncodeError, M.BasicProperties(timestamp=-1).encode)  # type: ignore[arg-type]


def _pipeline(version: ProtocolVersion, data: bytes, frame_max: int = 4096) -> list[Any]:
    """Run bytes through reader, decoder and assembler as a connection would."""
    reader = FrameReader(frame_max, version.reserved_frame_types)
    assembler = ContentAssembler(version.properties, max_body_size=1 << 16)
    out: list[Any] = []
    for kind, _channel, payload in reader.feed(data):
        command: Optional[Command] = None
        if kind == FRAME_METHOD:
            command = assembler.method(decode_method(version.methods, payload))
        elif kind == FRAME_HEADER:
            command = assembler.header(payload)
        elif kind == FRAME_BODY:
            command = assembler.body(payload)
        if command is not None:
            out.append((command.method, command.properties, command.body))
    return out


class FuzzTests(SynchronousTestCase):
    """Random and mutated input raises nothing but AMQPError."""

    def _only_amqp_errors(self, version: ProtocolVersion, data: bytes) -> None:
        try:
            _pipeline(version, data)
        except AMQPError as exc:
            self.assertTrue(exc.reply_text)

    @s.wire_settings
    @given(version=st.sampled_from(list(VERSIONS.values())), data=st.binary(max_size=200))
    def test_random_bytes(self, version: ProtocolVersion, data: bytes) -> None:
        self._only_amqp_errors(version, data)

    @s.wire_settings
    @given(
        version=st.sampled_from(list(VERSIONS.values())),
        kind=st.sampled_from([FRAME_METHOD, FRAME_HEADER, FRAME_BODY]),
        payload=st.binary(max_size=100),
        prefix=st.sampled_from([b"", method_frame(1, M.BasicPublish())]),
    )
    def test_random_payloads(self, version: ProtocolVersion, kind: int, payload: bytes,
                             prefix: bytes) -> None:
        self._only_amqp_errors(version, prefix + frame(kind, 1, payload))

    @s.wire_settings
    @given(data=st.data(), version=st.sampled_from(list(VERSIONS.values())))
    def test_mutated_methods(self, data: st.DataObject, version: ProtocolVersion) -> None:
        cls = data.draw(st.sampled_from(list(version.methods.values())))
        method: Method = data.draw(s.methods(cls, version.tables))
        payload = bytearray(method.encode())
        for _ in range(data.draw(st.integers(1, 3))):
            where = data.draw(st.integers(4, len(payload)))
            action = data.draw(st.sampled_from(["flip", "cut", "insert"]))
            if action == "flip" and where < len(payload):
                payload[where] = data.draw(st.integers(0, 255))
            elif action == "cut":
                del payload[where:]
            else:
                payload.insert(where, data.draw(st.integers(0, 255)))
        self._only_amqp_errors(version, frame(FRAME_METHOD, 1, bytes(payload)))

    @s.wire_settings
    @given(data=st.data(), version=st.sampled_from(list(VERSIONS.values())))
    def test_mutated_properties(self, data: st.DataObject, version: ProtocolVersion) -> None:
        cls = data.draw(st.sampled_from(list(version.properties.values())))
        props = data.draw(s.properties(cls, version.tables))
        encoded = bytearray(props.encode())
        where = data.draw(st.integers(0, max(0, len(encoded) - 1)))
        if encoded:
            encoded[where] ^= data.draw(st.integers(1, 255))
        try:
            decode_properties(cls, bytes(encoded), 0)
        except AMQPError:
            pass

    def test_pipeline_good_input(self) -> None:
        """The fuzz pipeline does decode good input (so the fuzzing means something)."""
        props = M.BasicProperties(message_id="m")
        data = (method_frame(1, M.BasicQos(prefetch_count=3))
                + content_frames(1, M.BasicPublish(routing_key="r"), props, b"x" * 5000, 4096))
        got = _pipeline(AMQP0_9_1, data)
        self.assertEqual(got, [(M.BasicQos(prefetch_count=3), None, b""),
                               (M.BasicPublish(routing_key="r"), props, b"x" * 5000)])
