"""Keeping Python's cyclic garbage collector off a large backlog.

A queued message is a few objects the collector tracks. Its full passes
(rare: when the objects that survived earlier passes have grown by a
quarter) walk every one of them, which holds the broker for about 0.2 s per
million queued messages, and a backlog built while the broker runs goes
through several such passes as it grows.

:class:`CollectorPolicy` looks once a second. When a full pass has happened
since its last look and the broker's queues hold at least *threshold*
messages, it freezes what survived (``gc.freeze``): later passes walk only
newer objects, so each pause stays proportional to what arrived since. When
the queues fall below half the threshold after holding at least the
threshold, it unfreezes and makes one full pass at once (over what is left:
a few milliseconds), which frees the reference cycles that died meanwhile
(queued messages hold none; a connection closed while the backlog was large
does). Left for a later full pass, which may not come for long, those
cycles would keep the allocator's arenas they sit in, emptied by the drain,
from going back to the system: after a drained backlog of 500,000 messages
the broker stayed 50 % above its idle memory, and returns within 10 % now.

While it runs, the policy also makes the youngest generation's passes rarer
(:data:`DEFAULT_YOUNG_THRESHOLD` allocations between two, not Python's 700).
Each publish allocates a few tracked objects (the message, its store
records) that live at least until the store has written them, so with 700
nearly every one was walked by a young pass, promoted, walked again by the
middle generation's passes, and counted towards the next full pass: the
collector took about a quarter of the broker's CPU time for persistent
publishes with confirms (``gc_collect_main`` and its visitors 21 % of
``perf`` samples). Rarer young passes find most of those objects gone.
Each walks at most that many objects (a few milliseconds).
"""

from __future__ import annotations

import gc
from typing import Any, Optional, Protocol

from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall

from txamqp09.broker.model import Broker

__all__ = ["CollectorPolicy", "DEFAULT_FREEZE_THRESHOLD", "DEFAULT_YOUNG_THRESHOLD", "queued_messages"]

#: Queued messages from which the survivors of a full pass are frozen.
DEFAULT_FREEZE_THRESHOLD = 100_000
#: Allocations (less deallocations) of tracked objects between two passes
#: over the youngest generation while the policy runs.
DEFAULT_YOUNG_THRESHOLD = 50_000


class Collector(Protocol):
    """What the policy uses of the :mod:`gc` module."""

    def get_stats(self) -> list[dict[str, Any]]:
        """Per-generation statistics; the last is the full passes'."""

    def freeze(self) -> None:
        """Move every tracked object to the permanent generation."""

    def unfreeze(self) -> None:
        """Move the permanent generation back to the oldest one."""

    def collect(self) -> int:
        """Make a full pass; how many unreachable objects it found."""

    def get_threshold(self) -> tuple[int, int, int]:
        """When each generation is collected."""

    def set_threshold(self, threshold0: int, threshold1: int = ..., threshold2: int = ...) -> None:
        """Set when each generation is collected."""


def queued_messages(broker: Broker) -> int:
    """Ready messages in every queue of *broker* (a stream holds none: its
    declare-ok count is the end of its log, which is mostly on disk)."""
    return sum(
        len(queue.messages) for vhost in broker.vhosts.values() for queue in vhost.queues.values()
    )


class CollectorPolicy:
    """Freezes the collector's survivors while the backlog is large.

    :param threshold: queued messages from which to freeze (0: never).
    :param collector: the :mod:`gc` module, or a stand-in.
    :param young: allocations between two passes over the youngest
        generation while the policy runs (0: Python's own setting); the
        setting it found is restored when it stops.
    :ivar frozen: whether the policy froze objects it has not unfrozen yet.
    """

    def __init__(
        self,
        broker: Broker,
        clock: IReactorTime,
        threshold: int = DEFAULT_FREEZE_THRESHOLD,
        collector: Collector = gc,
        interval: float = 1.0,
        young: int = DEFAULT_YOUNG_THRESHOLD,
    ) -> None:
        self.broker = broker
        self.threshold = threshold
        self.collector = collector
        self.young = young
        #: The collector's thresholds before :meth:`start` changed them.
        self._thresholds: Optional[tuple[int, int, int]] = None
        self.frozen = False
        #: The queues held at least the threshold since the last drain.
        self.backlog_seen = False
        self._full_passes = self._count_full_passes()
        self._loop = LoopingCall(self.look)
        self._loop.clock = clock
        self._interval = interval

    def _count_full_passes(self) -> int:
        return int(self.collector.get_stats()[-1]["collections"])

    def start(self) -> None:
        """Make young passes rarer, and start looking (nothing to look at
        with a threshold of 0)."""
        if self.young and self._thresholds is None:
            self._thresholds = thresholds = self.collector.get_threshold()
            self.collector.set_threshold(max(self.young, thresholds[0]), *thresholds[1:])
        if self.threshold and not self._loop.running:
            self._loop.start(self._interval, now=False)

    def stop(self) -> None:
        """Stop looking, unfreeze, and restore the collector's thresholds."""
        if self._loop.running:
            self._loop.stop()
        self._thaw()
        if self._thresholds is not None:
            self.collector.set_threshold(*self._thresholds)
            self._thresholds = None

    def freeze(self) -> None:
        """Freeze what lives now (after a restore, for instance)."""
        self.collector.freeze()
        self.frozen = True

    def look(self) -> None:
        """Freeze after a full pass over a large backlog; unfreeze once it
        is small, and collect once it was drained."""
        passes = self._count_full_passes()
        queued = queued_messages(self.broker)
        if passes != self._full_passes and queued >= self.threshold:
            self.freeze()
        elif queued < self.threshold // 2:
            self._thaw()
            if self.backlog_seen:
                self.backlog_seen = False
                self.collector.collect()
                passes = self._count_full_passes()
        self.backlog_seen = self.backlog_seen or queued >= self.threshold
        self._full_passes = passes

    def _thaw(self) -> None:
        if self.frozen:
            self.collector.unfreeze()
            self.frozen = False
