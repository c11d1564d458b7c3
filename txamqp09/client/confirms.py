"""Publisher confirms: one Deferred per published message, settled by basic.ack or basic.nack."""

from __future__ import annotations

from collections import OrderedDict
from typing import Iterator

from twisted.internet.defer import Deferred

from txamqp09.client.errors import MessageNacked

__all__ = ["ConfirmTracker"]


class ConfirmTracker:
    """Numbers the messages published in confirm mode and settles their Deferreds.

    The server numbers them from 1 in publishing order; an ack or nack with
    *multiple* settles every message up to its tag, and tag 0 with
    *multiple* settles them all.
    """

    def __init__(self) -> None:
        self._next_tag = 1
        self._waiting: OrderedDict[int, Deferred[int]] = OrderedDict()

    @property
    def unconfirmed(self) -> int:
        """Messages published and neither acked nor nacked yet."""
        return len(self._waiting)

    def published(self) -> Deferred[int]:
        """A message was published: its Deferred, firing with its delivery tag on ack."""
        tag = self._next_tag
        self._next_tag = tag + 1
        waiting: Deferred[int] = Deferred()
        self._waiting[tag] = waiting
        return waiting

    def acked(self, delivery_tag: int, multiple: bool) -> None:
        """The server acknowledged *delivery_tag* (and earlier ones with *multiple*)."""
        for tag, waiting in self._settled(delivery_tag, multiple):
            waiting.callback(tag)

    def nacked(self, delivery_tag: int, multiple: bool) -> None:
        """The server refused *delivery_tag* (and earlier ones with *multiple*)."""
        for tag, waiting in self._settled(delivery_tag, multiple):
            waiting.errback(MessageNacked(tag))

    def failAll(self, error: BaseException) -> None:
        """The channel ended: every unconfirmed message fails with *error*."""
        waiting, self._waiting = self._waiting, OrderedDict()
        for deferred in waiting.values():
            deferred.errback(error)

    def _settled(self, delivery_tag: int, multiple: bool) -> Iterator[tuple[int, Deferred[int]]]:
        if not multiple:
            waiting = self._waiting.pop(delivery_tag, None)
            if waiting is not None:
                yield delivery_tag, waiting
            return
        limit = delivery_tag or self._next_tag - 1
        pending = self._waiting
        while pending and next(iter(pending)) <= limit:
            yield pending.popitem(last=False)
