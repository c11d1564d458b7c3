"""Property-based round trips of every method, property class and table type.

One test per generated method class and per content-property class of every
version: random field values, drawn from the class's own ``FIELDS``, are
encoded, decoded through :func:`~txamqp09.wire.base.decode_method` (or
:func:`~txamqp09.wire.base.decode_properties`) and must come back equal, and
encode again to the same bytes.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Callable

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from tests.wire import strategies as s
from txamqp09.wire import fields
from txamqp09.wire.base import Method, Properties, decode_method, decode_properties
from txamqp09.wire.frames import FrameReader, method_frame
from txamqp09.wire.versions import VERSIONS, ProtocolVersion

_PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {
    "bit": bool,
    "octet": int,
    "short": int,
    "long": int,
    "longlong": int,
    "shortstr": str,
    "longstr": bytes,
    "table": dict,
    "timestamp": datetime,
    "content": fields.Content,
}


def _ident(text: str) -> str:
    return re.sub(r"\W", "_", text)


def _method_test(version: ProtocolVersion, cls: type[Method]) -> Callable[..., None]:
    @s.wire_settings
    @given(method=s.methods(cls, version.tables))
    def test(self: SynchronousTestCase, method: Method) -> None:
        payload = method.encode()
        self.assertIsInstance(payload, bytes)
        self.assertEqual(payload[:4], bytes([cls.CLASS_ID >> 8, cls.CLASS_ID & 255,
                                             cls.METHOD_ID >> 8, cls.METHOD_ID & 255]))
        decoded = decode_method(version.methods, payload)
        self.assertIs(type(decoded), cls)
        self.assertEqual(decoded, method)
        for name, kind in cls.FIELDS:
            self.assertIsInstance(getattr(decoded, name), _PYTHON_TYPES[kind], name)
        self.assertEqual(decoded.encode(), payload)

    test.__doc__ = f"{version.name} {cls.NAME} survives encode and decode."
    return test


def _properties_test(version: ProtocolVersion, cls: type[Properties]) -> Callable[..., None]:
    @s.wire_settings
    @given(props=s.properties(cls, version.tables))
    def test(self: SynchronousTestCase, props: Properties) -> None:
        encoded = props.encode()
        decoded = decode_properties(cls, encoded, 0)
        self.assertIs(type(decoded), cls)
        self.assertEqual(decoded, props)
        for name, kind in cls.FIELDS:
            value = getattr(decoded, name)
            if value is not None:
                self.assertIsInstance(value, _PYTHON_TYPES[kind], name)
        self.assertEqual(decoded.encode(), encoded)

    test.__doc__ = f"{version.name} {cls.NAME} survive encode and decode."
    return test


def _test_case(name: str, tests: dict[str, Callable[..., None]], doc: str) -> type:
    return type(name, (SynchronousTestCase,), {"__doc__": doc, **tests})


for _version in VERSIONS.values():
    _suffix = _ident(_version.name)
    globals()[f"MethodRoundTrip_{_suffix}"] = _test_case(
        f"MethodRoundTrip_{_suffix}",
        {
            f"test_{_ident(cls.NAME)}": _method_test(_version, cls)
            for cls in _version.methods.values()
        },
        f"Every {_version.name} method round-trips.",
    )
    globals()[f"PropertiesRoundTrip_{_suffix}"] = _test_case(
        f"PropertiesRoundTrip_{_suffix}",
        {
            f"test_{_ident(cls.NAME)}": _properties_test(_version, cls)
            for cls in _version.properties.values()
        },
        f"Every {_version.name} content-property class round-trips.",
    )
del _version, _suffix


class GeneratedTestsTests(SynchronousTestCase):
    """The generated test cases above cover every class of every version."""

    def test_everything_covered(self) -> None:
        for version in VERSIONS.values():
            suffix = _ident(version.name)
            methods = globals()[f"MethodRoundTrip_{suffix}"]
            props = globals()[f"PropertiesRoundTrip_{suffix}"]
            for method in version.methods.values():
                self.assertTrue(hasattr(methods, f"test_{_ident(method.NAME)}"), method.NAME)
            for prop in version.properties.values():
                self.assertTrue(hasattr(props, f"test_{_ident(prop.NAME)}"), prop.NAME)
            self.assertEqual(
                len([n for n in vars(methods) if n.startswith("test_")]),
                len(version.methods),
            )


def _same_value(a: Any, b: Any) -> bool:
    """Equality that also holds for NaN and checks nested types strictly."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, dict):
        return (
            isinstance(b, dict)
            and list(a) == list(b)
            and all(_same_value(a[k], b[k]) for k in a)
        )
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same_value, a, b))
    return type(a) is type(b) and a == b


