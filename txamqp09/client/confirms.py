"""Publisher confirms: a Deferred per published message, or one per group
of messages published together, settled by basic.ack or basic.nack."""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Iterator, Optional, Union

from twisted.internet.defer import Deferred

from txamqp09.client.errors import MessageNacked

__all__ = ["ConfirmTracker"]


class _Group:
    """Messages published together, confirmed by one Deferred.

    :ivar unsettled: the delivery tags neither acked nor nacked yet.
    :ivar nacked: the first tag the server refused, if any.
    """

    __slots__ = ("first", "last", "unsettled", "nacked", "deferred")

    def __init__(self, first: int, last: int) -> None:
        self.first = first
        self.last = last
        self.unsettled = set(range(first, last + 1))
        self.nacked: Optional[int] = None
        self.deferred: Deferred[int] = Deferred()

    def settle(self, tags: Union[range, tuple[int]], nacked: bool) -> bool:
        """Record *tags* as acked (or nacked); whether the group is settled."""
        if nacked and self.nacked is None and not self.unsettled.isdisjoint(tags):
            self.nacked = min(self.unsettled.intersection(tags))
        self.unsettled.difference_update(tags)
        return not self.unsettled

    def fire(self) -> None:
        """Fire the Deferred: the last tag, or MessageNacked for the first refused one."""
        if self.nacked is None:
            self.deferred.callback(self.last)
        else:
            self.deferred.errback(MessageNacked(self.nacked))


class ConfirmTracker:
    """Numbers the messages published in confirm mode and settles their Deferreds.

    The server numbers them from 1 in publishing order; an ack or nack with
    *multiple* settles every message up to its tag, and tag 0 with
    *multiple* settles them all.
    """

    def __init__(self) -> None:
        self._next_tag = 1
        #: By the last delivery tag of each: a message's Deferred, or a group's.
        self._waiting: OrderedDict[int, Union[Deferred[int], _Group]] = OrderedDict()
        self._unconfirmed = 0
        #: Offered each unconfirmed Deferred, in publishing order, when the
        #: channel ends; a Deferred it takes (returning True) is not failed:
        #: whoever set it publishes the message again elsewhere.
        self.handover: Optional[Callable[[BaseException, Deferred[int]], bool]] = None

    @property
    def unconfirmed(self) -> int:
        """Messages published and neither acked nor nacked yet."""
        return self._unconfirmed

    def published(self, waiting: Optional[Deferred[int]] = None) -> Deferred[int]:
        """A message was published: its Deferred (*waiting*, or a new one),
        firing with its delivery tag on ack."""
        tag = self._next_tag
        self._next_tag = tag + 1
        if waiting is None:
            waiting = Deferred()
        self._waiting[tag] = waiting
        self._unconfirmed += 1
        return waiting

    def published_group(self, count: int) -> Deferred[int]:
        """*count* messages (at least one) were published together: one
        Deferred for all of them, firing with the last one's delivery tag
        once every one is acked, or failing with
        :class:`~txamqp09.client.errors.MessageNacked` (naming the first
        refused tag) once every one is settled and any was nacked."""
        first = self._next_tag
        self._next_tag = first + count
        group = _Group(first, first + count - 1)
        self._waiting[group.last] = group
        self._unconfirmed += count
        return group.deferred

    def acked(self, delivery_tag: int, multiple: bool) -> None:
        """The server acknowledged *delivery_tag* (and earlier ones with *multiple*)."""
        self._settle(delivery_tag, multiple, nacked=False)

    def nacked(self, delivery_tag: int, multiple: bool) -> None:
        """The server refused *delivery_tag* (and earlier ones with *multiple*)."""
        self._settle(delivery_tag, multiple, nacked=True)

    def failAll(self, error: BaseException) -> None:
        """The channel ended: every unconfirmed message fails with *error*,
        unless :attr:`handover` takes it."""
        waiting, self._waiting = self._waiting, OrderedDict()
        self._unconfirmed = 0
        for entry in waiting.values():
            deferred = entry.deferred if isinstance(entry, _Group) else entry
            if self.handover is None or not self.handover(error, deferred):
                deferred.errback(error)

    def _settle(self, delivery_tag: int, multiple: bool, nacked: bool) -> None:
        for tag, entry in list(self._affected(delivery_tag, multiple)):
            if isinstance(entry, _Group):
                before = len(entry.unsettled)
                tags = range(entry.first, min(entry.last, tag) + 1) if multiple else (tag,)
                done = entry.settle(tags, nacked)
                self._unconfirmed -= before - len(entry.unsettled)
                if done:
                    del self._waiting[entry.last]
                    entry.fire()
                continue
            del self._waiting[tag]
            self._unconfirmed -= 1
            if nacked:
                entry.errback(MessageNacked(tag))
            else:
                entry.callback(tag)

    def _affected(self, delivery_tag: int, multiple: bool) -> Iterator[tuple[int, Union[Deferred[int], _Group]]]:
        """The entries *delivery_tag* settles (all or some of), with the
        highest tag it settles in each."""
        if not multiple:
            entry = self._waiting.get(delivery_tag)
            if entry is not None:
                yield delivery_tag, entry
                return
            for group in self._waiting.values():
                if isinstance(group, _Group) and group.first <= delivery_tag <= group.last:
                    yield delivery_tag, group
                    return
            return
        limit = delivery_tag or self._next_tag - 1
        for last, entry in self._waiting.items():
            first = entry.first if isinstance(entry, _Group) else last
            if first > limit:
                return
            yield min(last, limit), entry
