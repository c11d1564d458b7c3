"""Counts of observed values in fixed buckets: what a histogram needs.

The store's writer thread observes one value per committed batch (how long
the commit took, how many messages it wrote); the metrics listener reads
the buckets when it is scraped (:mod:`txamqp09.prometheus`). Nothing here
runs per message.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Sequence

__all__ = ["BATCH_MESSAGES_BUCKETS", "COMMIT_SECONDS_BUCKETS", "Distribution"]

#: Upper bounds (seconds) of the commit-duration buckets: from a page-cache
#: write to a slow disk's fsync.
COMMIT_SECONDS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
#: Upper bounds of the messages-per-batch buckets.
BATCH_MESSAGES_BUCKETS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)


class Distribution:
    """How many observed values fell at or below each bound, and their sum.

    One thread observes, another reads; each read is a consistent-enough
    copy (a bucket may miss the value being added at that moment, never
    count it twice).

    :param bounds: the buckets' upper bounds, increasing; a last bucket
        (+Inf) takes everything above them.
    """

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self._counts = [0] * (len(self.bounds) + 1)
        self._sum = 0.0

    def observe(self, value: float) -> None:
        """Count *value*."""
        self._counts[bisect_left(self.bounds, value)] += 1
        self._sum += value

    def cumulative(self) -> tuple[list[int], float]:
        """For each bound (and +Inf last), the values at or below it; and the sum."""
        counts = list(self._counts)
        total = 0
        for index, count in enumerate(counts):
            total += count
            counts[index] = total
        return counts, self._sum
