"""The memory alarm: resident memory against a high watermark, as RabbitMQ's.

:class:`MemoryMonitor` compares what the process really holds (its resident
set, read from ``/proc/self/statm``) with the watermark a few times a
second, and again as soon as connections have buffered a few more MiB of
unfinished messages since the last look (:meth:`MemoryMonitor.buffered`),
so that a fast publisher cannot run far past the watermark between two
looks. Above the watermark it raises the ``memory`` alarm of
:class:`~txamqp09.broker.alarms.ResourceAlarms` (publishers are blocked);
below it, it clears it.

The watermark is a fraction of the machine's memory (RabbitMQ's
``vm_memory_high_watermark.relative``, default 0.4) or an absolute size
(``vm_memory_high_watermark.absolute``): :func:`parse_watermark` reads
either.

:func:`release_memory` hands the C allocator's free memory back to the
operating system (glibc's ``malloc_trim``): the broker calls it after large
frees, such as the unfinished messages of closed connections. The monitor
also asks the allocator, once a second, how much it holds free
(:func:`allocator_free`, glibc's ``mallinfo2``): bodies of more than 512
bytes come from the C allocator, which keeps what a drained backlog freed
until it is trimmed, so the process would otherwise stay at its peak. It
trims once the free memory has grown by :data:`RELEASE_THRESHOLD` and
stopped growing (a drain is over), so that a long drain costs one trim.
Python's own allocator returns its arenas once they are empty.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Callable, Optional

from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.internet.task import LoopingCall
from txamqp09.broker import oplog
from txamqp09.broker.alarms import ResourceAlarms
from txamqp09.units import parse_size

__all__ = [
    "DEFAULT_MEMORY_HIGH_WATERMARK",
    "MemoryMonitor",
    "RELEASE_THRESHOLD",
    "allocator_free",
    "parse_watermark",
    "release_memory",
    "tune_allocator",
    "resident_memory",
    "total_memory",
]

#: RabbitMQ's default: 40 % of the machine's memory.
DEFAULT_MEMORY_HIGH_WATERMARK = 0.4
#: Bytes buffered since the last look that make the monitor look again at once.
LOOK_AGAIN_AFTER = 4 * 1024 * 1024

#: Free bytes the C allocator may gain before the monitor trims them.
RELEASE_THRESHOLD = 8 * 1024 * 1024
#: Seconds between two questions to the C allocator about its free memory.
FREE_LOOK_INTERVAL = 1.0

_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def total_memory() -> int:
    """Bytes of physical memory of the machine."""
    return int(os.sysconf("SC_PHYS_PAGES")) * _PAGE_SIZE


def resident_memory() -> Optional[int]:
    """Bytes of this process's resident set, or None where it cannot be read
    (a system without ``/proc``)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE_SIZE
    except OSError:
        return None


def parse_watermark(text: str) -> float | int:
    """``--memory-high-watermark``, read by RabbitMQ's rules: a fraction of
    the machine's memory from 0 to 1 (``0.4``, ``vm_memory_high_watermark.relative``),
    or an absolute size: a whole number of bytes or a number with a unit
    (``768MiB``, ``2GB``, ``vm_memory_high_watermark.absolute``).

    :raises ValueError: *text* is neither; a number above 1 with a decimal
        point (``1.5``), which RabbitMQ refuses as a fraction, is refused
        too rather than read as bytes.
    """
    try:
        number = float(text)
    except ValueError:
        number = None
    if number is not None and 0 <= number <= 1:
        return number
    if number is not None and not text.strip().isdigit():
        raise ValueError(f"{text!r} is above 1: {_WATERMARK_FORMS}")
    try:
        return parse_size(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a watermark: {_WATERMARK_FORMS}") from None


_WATERMARK_FORMS = (
    "give a fraction of the machine's memory from 0 to 1 (e.g. 0.4) or a size "
    "(a whole number of bytes, or a number with a unit such as 768MiB or 2GB)"
)

parse_watermark.coerceDoc = (  # type: ignore[attr-defined]
    "A fraction of the machine's memory (0 to 1, e.g. 0.4) or a size (768MiB)."
)


def watermark_bytes(watermark: float | int, total: Callable[[], int] = total_memory) -> int:
    """The watermark *watermark* (a fraction of *total* memory, or bytes) in bytes."""
    if isinstance(watermark, float):
        return int(watermark * total())
    return watermark


_trim: Optional[Callable[[int], int]] = None


def _load_trim() -> Optional[Callable[[int], int]]:
    """glibc's ``malloc_trim``, or None on a C library without it."""
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


class _MallocInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2``."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
            "keepcost",
        )
    ]


_mallinfo2: Optional[Callable[[], _MallocInfo2]] = None


def _load_mallinfo2() -> Callable[[], Optional[_MallocInfo2]]:
    """glibc's ``mallinfo2`` (2.33 and later), or a function returning None."""
    try:
        function = ctypes.CDLL(ctypes.util.find_library("c")).mallinfo2
    except (OSError, AttributeError):
        return lambda: None
    function.restype = _MallocInfo2
    function.argtypes = []
    return function  # type: ignore[no-any-return]


