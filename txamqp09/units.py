"""Quantities written the way people write them: sizes with units.

:func:`parse_size` reads the sizes of command-line options and
configuration (``--memory-budget 256MiB``)::

    >>> parse_size("256MiB")
    268435456
    >>> parse_size("512MB")
    512000000
    >>> parse_size("1.5GiB")
    1610612736
    >>> parse_size("4096")
    4096

Binary units (``KiB``, ``MiB``, ``GiB``, ``TiB``) are powers of 1024;
decimal ones (``kB``, ``MB``, ``GB``, ``TB``) powers of 1000, as in the
SI; a bare number or ``B`` is bytes. Units are case-insensitive and may
follow the number after a space. A single letter (``256M``) is refused:
it does not say which of the two it means.

As a ``twisted.python.usage`` coercer it turns a bad value into a usage
error naming the option::

    optParameters = [["memory-budget", None, DEFAULT, "Bytes of ...", parse_size]]
"""

from __future__ import annotations

import re

__all__ = ["parse_size", "format_size"]

_UNITS: dict[str, int] = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}

_SIZE = re.compile(r"\s*(?P<number>\d+(?:\.\d+)?|\.\d+)\s*(?P<unit>[a-zA-Z]*)\s*")

_ACCEPTED = "a number of bytes, optionally with a unit: B, kB, MB, GB, TB, KiB, MiB, GiB, TiB (e.g. 256MiB)"


def parse_size(text: str) -> int:
    """The number of bytes *text* (``"256MiB"``, ``"512MB"``, ``"4096"``) says.

    :raises ValueError: *text* is not a size (its message says what is
        accepted); a fraction of a byte is rounded down.
    """
    match = _SIZE.fullmatch(text)
    unit = match.group("unit").lower() if match is not None else None
    if match is None or unit not in _UNITS:
        raise ValueError(f"{text!r} is not a size: expected {_ACCEPTED}")
    number = match.group("number")
    if "." not in number:
        return int(number) * _UNITS[unit]
    whole, _, fraction = number.partition(".")
    scale = 10 ** len(fraction)
    return (int(whole or "0") * scale + int(fraction)) * _UNITS[unit] // scale


parse_size.coerceDoc = "A size: bytes, or with a unit such as 512MB or 256MiB."  # type: ignore[attr-defined]


def format_size(size: int) -> str:
    """*size* bytes in the largest binary unit that divides it (``268435456`` -> ``"256MiB"``)."""
    for unit in ("TiB", "GiB", "MiB", "KiB"):
        factor = _UNITS[unit.lower()]
        if size and size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}B"
