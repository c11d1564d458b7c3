"""Golden frames: exact bytes worked out by hand from the 0-8 and 0-9 layouts.

Each expected value below is written out field by field from the spec's
method layout (class id, method id, then fields in order with bits packed
into octets, low bit first) rather than produced by any encoder, and checked
in both directions: our encoding must equal it, and decoding it must give
the object back.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from txamqp09.wire import _amqp0_8 as A8
from txamqp09.wire import _amqp0_9 as A9
from txamqp09.wire import fields
from txamqp09.wire.base import Method, Properties, decode_method, decode_properties
from txamqp09.wire.frames import (
    HEARTBEAT_FRAME,
    ContentAssembler,
    FrameReader,
    content_frames,
    method_frame,
)
from txamqp09.wire.versions import AMQP0_8, AMQP0_9, ProtocolVersion

#: 2009-01-01T00:00:00Z is 1230768000 s after the epoch: 0x495C0780.
NEW_YEAR_2009 = datetime(2009, 1, 1, tzinfo=timezone.utc)
NEW_YEAR_2009_WIRE = b"\x00\x00\x00\x00\x49\x5c\x07\x80"


def _join(*parts: bytes) -> bytes:
    return b"".join(parts)


class _Golden(SynchronousTestCase):
    def assertMethod(self, version: ProtocolVersion, method: Method, payload: bytes) -> None:
        """*method* encodes to *payload*, and *payload* decodes to *method*."""
        self.assertEqual(method.encode(), payload)
        self.assertEqual(decode_method(version.methods, payload), method)

    def assertProperties(self, props: Properties, encoded: bytes) -> None:
        self.assertEqual(props.encode(), encoded)
        self.assertEqual(decode_properties(type(props), encoded, 0), props)


class Golden0_8Tests(_Golden):
    """AMQP 0-8."""

    def test_connection_start_frame(self) -> None:
        method = A8.ConnectionStart(server_properties={"product": "tx"})
        payload = _join(
            b"\x00\x0a\x00\x0a",  # connection (10) . start (10)
            b"\x08\x00",  # version-major 8, version-minor 0
            b"\x00\x00\x00\x0f",  # server-properties: 15 bytes
            b"\x07product", b"S", b"\x00\x00\x00\x02tx",  # 8 + 1 + 6
            b"\x00\x00\x00\x05PLAIN",  # mechanisms
            b"\x00\x00\x00\x05en_US",  # locales
        )
        self.assertEqual(len(payload), 0x2B)
        self.assertEqual(
            method_frame(0, method),
            b"\x01\x00\x00\x00\x00\x00\x2b" + payload + b"\xce",
        )
        # Tables decode strings as bytes; the rest comes back as sent.
        decoded = decode_method(A8.METHODS, payload)
        self.assertEqual(decoded, A8.ConnectionStart(server_properties={"product": b"tx"}))

    def test_connection_tune(self) -> None:
        self.assertMethod(
            AMQP0_8,
            A8.ConnectionTune(channel_max=0, frame_max=131072, heartbeat=60),
            b"\x00\x0a\x00\x1e" b"\x00\x00" b"\x00\x02\x00\x00" b"\x00\x3c",
        )

    def test_connection_open(self) -> None:
        self.assertMethod(
            AMQP0_8,
            A8.ConnectionOpen(virtual_host="/", capabilities="", insist=True),
            b"\x00\x0a\x00\x28" b"\x01/" b"\x00" b"\x01",
        )

    def test_basic_publish_header_body(self) -> None:
        method = A8.BasicPublish(ticket=0, exchange="amq.direct", routing_key="rk",
                                 mandatory=True)
        props = A8.BasicProperties(content_type="text/plain", delivery_mode=2)
        expected = _join(
            # method frame, channel 1, 21-byte payload
            b"\x01\x00\x01\x00\x00\x00\x15",
            b"\x00\x3c\x00\x28",  # basic (60) . publish (40)
            b"\x00\x00",  # ticket
            b"\x0aamq.direct",
            b"\x02rk",
            b"\x01",  # mandatory (bit 0), not immediate (bit 1)
            b"\xce",
            # header frame, channel 1, 26-byte payload
            b"\x02\x00\x01\x00\x00\x00\x1a",
            b"\x00\x3c" b"\x00\x00",  # class 60, weight 0
            b"\x00\x00\x00\x00\x00\x00\x00\x05",  # body size 5
            b"\x90\x00",  # flags: content-type (bit 15), delivery-mode (bit 12)
            b"\x0atext/plain",
            b"\x02",
            b"\xce",
            # body frame
            b"\x03\x00\x01\x00\x00\x00\x05" b"hello" b"\xce",
        )
        self.assertEqual(content_frames(1, method, props, b"hello", 131072), expected)

        reader = FrameReader(131072, AMQP0_8.reserved_frame_types)
        assembler = ContentAssembler(AMQP0_8.properties, 1 << 20)
        (m, h, b) = list(reader.feed(expected))
        self.assertEqual(m[:2], (1, 1))
        self.assertIsNone(assembler.method(decode_method(A8.METHODS, m[2])))
        self.assertIsNone(assembler.header(h[2]))
        command = assembler.body(b[2])
        assert command is not None
        self.assertEqual((command.method, command.properties, command.body),
                         (method, props, b"hello"))

    def test_body_split_at_frame_max(self) -> None:
        """frame_max 4096 leaves 4088 payload bytes per body frame."""
        body = bytes(range(256)) * 20  # 5120 bytes: 4088 + 1032
        out = content_frames(3, A8.BasicPublish(), A8.BasicProperties(), body, 4096)
        method_part = 7 + 4 + 2 + 1 + 1 + 1 + 1  # header, ids, ticket, 2 empty strs, bits
        header_part = 7 + 12 + 2 + 1  # header, class/weight/size, flags, end
        first = method_part + header_part
        self.assertEqual(out[first : first + 7], b"\x03\x00\x03\x00\x00\x0f\xf8")
        second = first + 7 + 4088 + 1
        self.assertEqual(out[second : second + 7], b"\x03\x00\x03\x00\x00\x04\x08")
        self.assertEqual(out[-1:], b"\xce")
        self.assertEqual(len(out), second + 8 + 1032)

    def test_queue_declare_with_table(self) -> None:
        self.assertMethod(
            AMQP0_8,
            A8.QueueDeclare(ticket=1, queue="q1", durable=True, auto_delete=True,
                            arguments={"x-expires": 1000}),
            _join(
                b"\x00\x32\x00\x0a",  # queue (50) . declare (10)
                b"\x00\x01",  # ticket 1
                b"\x02q1",
                b"\x0a",  # durable (bit 1) | auto-delete (bit 3)
                b"\x00\x00\x00\x0f",  # 15-byte table
                b"\x09x-expires" b"I" b"\x00\x00\x03\xe8",
            ),
        )

    def test_all_basic_properties(self) -> None:
        """All 14 basic properties: flags 0xfffc, values in spec order."""
        props = A8.BasicProperties(
            content_type="a", content_encoding="b", headers={}, delivery_mode=1,
            priority=9, correlation_id="c", reply_to="d", expiration="60000",
            message_id="e", timestamp=NEW_YEAR_2009, type="f", user_id="g",
            app_id="h", cluster_id="i",
        )
        self.assertProperties(props, _join(
            b"\xff\xfc",
            b"\x01a", b"\x01b", b"\x00\x00\x00\x00", b"\x01", b"\x09",
            b"\x01c", b"\x01d", b"\x0560000", b"\x01e", NEW_YEAR_2009_WIRE,
            b"\x01f", b"\x01g", b"\x01h", b"\x01i",
        ))

    def test_no_properties(self) -> None:
        self.assertProperties(A8.BasicProperties(), b"\x00\x00")

    def test_channel_close(self) -> None:
        self.assertMethod(
            AMQP0_8,
            A8.ChannelClose(reply_code=404, reply_text="NOT_FOUND", class_id=50, method_id=10),
            b"\x00\x14\x00\x28" b"\x01\x94" b"\x09NOT_FOUND" b"\x00\x32" b"\x00\x0a",
        )

    def test_heartbeat(self) -> None:
        self.assertEqual(HEARTBEAT_FRAME, b"\x08\x00\x00\x00\x00\x00\x00\xce")

    def test_rabbitmq_table_letters(self) -> None:
        """0-8 uses RabbitMQ's letters: s is a signed short, l a signed long long."""
        table = {"s": fields.Int16(-2), "l": 2**40}
        encoded = _join(
            b"\x00\x00\x00\x10",
            b"\x01s" b"s" b"\xff\xfe",
            b"\x01l" b"l" b"\x00\x00\x01\x00\x00\x00\x00\x00",
        )
        self.assertEqual(A8.TABLES.encode_table(table), encoded)
        self.assertEqual(A8.TABLES.decode_table(encoded, 0), (table, len(encoded)))


