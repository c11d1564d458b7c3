"""Erlang's portable term hash, for names RabbitMQ derives from it.

RabbitMQ's management API names a binding with arguments by its routing
key and ``erlang:phash2(Arguments, 1 bsl 32)`` of the arguments as an
Erlang term (``rabbit_mgmt_format:args_hash``). :func:`phash2` computes
that hash for the terms an AMQP field table becomes: atoms
(:class:`Atom`), binaries (:class:`bytes`), integers, floats, tuples and
lists, following the algorithm ERTS documents as fixed across releases
(Bob Jenkins' mix over 32-bit words, atoms hashed with hashpjw).
:func:`amqp_table_term` turns a field table into the term RabbitMQ holds
for it (entries sorted by key, each ``{Key, Type, Value}``).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any, Union

from txamqp09.wire.fields import ByteArray, Float32, Int8, Int16, ShortStr, UInt8, UInt16, UInt32, UInt64

__all__ = ["Atom", "Term", "amqp_table_term", "phash2"]

_MASK = 0xFFFFFFFF
_HCONST = 0x9E3779B9
_HCONST_2 = 0x3C6EF372
_HCONST_3 = 0xDAA66D2B
_HCONST_4 = 0x78DDE6E4
_HCONST_9 = 0x8FF34781
_HCONST_10 = 0x2E2AC13A
_HCONST_11 = 0xCC623AF3
_HCONST_12 = 0x6A99B4AC
_HCONST_13 = 0x08D12E65
#: What an empty list hashes to at the start of a term.
_NIL_FIRST = 3468870702
#: The tag ERTS mixes in for an empty list inside a term.
_NIL_TAG = 2


class Atom(str):
    """An Erlang atom (its name)."""


#: An Erlang term as this module models it.
Term = Union[Atom, bytes, int, float, tuple[Any, ...], list[Any]]


def _mix(a: int, b: int, c: int) -> int:
    """Bob Jenkins' 96-bit mix; the new *c*."""
    return _mix_all(a, b, c)[2]


def _words(first: int, second: int, constant: int, hash_: int) -> int:
    """Mix two 32-bit words offset by *constant* into *hash_*."""
    return _mix((constant + first) & _MASK, (constant + second) & _MASK, hash_)


def _block(data: bytes, initial: int) -> int:
    """Jenkins' hash of a byte block (little-endian words), seeded with *initial*."""
    a = b = _HCONST
    c = initial
    full = len(data) - len(data) % 12
    for start in range(0, full, 12):
        x, y, z = struct.unpack_from("<III", data, start)
        a, b, c = (a + x) & _MASK, (b + y) & _MASK, (c + z) & _MASK
        a, b, c = _mix_all(a, b, c)
    tail = data[full:] + bytes(11 - (len(data) - full))
    c = (c + len(data)) & _MASK
    c = (c + (tail[8] << 8) + (tail[9] << 16) + (tail[10] << 24)) & _MASK
    b = (b + int.from_bytes(tail[4:8], "little")) & _MASK
    a = (a + int.from_bytes(tail[0:4], "little")) & _MASK
    return _mix(a, b, c)


def _mix_all(a: int, b: int, c: int) -> tuple[int, int, int]:
    """Jenkins' mix, keeping all three words (the block loop needs them)."""
    a = (a - b - c) & _MASK ^ (c >> 13)
    b = (b - c - a) & _MASK ^ (a << 8) & _MASK
    c = (c - a - b) & _MASK ^ (b >> 13)
    a = (a - b - c) & _MASK ^ (c >> 12)
    b = (b - c - a) & _MASK ^ (a << 16) & _MASK
    c = (c - a - b) & _MASK ^ (b >> 5)
    a = (a - b - c) & _MASK ^ (c >> 3)
    b = (b - c - a) & _MASK ^ (a << 10) & _MASK
    c = (c - a - b) & _MASK ^ (b >> 15)
    return a, b, c


def _atom_hash(name: str) -> int:
    """ERTS's atom hash: hashpjw over the UTF-8 name (two-byte Latin-1 letters as one)."""
    data = name.encode("utf-8")
    value, index = 0, 0
    while index < len(data):
        byte = data[index]
        index += 1
        if index < len(data) and byte & 0xFE == 0xC2 and data[index] & 0xC0 == 0x80:
            byte = ((byte << 6) | (data[index] & 0x3F)) & 0xFF
            index += 1
        value = ((value << 4) + byte) & _MASK
        high = value & 0xF0000000
        if high:
            value ^= high >> 24
            value ^= high
    return value


