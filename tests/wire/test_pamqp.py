"""Byte-for-byte cross-checks of the 0-9-1 codec against pamqp.

pamqp is an independent AMQP 0-9-1 codec (the one aiormq and aio-pika use).
For every method pamqp knows, the same field values are encoded by both and
the frames compared byte for byte; each side then decodes the other's bytes.
Content headers with basic properties and field tables of every type letter
are checked the same way.

Deliberate divergences, each pinned by a test in :class:`DivergenceTests`:

* ``S`` long strings in tables: pamqp decodes them to :class:`str` when they
  are valid UTF-8 (and to :class:`bytes` otherwise); we always give
  :class:`bytes` (bytes are bytes: no guessing by content).
* ``x`` byte arrays: pamqp gives :class:`bytearray`, we give
  :class:`~txamqp09.wire.fields.ByteArray` (a :class:`bytes`).
* Python :class:`float` in a table: pamqp writes ``f`` (single precision,
  losing digits); we write ``d``. :class:`~txamqp09.wire.fields.Float32`
  writes ``f`` as pamqp does.
* Python :class:`int` in a table: pamqp picks the smallest of ``b s u I i l``;
  we write ``I`` when it fits 32 bits, else ``l``. The typed wrappers give
  pamqp's choice exactly, which is how the cross-checks below line up.
* pamqp never writes ``B`` or ``d`` (it reads both); pamqp sorts table keys,
  we keep the dict's order.
* ``longlong`` method fields: pamqp treats them as signed, so it cannot write
  delivery tags of 2**63 and above; the spec's longlong is unsigned and so is
  ours.
* ``T`` timestamps: pamqp reads values above 2**32 as milliseconds; we read
  seconds, as the spec says.
* Basic properties: pamqp leaves out a shortstr property set to ``""``; we
  send it (with its flag), since ``""`` and "not set" differ on the wire.
* Field names: our 0-9-1 names reserved fields after 0-9 as pamqp does, but
  exchange.declare's ``type`` is pamqp's ``exchange_type``, and
  exchange.bind/unbind's first field (``reserved-1``, no 0-9 name) is
  pamqp's ``ticket``.
"""

from __future__ import annotations

import struct
import warnings
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Callable

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from tests.wire import strategies as s
from txamqp09.wire import _amqp0_9_1 as M
from txamqp09.wire import fields
from txamqp09.wire.base import Method, decode_method
from txamqp09.wire.frames import ContentAssembler, FrameReader, content_frames, method_frame

try:
    import pamqp.commands
    import pamqp.decode
    import pamqp.encode
    import pamqp.frame
    from pamqp.body import ContentBody
    from pamqp.header import ContentHeader
except ImportError:  # pragma: no cover - depends on the environment
    pamqp = None  # type: ignore[assignment]

SKIP = None if pamqp is not None else "pamqp is not installed (pip install pamqp)"
RABBIT = fields.RABBITMQ

#: (our method name, our attribute) -> pamqp's attribute, where they differ.
NAME_MAP = {
    ("exchange.declare", "type"): "exchange_type",
    ("exchange.bind", "reserved_1"): "ticket",
    ("exchange.unbind", "reserved_1"): "ticket",
}
#: Our basic property names -> pamqp's, where they differ.
PROPERTY_MAP = {"type": "message_type"}

_NAME_CHARS = "abcxyzABCXYZ0189-_.:@#,/+ "


def _pamqp_name(cls: type[Method], attr: str) -> str:
    return NAME_MAP.get((cls.NAME, attr), attr)


# -- values in "pamqp space" and their txamqp09 equivalents ------------------

#: Timestamps pamqp reads back as seconds (it reads > 2**32 as milliseconds).
_timestamps = st.datetimes(
    min_value=datetime(1970, 1, 1),
    max_value=datetime(2106, 2, 7),
    timezones=st.just(timezone.utc),
).map(lambda value: value.replace(microsecond=0))


def _pamqp_scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.booleans(),
        st.integers(-(2**63), 2**63 - 1),
        st.floats(width=32, allow_nan=False),
        st.builds(lambda v, sc: Decimal(v).scaleb(-sc), st.integers(-(2**31), 2**31 - 1),
                  st.integers(0, 20)),
        st.text(max_size=20),
        st.binary(max_size=20).map(bytearray),
        _timestamps,
        st.none(),
    )


