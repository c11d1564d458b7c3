"""Hypothesis strategies for the wire layer, derived from generated FIELDS.

Every strategy here produces values in the form the codecs *decode* to, so
that ``decode(encode(x)) == x`` is the property to test: field-table strings
are :class:`bytes` (``S`` decodes to bytes), integers that need a specific
wire type are typed wrappers, and so on. :func:`table_values` with
``decoded_form=False`` also produces values that only re-encode to the same
bytes (``str``, NaN).

The number of examples is modest so that ``trial tests.wire`` stays quick;
set ``TXAMQP09_HYPOTHESIS_EXAMPLES`` to run more.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Callable

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from txamqp09.wire import fields
from txamqp09.wire.base import Method, Properties
from txamqp09.wire.fields import TableCodec

__all__ = [
    "EXAMPLES",
    "wire_settings",
    "shortstrs",
    "timestamps",
    "decimals",
    "typed_wrappers",
    "table_values",
    "tables",
    "FIELD_STRATEGIES",
    "field_strategy",
    "methods",
    "properties",
]

#: Examples per property-based test (each generated method class gets one).
EXAMPLES = int(os.environ.get("TXAMQP09_HYPOTHESIS_EXAMPLES", "12"))

#: Settings shared by the wire tests: no deadline (CI machines are noisy),
#: a small example count, and no health check for slow data generation
#: (nested tables are legitimately slow to build).
wire_settings = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=False,
)

_UTC = timezone.utc


def _clip_utf8(text: str, limit: int = 255) -> str:
    """*text* cut to at most *limit* bytes of UTF-8, on a character boundary."""
    return text.encode("utf-8")[:limit].decode("utf-8", "ignore")


#: shortstr values: text whose UTF-8 fits in 255 bytes.
shortstrs: st.SearchStrategy[str] = st.one_of(
    st.text(max_size=20),
    st.text(min_size=200, max_size=255).map(_clip_utf8),
)

#: timestamp values: aware UTC datetimes with whole seconds.
timestamps: st.SearchStrategy[datetime] = st.datetimes(
    min_value=datetime(1970, 1, 1),
    max_value=datetime(9999, 12, 31, 23, 59, 59),
    timezones=st.just(_UTC),
).map(lambda value: value.replace(microsecond=0))

#: Decimals the ``D`` type holds: scale 0..255, unscaled value in 32 bits.
decimals: st.SearchStrategy[Decimal] = st.builds(
    lambda unscaled, scale: Decimal(unscaled).scaleb(-scale),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(0, 255),
)


def _wrapped(kind: type, strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return strategy.map(kind)


#: Every typed wrapper with values in its range, by wrapper class.
_WRAPPERS: dict[type, st.SearchStrategy[Any]] = {
    fields.Int8: _wrapped(fields.Int8, st.integers(-128, 127)),
    fields.UInt8: _wrapped(fields.UInt8, st.integers(0, 255)),
    fields.Int16: _wrapped(fields.Int16, st.integers(-(2**15), 2**15 - 1)),
    fields.UInt16: _wrapped(fields.UInt16, st.integers(0, 2**16 - 1)),
    fields.UInt32: _wrapped(fields.UInt32, st.integers(0, 2**32 - 1)),
    fields.UInt64: _wrapped(fields.UInt64, st.integers(0, 2**64 - 1)),
    fields.Float32: _wrapped(fields.Float32, st.floats(width=32, allow_nan=False)),
    fields.ShortStr: _wrapped(fields.ShortStr, shortstrs),
    fields.ByteArray: _wrapped(fields.ByteArray, st.binary(max_size=40)),
}

#: The wrappers each dialect has a wire type for (the others fall back to
#: a plain type and so do not come back as themselves).
_DIALECT_WRAPPERS: dict[str, tuple[type, ...]] = {
    fields.RABBITMQ.name: (
        fields.Int8,
        fields.UInt8,
        fields.Int16,
        fields.UInt16,
        fields.UInt32,
        fields.Float32,
        fields.ByteArray,
    ),
    fields.AMQP0_9.name: tuple(_WRAPPERS),
}


def typed_wrappers(codec: TableCodec) -> st.SearchStrategy[Any]:
    """Values of every typed wrapper *codec* writes as its own wire type."""
    return st.one_of([_WRAPPERS[kind] for kind in _DIALECT_WRAPPERS[codec.name]])


def _scalars(codec: TableCodec, decoded_form: bool) -> st.SearchStrategy[Any]:
    plain = [
        st.booleans(),
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=not decoded_form),
        decimals,
        st.binary(max_size=40),
        timestamps,
        st.none(),
        typed_wrappers(codec),
    ]
    if not decoded_form:
        plain.append(st.text(max_size=20))
    return st.one_of(plain)


def table_values(codec: TableCodec, decoded_form: bool = True) -> st.SearchStrategy[Any]:
    """Any field-table value, nested tables and arrays included.

    :param decoded_form: only values that decode to themselves (equal);
        otherwise also ``str`` and NaN, which only re-encode to the same bytes.
    """
    return st.recursive(
        _scalars(codec, decoded_form),
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(shortstrs, children, max_size=4),
        ),
        max_leaves=12,
    )


def tables(codec: TableCodec, decoded_form: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    """Field tables of *codec*'s dialect."""
    return st.dictionaries(shortstrs, table_values(codec, decoded_form), max_size=5)


#: Strategies for the fixed-meaning AMQP types.
FIELD_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {
    "bit": st.booleans(),
    "octet": st.integers(0, 2**8 - 1),
    "short": st.integers(0, 2**16 - 1),
    "long": st.integers(0, 2**32 - 1),
    "longlong": st.integers(0, 2**64 - 1),
    "shortstr": shortstrs,
    "longstr": st.binary(max_size=300),
    "timestamp": timestamps,
    "content": st.builds(fields.Content, st.binary(max_size=300), st.booleans()),
}


def field_strategy(amqp_type: str, codec: TableCodec) -> st.SearchStrategy[Any]:
    """Values of one AMQP field type (``table`` needs the version's dialect)."""
    if amqp_type == "table":
        return tables(codec)
    return FIELD_STRATEGIES[amqp_type]


def methods(cls: type[Method], codec: TableCodec) -> st.SearchStrategy[Method]:
    """Instances of a generated method class with every field drawn."""
    return st.fixed_dictionaries(
        {name: field_strategy(kind, codec) for name, kind in cls.FIELDS}
    ).map(lambda values: cls(**values))


def properties(cls: type[Properties], codec: TableCodec) -> st.SearchStrategy[Properties]:
    """Instances of a generated properties class, each property set or None."""
    return st.fixed_dictionaries(
        {name: st.none() | field_strategy(kind, codec) for name, kind in cls.FIELDS}
    ).map(lambda values: cls(**values))


def one_per(
    items: dict[str, Any], make: Callable[[Any], Callable[..., None]]
) -> dict[str, Callable[..., None]]:
    """Test methods named ``test_<key>``, one per item, for building a TestCase."""
    return {f"test_{key}": make(value) for key, value in items.items()}