class FieldTableRoundTripTests(SynchronousTestCase):
    """Tables decode to values that encode to the very same bytes."""

    def _round_trip(self, codec: fields.TableCodec, table: dict[str, Any]) -> None:
        encoded = codec.encode_table(table)
        decoded, end = codec.decode_table(encoded, 0)
        self.assertEqual(end, len(encoded))
        self.assertEqual(codec.encode_table(decoded), encoded)
        again, _ = codec.decode_table(codec.encode_table(decoded), 0)
        self.assertTrue(_same_value(again, decoded), (again, decoded))

    @s.wire_settings
    @given(table=s.tables(fields.RABBITMQ, decoded_form=False))
    def test_rabbitmq_bytes_identical(self, table: dict[str, Any]) -> None:
        """0-8/0-9-1 dialect: decode then encode reproduces the bytes."""
        self._round_trip(fields.RABBITMQ, table)

    @s.wire_settings
    @given(table=s.tables(fields.AMQP0_9, decoded_form=False))
    def test_amqp0_9_bytes_identical(self, table: dict[str, Any]) -> None:
        """0-9 dialect: decode then encode reproduces the bytes."""
        self._round_trip(fields.AMQP0_9, table)

    @s.wire_settings
    @given(table=s.tables(fields.RABBITMQ))
    def test_rabbitmq_decoded_form_equal(self, table: dict[str, Any]) -> None:
        """Values in decoded form come back equal and of the same types."""
        decoded, _ = fields.RABBITMQ.decode_table(fields.RABBITMQ.encode_table(table), 0)
        self.assertTrue(_same_value(decoded, table), (decoded, table))

    @s.wire_settings
    @given(table=s.tables(fields.AMQP0_9))
    def test_amqp0_9_decoded_form_equal(self, table: dict[str, Any]) -> None:
        """Values in decoded form come back equal and of the same types (0-9)."""
        decoded, _ = fields.AMQP0_9.decode_table(fields.AMQP0_9.encode_table(table), 0)
        self.assertTrue(_same_value(decoded, table), (decoded, table))

    @s.wire_settings
    @given(
        case=st.sampled_from([fields.RABBITMQ, fields.AMQP0_9]).flatmap(
            lambda codec: st.tuples(
                st.just(codec), st.lists(s.table_values(codec, decoded_form=False), max_size=5)
            )
        )
    )
    def test_arrays(self, case: tuple[fields.TableCodec, list[Any]]) -> None:
        """Arrays round-trip byte for byte in both dialects."""
        codec, array = case
        encoded = codec.encode_array(array)
        decoded, end = codec.decode_array(encoded, 0)
        self.assertEqual(end, len(encoded))
        self.assertEqual(codec.encode_array(decoded), encoded)

    def test_wrappers_keep_their_type(self) -> None:
        """Each typed wrapper decodes to itself, with its own wire letter."""
        rabbit = {
            "b": fields.Int8(-5),
            "B": fields.UInt8(250),
            "s": fields.Int16(-300),
            "u": fields.UInt16(65000),
            "i": fields.UInt32(4_000_000_000),
            "f": fields.Float32(1.5),
            "x": fields.ByteArray(b"\x00\xff"),
        }
        amqp09 = {
            **rabbit,
            "s": fields.ShortStr("short"),
            "U": fields.Int16(-300),
            "l": fields.UInt64(2**64 - 1),
        }
        for codec, table in ((fields.RABBITMQ, rabbit), (fields.AMQP0_9, amqp09)):
            encoded = codec.encode_table(table)
            decoded, _ = codec.decode_table(encoded, 0)
            for letter, value in table.items():
                self.assertIs(type(decoded[letter]), type(value), (codec.name, letter))
                self.assertEqual(decoded[letter], value)
                # The key is one letter, so the type octet follows "\x01<letter>".
                self.assertIn(b"\x01" + letter.encode() + letter.encode(), encoded)

    def test_plain_values_decode_to_plain_types(self) -> None:
        """t I l/L d D S T F A V decode to bool, int, float, Decimal, bytes ..."""
        when = datetime(2020, 5, 17, 12, 0, 1, tzinfo=timezone.utc)
        table = {
            "t": True,
            "I": -7,
            "big": 2**40,
            "d": 0.25,
            "D": Decimal("3.14"),
            "S": "text",
            "T": when,
            "F": {"x": None},
            "A": [1, b"y"],
            "V": None,
        }
        for codec, int64 in ((fields.RABBITMQ, b"l"), (fields.AMQP0_9, b"L")):
            encoded = codec.encode_table(table)
            self.assertIn(b"\x03big" + int64, encoded)
            decoded, _ = codec.decode_table(encoded, 0)
            self.assertEqual(
                decoded,
                {**table, "S": b"text", "F": {"x": None}, "A": [1, b"y"]},
            )
            self.assertIs(type(decoded["big"]), int)
            self.assertIs(type(decoded["S"]), bytes)
            self.assertIs(type(decoded["D"]), Decimal)

    def test_missing_wrapper_falls_back(self) -> None:
        """0-9-1 has no shortstr or uint64 table type: they go as S and I/l."""
        encoded = fields.RABBITMQ.encode_table(
            {"a": fields.ShortStr("hi"), "b": fields.UInt64(5)}
        )
        self.assertEqual(
            encoded, b"\x00\x00\x00\x10" + b"\x01aS\x00\x00\x00\x02hi" + b"\x01bI\x00\x00\x00\x05"
        )


class FrameRoundTripTests(SynchronousTestCase):
    """Method frames built by method_frame come back out of the reader."""

    @s.wire_settings
    @given(
        data=st.data(),
        version=st.sampled_from(list(VERSIONS.values())),
        channel=st.integers(0, 65535),
    )
    def test_method_frame(self, data: st.DataObject, version: ProtocolVersion, channel: int) -> None:
        cls = data.draw(st.sampled_from(list(version.methods.values())))
        method = data.draw(s.methods(cls, version.tables))
        frame = method_frame(channel, method)
        reader = FrameReader(frame_max=len(frame))
        ((frame_type, got_channel, payload),) = list(reader.feed(frame))
        self.assertEqual((frame_type, got_channel), (1, channel))
        self.assertEqual(decode_method(version.methods, payload), method)
        self.assertEqual(reader.buffered, 0)