_keys = st.text(max_size=10)
pamqp_tables: st.SearchStrategy[dict[str, Any]] = st.dictionaries(
    _keys,
    st.recursive(
        _pamqp_scalars(),
        lambda children: st.lists(children, max_size=4)
        | st.dictionaries(_keys, children, max_size=4),
        max_leaves=10,
    ),
    max_size=5,
)


def _int_wrapper(value: int) -> Any:
    """Our typed form of an int, on the wire as pamqp's table_integer writes it."""
    if -128 <= value <= 127:
        return fields.Int8(value)
    if -32768 <= value <= 32767:
        return fields.Int16(value)
    if 0 <= value <= 65535:
        return fields.UInt16(value)
    if -(2**31) <= value < 2**31:
        return value  # plain int: I
    if 0 <= value < 2**32:
        return fields.UInt32(value)
    return value  # plain int: l


def to_ours(value: Any, decoded: bool = False) -> Any:
    """A pamqp table value as the value we encode to the same bytes.

    :param decoded: give what our decoder returns instead (``S`` as bytes).
    """
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return _int_wrapper(value)
    if isinstance(value, float):
        return fields.Float32(value)
    if isinstance(value, str):
        return value.encode("utf-8") if decoded else value
    if isinstance(value, bytearray):
        return fields.ByteArray(bytes(value))
    if isinstance(value, dict):
        return {k: to_ours(value[k], decoded) for k in sorted(value)}
    if isinstance(value, list):
        return [to_ours(v, decoded) for v in value]
    return value  # Decimal, datetime