class Golden0_9Tests(_Golden):
    """AMQP 0-9."""

    def test_connection_start_defaults(self) -> None:
        self.assertMethod(
            AMQP0_9,
            A9.ConnectionStart(),
            _join(
                b"\x00\x0a\x00\x0a",
                b"\x00\x09",  # version 0-9
                b"\x00\x00\x00\x00",  # empty server-properties
                b"\x00\x00\x00\x05PLAIN",
                b"\x00\x00\x00\x05en_US",
            ),
        )

    def test_message_transfer(self) -> None:
        method = A9.MessageTransfer(
            ticket=0, destination="d", redelivered=False, immediate=True, ttl=60000,
            priority=5, timestamp=NEW_YEAR_2009, delivery_mode=2,
            exchange="amq.direct", routing_key="rk", message_id="m1",
            content_type="text/plain", application_headers={"h": fields.ShortStr("v")},
            body=fields.Content(b"hi"),
        )
        payload = _join(
            b"\x00\x78\x00\x0a",  # message (120) . transfer (10)
            b"\x00\x00",  # ticket
            b"\x01d",  # destination
            b"\x02",  # not redelivered (bit 0), immediate (bit 1)
            b"\x00\x00\x00\x00\x00\x00\xea\x60",  # ttl 60000
            b"\x05",  # priority
            NEW_YEAR_2009_WIRE,  # timestamp
            b"\x02",  # delivery-mode
            b"\x00" * 8,  # expiration: the epoch
            b"\x0aamq.direct",
            b"\x02rk",
            b"\x02m1",  # message-id
            b"\x00",  # correlation-id
            b"\x00",  # reply-to
            b"\x0atext/plain",  # content-type
            b"\x00\x00\x00\x00",  # content-encoding, user-id, app-id, transaction-id
            b"\x00\x00\x00\x00",  # security-token: empty longstr
            b"\x00\x00\x00\x05" b"\x01h" b"s" b"\x01v",  # 0-9's s is a short string
            b"\x00" b"\x00\x00\x00\x02hi",  # inline content
        )
        self.assertMethod(AMQP0_9, method, payload)
        decoded: Any = decode_method(A9.METHODS, payload)
        self.assertIs(type(decoded.application_headers["h"]), fields.ShortStr)

    def test_message_transfer_reference(self) -> None:
        method = A9.MessageTransfer(body=fields.Content(b"ref-1", is_reference=True))
        self.assertEqual(method.encode()[-10:], b"\x01" b"\x00\x00\x00\x05ref-1")
        self.assertEqual(decode_method(A9.METHODS, method.encode()), method)

    def test_tunnel_request_with_properties(self) -> None:
        method = A9.TunnelRequest(meta_data={"n": fields.UInt8(1)})
        props = A9.TunnelProperties(proxy_name="p", durable=1)
        expected = _join(
            b"\x01\x00\x02\x00\x00\x00\x0c",  # method frame, channel 2, 12 bytes
            b"\x00\x6e\x00\x0a",  # tunnel (110) . request (10)
            b"\x00\x00\x00\x04" b"\x01n" b"B" b"\x01",  # meta-data: n = uint8 1
            b"\xce",
            b"\x02\x00\x02\x00\x00\x00\x11",  # header frame, 17 bytes
            b"\x00\x6e\x00\x00" b"\x00\x00\x00\x00\x00\x00\x00\x03",
            b"\x50\x00",  # proxy-name (bit 14), durable (bit 12)
            b"\x01p" b"\x01",
            b"\xce",
            b"\x03\x00\x02\x00\x00\x00\x03" b"abc" b"\xce",
        )
        self.assertEqual(content_frames(2, method, props, b"abc", 4096), expected)
        self.assertProperties(props, b"\x50\x00\x01p\x01")

    def test_all_tunnel_properties(self) -> None:
        props = A9.TunnelProperties(headers={"a": None}, proxy_name="p", data_name="d",
                                    durable=2, broadcast=1)
        self.assertProperties(
            props, b"\xf8\x00" b"\x00\x00\x00\x03\x01aV" b"\x01p" b"\x01d" b"\x02" b"\x01"
        )

    def test_file_open(self) -> None:
        self.assertMethod(
            AMQP0_9,
            A9.FileOpen(identifier="f1", content_size=1024),
            b"\x00\x46\x00\x28" b"\x02f1" b"\x00\x00\x00\x00\x00\x00\x04\x00",
        )

    def test_file_open_ok(self) -> None:
        self.assertMethod(AMQP0_9, A9.FileOpenOk(staged_size=7),
                          b"\x00\x46\x00\x29" b"\x00\x00\x00\x00\x00\x00\x00\x07")

    def test_file_properties(self) -> None:
        props = A9.FileProperties(filename="f.txt", timestamp=NEW_YEAR_2009)
        # filename is property 6 (bit 9), timestamp property 7 (bit 8)
        self.assertProperties(props, b"\x03\x00" b"\x05f.txt" + NEW_YEAR_2009_WIRE)

    def test_channel_resume_ping_pong_ok(self) -> None:
        self.assertMethod(AMQP0_9, A9.ChannelResume(channel_id=b"abc"),
                          b"\x00\x14\x00\x32" b"\x00\x00\x00\x03abc")
        self.assertMethod(AMQP0_9, A9.ChannelPing(), b"\x00\x14\x00\x3c")
        self.assertMethod(AMQP0_9, A9.ChannelPong(), b"\x00\x14\x00\x46")
        self.assertMethod(AMQP0_9, A9.ChannelOk(), b"\x00\x14\x00\x50")

    def test_basic_deliver(self) -> None:
        self.assertMethod(
            AMQP0_9,
            A9.BasicDeliver(consumer_tag="ct", delivery_tag=2**64 - 1, redelivered=True,
                            exchange="", routing_key="q"),
            _join(b"\x00\x3c\x00\x3c", b"\x02ct", b"\xff" * 8, b"\x01", b"\x00", b"\x01q"),
        )

    def test_amqp0_9_table_letters(self) -> None:
        """0-9's own letters: U signed short, L signed 64, l unsigned 64, s shortstr."""
        headers = {"a": fields.Int16(-2), "b": 2**40, "c": fields.UInt64(2**64 - 1),
                   "d": fields.ShortStr("x")}
        encoded = _join(
            b"\x00\x00\x00\x20",
            b"\x01a" b"U" b"\xff\xfe",
            b"\x01b" b"L" b"\x00\x00\x01\x00\x00\x00\x00\x00",
            b"\x01c" b"l" b"\xff\xff\xff\xff\xff\xff\xff\xff",
            b"\x01d" b"s" b"\x01x",
        )
        props = A9.BasicProperties(headers=headers)
        self.assertProperties(props, b"\x20\x00" + encoded)
        decoded: Any = decode_properties(A9.BasicProperties, b"\x20\x00" + encoded, 0)
        self.assertEqual([type(v) for v in decoded.headers.values()],
                         [fields.Int16, int, fields.UInt64, fields.ShortStr])

    def test_dtx_start(self) -> None:
        self.assertMethod(AMQP0_9, A9.DtxStart(dtx_identifier="x1"),
                          b"\x00\x64\x00\x14" b"\x02x1")