def _integer(value: int, hash_: int) -> int:
    if -(1 << 27) <= value < (1 << 27):
        if value < 0:
            hash_ = _words(-value, 0, _HCONST, hash_)
        return _words(value & _MASK, 0, _HCONST, hash_)
    constant = _HCONST_10 if value < 0 else _HCONST_11
    magnitude = abs(value)
    while True:
        digit = magnitude & 0xFFFFFFFFFFFFFFFF
        hash_ = _words(digit & _MASK, digit >> 32, constant, hash_)
        magnitude >>= 64
        if not magnitude:
            return hash_


def phash2(term: Term) -> int:
    """``erlang:phash2(Term, 1 bsl 32)``."""
    hash_ = 0
    stack: list[Any] = [term]
    while stack:
        term = stack.pop()
        if isinstance(term, Atom):
            atom = _atom_hash(term)
            hash_ = atom if hash_ == 0 else _words(atom, 0, _HCONST_3, hash_)
        elif isinstance(term, bool):
            raise TypeError("Erlang has no booleans: use Atom('true') or Atom('false')")
        elif isinstance(term, int):
            hash_ = _integer(term, hash_)
        elif isinstance(term, float):
            high, low = struct.unpack(">II", struct.pack(">d", term if term != 0.0 else 0.0))
            hash_ = _words(high, low, _HCONST_12, hash_)
        elif isinstance(term, bytes):
            constant = (_HCONST_13 + hash_) & _MASK
            hash_ = _block(term, constant) if term else constant
        elif isinstance(term, tuple):
            hash_ = _words(len(term), 0, _HCONST_9, hash_)
            stack.extend(reversed(term))
        elif isinstance(term, list):
            if not term:
                hash_ = _NIL_FIRST if hash_ == 0 else _words(_NIL_TAG, 0, _HCONST_2, hash_)
                continue
            hash_ = _list(term, hash_, stack)
        else:
            raise TypeError(f"no Erlang term for {type(term).__name__}")
    return hash_


def _list(items: list[Any], hash_: int, stack: list[Any]) -> int:
    """Hash the leading bytes of a list as ERTS packs them, and push the rest."""
    packed = count = 0
    for index, item in enumerate(items):
        if isinstance(item, int) and not isinstance(item, bool) and 0 <= item <= 255:
            packed = ((packed << 8) + item) & _MASK
            if count == 3:
                hash_ = _words(packed, 0, _HCONST_4, hash_)
                packed = count = 0
            else:
                count += 1
            continue
        if count:
            hash_ = _words(packed, 0, _HCONST_4, hash_)
        stack.append(items[index + 1:])
        stack.append(item)
        return hash_
    if count:
        hash_ = _words(packed, 0, _HCONST_4, hash_)
    stack.append([])
    return hash_


def _typed(value: Any) -> tuple[Atom, Term]:
    """The type atom and value RabbitMQ's table parser gives a field value."""
    kinds: Sequence[tuple[type[Any], str]] = (
        (Int8, "byte"), (UInt8, "unsignedbyte"), (Int16, "short"), (UInt16, "unsignedshort"),
        (UInt32, "unsignedint"), (UInt64, "long"), (Float32, "float"), (ByteArray, "binary"),
    )
    for kind, name in kinds:
        if isinstance(value, kind):
            return Atom(name), bytes(value) if isinstance(value, bytes) else value
    if isinstance(value, bool):
        return Atom("bool"), Atom("true" if value else "false")
    if isinstance(value, int):
        return (Atom("signedint") if -(1 << 31) <= value < (1 << 31) else Atom("long")), value
    if isinstance(value, (str, ShortStr)):
        return Atom("longstr"), value.encode("utf-8")
    if isinstance(value, (bytes, bytearray)):
        return Atom("longstr"), bytes(value)
    if isinstance(value, float):
        return Atom("double"), value
    if isinstance(value, Mapping):
        return Atom("table"), [(key.encode("utf-8"),) + _typed(item) for key, item in value.items()]
    if isinstance(value, (list, tuple)):
        return Atom("array"), [_typed(item) for item in value]
    if isinstance(value, datetime):
        return Atom("timestamp"), int(value.timestamp())
    if isinstance(value, Decimal):
        sign, digits, exponent = value.as_tuple()
        unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
        return Atom("decimal"), (max(0, -int(exponent)), unscaled)
    if value is None:
        return Atom("void"), Atom("undefined")
    raise TypeError(f"no AMQP field type for {type(value).__name__}")


def amqp_table_term(table: Mapping[str, Any]) -> list[tuple[bytes, Atom, Term]]:
    """The term RabbitMQ keeps for a binding's arguments: ``{Key, Type, Value}``
    entries sorted by key (``rabbit_misc:sort_field_table``)."""
    return sorted(((key.encode("utf-8"),) + _typed(value) for key, value in table.items()), key=lambda entry: entry[0])