def _same(a: Any, b: Any) -> bool:
    """Equal, with the same types all the way down."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and a == b


def _pamqp_value(kind: str, name: str) -> st.SearchStrategy[Any]:
    """pamqp-valid values of one method field."""
    if name == "ticket":
        return st.just(0)
    if name in ("exchange", "destination", "source"):
        return st.text(_NAME_CHARS, max_size=127)
    if name == "queue":
        return st.text(_NAME_CHARS, max_size=255)
    fixed = {"capabilities": "", "insist": False, "known_hosts": "", "out_of_band": "0",
             "channel_id": "0", "cluster_id": ""}
    if name in fixed:
        return st.just(fixed[name])
    if name == "virtual_host":
        return st.text(max_size=60)
    return {
        "bit": st.booleans(),
        "octet": st.integers(0, 255),
        "short": st.integers(0, 65535),
        "long": st.integers(0, 2**32 - 1),
        "longlong": st.integers(0, 2**63 - 1),
        "shortstr": s.shortstrs,
        "longstr": st.text(max_size=100),
        "table": pamqp_tables,
    }[kind]


def _ours_value(kind: str, value: Any, decoded: bool = False) -> Any:
    if kind == "longstr":
        return value.encode("utf-8")
    if kind == "table":
        return to_ours(value, decoded)
    return value


# pamqp's own annotations are unions of every frame and value type; these
# wrappers give the tests plain Any to work with.


def _unmarshal(data: bytes) -> tuple[int, int, Any]:
    """pamqp.frame.unmarshal: bytes consumed, channel, frame object."""
    return pamqp.frame.unmarshal(data)


def _read_table(data: bytes) -> tuple[int, Any]:
    """pamqp.decode.field_table: bytes consumed and the table."""
    return pamqp.decode.field_table(data)


def _write_table(table: Any) -> bytes:
    """pamqp.encode.field_table."""
    return pamqp.encode.field_table(table)


def _pamqp_command(cls: type[Method]) -> Any:
    return pamqp.commands.INDEX_MAPPING[(cls.CLASS_ID << 16) | cls.METHOD_ID]


def _cross_check(cls: type[Method]) -> Callable[..., None]:
    values = st.fixed_dictionaries(
        {attr: _pamqp_value(kind, _pamqp_name(cls, attr)) for attr, kind in cls.FIELDS}
    )

    @s.wire_settings
    @given(values=values, channel=st.integers(0, 65535))
    def test(self: SynchronousTestCase, values: dict[str, Any], channel: int) -> None:
        kinds = dict(cls.FIELDS)
        command = _pamqp_command(cls)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            theirs = command(**{_pamqp_name(cls, a): v for a, v in values.items()})
            ours = cls(**{a: _ours_value(kinds[a], v) for a, v in values.items()})
            their_bytes = pamqp.frame.marshal(theirs, channel)
        our_bytes = method_frame(channel, ours)
        self.assertEqual(our_bytes, their_bytes)

        # Ours decodes pamqp's frame.
        ((_, got_channel, payload),) = list(FrameReader(len(their_bytes)).feed(their_bytes))
        self.assertEqual(got_channel, channel)
        decoded = decode_method(M.METHODS, payload)
        for attr, value in values.items():
            expected = _ours_value(kinds[attr], value, decoded=True)
            self.assertTrue(_same(getattr(decoded, attr), expected), (attr, expected))

        # pamqp decodes ours.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            consumed, got_channel, back = _unmarshal(our_bytes)
        self.assertEqual((consumed, got_channel, type(back)), (len(our_bytes), channel, command))
        for attr, value in values.items():
            self.assertEqual(getattr(back, _pamqp_name(cls, attr)), value, attr)

    test.__doc__ = f"{cls.NAME}: same bytes as pamqp, and each decodes the other's."
    return test


class MethodSetTests(SynchronousTestCase):
    """pamqp and we know the same 0-9-1 methods, with the same field layouts."""

    skip = SKIP

    def test_same_methods(self) -> None:
        self.assertEqual(set(pamqp.commands.INDEX_MAPPING), set(M.METHODS))

    def test_same_fields(self) -> None:
        mapping: dict[int, Any] = pamqp.commands.INDEX_MAPPING
        for index, command in mapping.items():
            cls = M.METHODS[index]
            theirs = [(a, command.amqp_type(a)) for a in command.attributes()]
            ours = [(_pamqp_name(cls, a), k) for a, k in cls.FIELDS]
            self.assertEqual(ours, theirs, cls.NAME)
            # pamqp's "synchronous" means "has a reply"; ours is the spec's flag.
            self.assertEqual(bool(cls.RESPONSES), command.synchronous, cls.NAME)

    def test_name_map_is_needed(self) -> None:
        """Every entry of NAME_MAP maps a field that really differs."""
        for (name, attr), theirs in NAME_MAP.items():
            cls = M.BY_NAME[name]
            self.assertIn(attr, dict(cls.FIELDS))
            self.assertIn(theirs, _pamqp_command(cls).attributes())


if pamqp is not None:
    MethodCrossChecks = type(
        "MethodCrossChecks",
        (SynchronousTestCase,),
        {
            "__doc__": "Every 0-9-1 method pamqp knows, in both directions.",
            **{
                f"test_{cls.NAME.replace('.', '_').replace('-', '_')}": _cross_check(cls)
                for cls in M.METHODS.values()
                if (cls.CLASS_ID << 16) | cls.METHOD_ID in pamqp.commands.INDEX_MAPPING
            },
        },
    )


# -- content header and body ---------------------------------------------------


def _pamqp_property(kind: str, name: str) -> st.SearchStrategy[Any]:
    if name == "cluster_id":
        return st.none()  # pamqp insists it is empty
    if name == "delivery_mode":
        return st.none() | st.sampled_from([1, 2])
    if kind == "shortstr":
        return st.none() | s.shortstrs.filter(bool)  # pamqp drops ""
    if kind == "timestamp":
        return st.none() | _timestamps
    if kind == "table":
        return st.none() | pamqp_tables
    return st.none() | _pamqp_value(kind, name)


class ContentCrossChecks(SynchronousTestCase):
    """basic.publish/deliver with a content header and body, against pamqp."""

    skip = SKIP

    @s.wire_settings
    @given(
        values=st.fixed_dictionaries(
            {a: _pamqp_property(k, a) for a, k in M.BasicProperties.FIELDS}
        ),
        body=st.binary(max_size=3000),
    )
    def test_header_and_body(self, values: dict[str, Any], body: bytes) -> None:
        kinds = dict(M.BasicProperties.FIELDS)
        theirs = pamqp.commands.Basic.Properties(
            **{PROPERTY_MAP.get(a, a): v for a, v in values.items() if v is not None}
        )
        ours = M.BasicProperties(
            **{a: None if v is None else _ours_value(kinds[a], v) for a, v in values.items()}
        )
        method = M.BasicDeliver(consumer_tag="ctag", delivery_tag=42, routing_key="rk")
        frames = content_frames(5, method, ours, body, 0)

        their_frames = [
            pamqp.frame.marshal(pamqp.commands.Basic.Deliver("ctag", 42, False, "", "rk"), 5),
            pamqp.frame.marshal(ContentHeader(0, len(body), theirs), 5),
        ]
        if body:
            their_frames.append(pamqp.frame.marshal(ContentBody(body), 5))
        self.assertEqual(frames, b"".join(their_frames))

        # Ours reads pamqp's frames; pamqp reads ours.
        reader = FrameReader(1 << 20)
        assembler = ContentAssembler(M.PROPERTIES, 1 << 20)
        command = None
        for kind, _, payload in reader.feed(b"".join(their_frames)):
            if kind == 1:
                command = assembler.method(decode_method(M.METHODS, payload))
            elif kind == 2:
                command = assembler.header(payload)
            else:
                command = assembler.body(payload)
        assert command is not None
        self.assertEqual(command.body, body)
        props = command.properties
        for attr, value in values.items():
            expected = None if value is None else _ours_value(kinds[attr], value, True)
            self.assertTrue(_same(getattr(props, attr), expected), attr)

        pos = len(their_frames[0])
        consumed, _, header = _unmarshal(frames[pos:])
        self.assertEqual(header.body_size, len(body))
        unset = pamqp.commands.Basic.Properties()
        for attr, value in values.items():
            name = PROPERTY_MAP.get(attr, attr)
            expected = getattr(unset, name) if value is None else value  # cluster_id: ""
            self.assertEqual(getattr(header.properties, name), expected, attr)
        if body:
            _, _, their_body = _unmarshal(frames[pos + consumed:])
            self.assertEqual(their_body.value, body)


# -- field tables, one type letter at a time -------------------------------------

#: letter -> (wire value after the letter, our value, pamqp's value, pamqp writes it)
LETTERS: dict[str, tuple[bytes, Any, Any, bool]] = {
    "t": (b"\x01", True, True, True),
    "b": (b"\xfe", fields.Int8(-2), -2, True),
    "B": (b"\xfe", fields.UInt8(254), 254, False),
    "s": (struct.pack(">h", -300), fields.Int16(-300), -300, True),
    "u": (struct.pack(">H", 40000), fields.UInt16(40000), 40000, True),
    "I": (struct.pack(">i", -70000), -70000, -70000, True),
    "i": (struct.pack(">I", 3_000_000_000), fields.UInt32(3_000_000_000), 3_000_000_000, True),
    "l": (struct.pack(">q", 2**40), 2**40, 2**40, True),
    "f": (struct.pack(">f", 1.5), fields.Float32(1.5), 1.5, True),
    "d": (struct.pack(">d", 0.1), 0.1, 0.1, False),
    "D": (b"\x02" + struct.pack(">i", 314), Decimal("3.14"), Decimal("3.14"), True),
    "S": (b"\x00\x00\x00\x03abc", b"abc", "abc", True),
    "x": (b"\x00\x00\x00\x02\x00\xff", fields.ByteArray(b"\x00\xff"), bytearray(b"\x00\xff"),
          True),
    "A": (b"\x00\x00\x00\x08" b"b\x01" b"S\x00\x00\x00\x01z", [fields.Int8(1), b"z"], [1, "z"],
          True),
    "T": (b"\x00\x00\x00\x00\x49\x5c\x07\x80",
          datetime(2009, 1, 1, tzinfo=timezone.utc), datetime(2009, 1, 1, tzinfo=timezone.utc),
          True),
    "F": (b"\x00\x00\x00\x04" b"\x01kt\x01", {"k": True}, {"k": True}, True),
    "V": (b"", None, None, True),
}


class TableLetterTests(SynchronousTestCase):
    """Each of t b B s u I i l f d D S x A T F V, read and written by both."""

    skip = SKIP

    def _table(self, letter: str) -> bytes:
        entry = b"\x01k" + letter.encode() + LETTERS[letter][0]
        return struct.pack(">I", len(entry)) + entry

    def test_all_letters_listed(self) -> None:
        self.assertEqual("".join(LETTERS), "tbBsuIilfdDSxATFV")

    def test_we_read_their_letters(self) -> None:
        for letter, (_, ours, _, _) in LETTERS.items():
            table, end = RABBIT.decode_table(self._table(letter), 0)
            self.assertEqual(end, len(self._table(letter)))
            self.assertTrue(_same(table, {"k": ours}), (letter, table))

    def test_they_read_our_letters(self) -> None:
        for letter, (_, ours, theirs, _) in LETTERS.items():
            encoded = RABBIT.encode_table({"k": ours})
            self.assertEqual(encoded, self._table(letter), letter)
            consumed, table = _read_table(encoded)
            self.assertEqual(consumed, len(encoded))
            self.assertTrue(_same(table, {"k": theirs}), (letter, table))

    def test_they_write_our_letters(self) -> None:
        for letter, (_, ours, theirs, writes) in LETTERS.items():
            if writes:
                self.assertEqual(_write_table({"k": theirs}), self._table(letter),
                                 letter)

    @s.wire_settings
    @given(table=pamqp_tables)
    def test_random_tables(self, table: dict[str, Any]) -> None:
        """Any table pamqp writes, we write identically and both read back."""
        theirs = _write_table(table)
        self.assertEqual(RABBIT.encode_table(to_ours(table)), theirs)
        decoded, _ = RABBIT.decode_table(theirs, 0)
        self.assertTrue(_same(decoded, to_ours(table, decoded=True)))
        _, back = _read_table(theirs)
        self.assertEqual(back, table)


class DivergenceTests(SynchronousTestCase):
    """The documented differences from pamqp, pinned so a change is noticed."""

    skip = SKIP

    def test_longstr_type(self) -> None:
        wire = struct.pack(">I", 8) + b"\x01kS\x00\x00\x00\x01a"
        self.assertEqual(_read_table(wire)[1], {"k": "a"})
        self.assertEqual(RABBIT.decode_table(wire, 0)[0], {"k": b"a"})
        bad = struct.pack(">I", 8) + b"\x01kS\x00\x00\x00\x01\xff"
        self.assertEqual(_read_table(bad)[1], {"k": b"\xff"})
        self.assertEqual(RABBIT.decode_table(bad, 0)[0], {"k": b"\xff"})

    def test_float_width(self) -> None:
        self.assertEqual(_write_table({"k": 0.1})[6:7], b"f")
        self.assertEqual(RABBIT.encode_table({"k": 0.1})[6:7], b"d")

    def test_int_width(self) -> None:
        self.assertEqual(_write_table({"k": 1})[6:7], b"b")
        self.assertEqual(RABBIT.encode_table({"k": 1})[6:7], b"I")

    def test_key_order(self) -> None:
        table = {"b": None, "a": None}
        self.assertEqual(_write_table(table), b"\x00\x00\x00\x06\x01aV\x01bV")
        self.assertEqual(RABBIT.encode_table(table), b"\x00\x00\x00\x06\x01bV\x01aV")

    def test_unsigned_longlong(self) -> None:
        ours = M.BasicAck(delivery_tag=2**64 - 1)
        self.assertEqual(decode_method(M.METHODS, ours.encode()), ours)
        self.assertRaises(TypeError, pamqp.commands.Basic.Ack(delivery_tag=2**64 - 1).marshal)

    def test_timestamp_milliseconds(self) -> None:
        wire = struct.pack(">I", 11) + b"\x01kT" + struct.pack(">Q", 2**33)
        ours, _ = RABBIT.decode_table(wire, 0)
        self.assertEqual(ours["k"].timestamp(), 2**33)
        self.assertEqual(_read_table(wire)[1]["k"].timestamp(), 2**33 / 1000)

    def test_empty_shortstr_property(self) -> None:
        self.assertEqual(M.BasicProperties(content_type="").encode(), b"\x80\x00\x00")
        self.assertEqual(pamqp.commands.Basic.Properties(content_type="").marshal(), b"\x00\x00")