def allocator_free() -> Optional[int]:
    """Bytes the C allocator holds free for later allocations (in every
    arena), or None where the C library cannot tell (glibc before 2.33, other
    C libraries)."""
    global _mallinfo2
    if _mallinfo2 is None:
        _mallinfo2 = _load_mallinfo2()  # type: ignore[assignment]
    assert _mallinfo2 is not None
    info = _mallinfo2()
    return None if info is None else int(info.fordblks)


#: mallopt's parameters: the size from which an allocation gets a map of
#: its own, and the free top of the heap that is given back at once.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: Allocations from this size get a map of their own (glibc's largest).
MMAP_THRESHOLD = 32 * 1024 * 1024


def tune_allocator() -> bool:
    """Have the C allocator keep and reuse the memory of large messages;
    whether the C library could (glibc can).

    glibc gives every allocation from 128 KiB on a map of its own (raising
    that bound as such maps are freed) and gives the heap's free top back
    to the system as soon as it exceeds twice the bound: each 1 MiB body
    then costs fresh pages, faulted in and zeroed, several times over. With
    a fixed bound of :data:`MMAP_THRESHOLD` and no automatic trim, freed
    memory is reused; :class:`MemoryMonitor` trims it once it stops being
    reused.
    """
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c")).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))


def release_memory() -> bool:
    """Give the C allocator's free memory back to the operating system; whether
    the C library could (glibc can)."""
    global _trim
    if _trim is None:
        _trim = _load_trim() or (lambda pad: 0)
    return bool(_trim(0))


class MemoryMonitor:
    """Raises and clears the memory alarm as the process's memory crosses the watermark.

    :param alarms: the broker's alarms.
    :param clock: for the periodic looks.
    :param watermark: the high watermark in bytes.
    :param probe: returns the bytes the process holds (resident memory by
        default; None: unknown, and the alarm is left as it is).
    :param interval: seconds between two periodic looks.
    :param free_probe: returns the bytes the C allocator holds free (None:
        unknown); when they have grown by :data:`RELEASE_THRESHOLD` since the
        last trim and no more since the last look, the monitor trims them
        (*release*).
    :param release: hands the allocator's free memory back to the system.
    """

    def __init__(
        self,
        alarms: ResourceAlarms,
        clock: IReactorTime,
        watermark: int,
        probe: Callable[[], Optional[int]] = resident_memory,
        interval: float = 0.25,
        free_probe: Callable[[], Optional[int]] = allocator_free,
        release: Callable[[], object] = release_memory,
    ) -> None:
        self.alarms = alarms
        self.clock = clock
        self.watermark = watermark
        self.probe = probe
        self.interval = interval
        #: What the probe said at the last look.
        self.used: Optional[int] = None
        self._buffered = 0
        self._loop = LoopingCall(self.check)
        self._loop.clock = clock
        self._release_call: Optional[IDelayedCall] = None
        self._free_probe = free_probe
        self._release_memory = release
        #: What the allocator held free after the last trim (or the least since).
        self._free_kept = 0
        #: What it held free at the last look.
        self._free_seen = 0
        self._next_free_look = 0.0

    def start(self) -> None:
        """Tune the C allocator (:func:`tune_allocator`); look now and every
        :attr:`interval` seconds."""
        if not self._loop.running:
            tune_allocator()
            self._loop.start(self.interval, now=True)

    def stop(self) -> None:
        """Stop looking."""
        if self._loop.running:
            self._loop.stop()
        if self._release_call is not None and self._release_call.active():
            self._release_call.cancel()
        self._release_call = None

    def check(self) -> None:
        """Compare the memory in use with the watermark; raise or clear the alarm."""
        self._buffered = 0
        used = self.used = self.probe()
        if used is None:
            return
        active = "memory" in self.alarms.active()
        if used >= self.watermark and not active:
            oplog.memory_alarm(True, used, self.watermark)
            self.alarms.raise_alarm("memory")
        elif used < self.watermark and active:
            oplog.memory_alarm(False, used, self.watermark)
            self.alarms.clear_alarm("memory")
        now = self.clock.seconds()
        if now >= self._next_free_look:
            self._next_free_look = now + FREE_LOOK_INTERVAL
            self._trim_if_much_free()

    def _trim_if_much_free(self) -> None:
        """Trim the C allocator when it holds :data:`RELEASE_THRESHOLD` more
        free bytes than after the last trim (a backlog was drained, queues
        or connections went) and no more than at the last look."""
        free = self._free_probe()
        if free is None:
            return
        growing, self._free_seen = free > self._free_seen, free
        if free >= self._free_kept + RELEASE_THRESHOLD and not growing:
            self._trim()
        else:
            self._free_kept = min(self._free_kept, free)

    def _trim(self) -> None:
        """Hand the allocator's free memory back; remember what it still keeps."""
        self._release_memory()
        self._free_kept = self._free_seen = self._free_probe() or 0

    def buffered(self, size: int) -> None:
        """A connection buffered *size* more bytes of an unfinished message:
        look again once a few MiB have piled up since the last look."""
        self._buffered += size
        if self._buffered >= LOOK_AGAIN_AFTER:
            self.check()

    def released(self) -> None:
        """Much memory was just freed: hand it back to the system (once per
        turn of the reactor however many frees), then look again."""
        if self._release_call is None or not self._release_call.active():
            self._release_call = self.clock.callLater(0, self._release)

    def _release(self) -> None:
        self._release_call = None
        self._trim()
        self.check()
