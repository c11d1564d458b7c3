"""Queue lists answered from encoded rows kept between requests.

A monitor polling ``/api/queues`` of a broker with thousands of queues
would otherwise have every row built, sorted and encoded again on every
request, on the reactor that serves AMQP. :class:`QueueRows` keeps, for
each queue, its row already encoded as JSON with the *signature* it was
built from (the queue's lengths and bytes, its counters, consumers, policy
and the rates of the last sample); a request re-encodes only the rows whose
signature changed and joins the others' bytes. Orders (by name, by vhost)
are kept until a queue is created or deleted, so a page is a slice. When
many rows must be built, the work is split into slices of
:data:`SLICE_SECONDS` with the reactor serving AMQP in between.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Optional, Protocol
from weakref import WeakKeyDictionary

from twisted.internet.defer import Deferred, succeed

from txamqp09.broker.model import Queue, VirtualHost
from txamqp09.broker.model.stats import QueueCounters
from txamqp09.management.answers import Encoded, encode
from txamqp09.management.pages import page_of
from txamqp09.management.stats import MeasuredNode

__all__ = ["ListedNode", "QueueRows", "SLICE_SECONDS", "sort_keys"]

#: The longest the reactor is kept from AMQP by one slice of row building.
SLICE_SECONDS = 0.02
#: Sort keys the kept orders serve (the others build every row).
ORDERED_KEYS = frozenset({"name", "vhost"})
#: The default order of a queue list.
DEFAULT_SORT = ("vhost", "name")


class ListedNode(MeasuredNode, Protocol):
    """A broker whose queues are listed, as the kept rows read it."""

    @property
    def changes(self) -> int:
        """How many changes have been made through the API (a list made
        after one belongs to a new snapshot)."""


def sort_keys(query: Mapping[str, str]) -> Optional[tuple[str, ...]]:
    """The sort keys of a list query (``sort`` then the default order; none
    for ``sort=``), or None when a kept order cannot serve them."""
    sort = query.get("sort")
    if sort == "":
        return ()
    keys = ((sort,) if sort else ()) + DEFAULT_SORT
    return keys if ORDERED_KEYS.issuperset(keys) else None


class QueueRows:
    """Encoded queue rows and queue orders of one node, kept between requests.

    :param node: the broker whose queues are listed.
    :param build: makes a queue's full row (``queue_view``), given the queue
        and its unacknowledged messages and bytes.
    """

    def __init__(self, node: ListedNode, build: Callable[[Queue, tuple[int, int]], Mapping[str, Any]]) -> None:
        self.node = node
        self.build = build
        #: Encoded row and its signature, by the queue's counters (which live as long as it).
        self._rows: WeakKeyDictionary[QueueCounters, tuple[tuple[Any, ...], bytes]] = WeakKeyDictionary()
        self._orders: dict[tuple[tuple[str, ...], bool], tuple[tuple[Any, ...], list[Queue]]] = {}
        #: The last whole lists, by (vhosts, order): the snapshot they were
        #: made in, the (kept) order of queues they were made of, the answer.
        self._lists: dict[tuple[Any, ...], tuple[tuple[int, int], list[Queue], bytes]] = {}

    def snapshot(self) -> tuple[int, int]:
        """Which snapshot a list made now belongs to: a new one after each
        sample of the statistics and after each change made through the API."""
        return self.node.stats.generation, self.node.changes

    def _signature(self, queue: Queue, unacked: tuple[int, int]) -> tuple[Any, ...]:
        """Everything a queue's row is made from that can change."""
        stats = self.node.stats
        return (
            queue.message_count, queue.ready_bytes, unacked, tuple(queue.consumers),
            queue.policy, queue.operator_policy, queue.stats.values(),
            queue.consumer_utilisation() if queue.consumers else None,
            stats.rates_of(queue.stats), stats.length_rates(queue.stats), stats.last_change(queue.stats),
        )

    def row(self, queue: Queue, unacked: tuple[int, int]) -> bytes:
        """*queue*'s encoded row, built again only when its signature changed."""
        signature = self._signature(queue, unacked)
        kept = self._rows.get(queue.stats)
        if kept is not None and kept[0] == signature:
            return kept[1]
        row = encode(self.build(queue, unacked))
        self._rows[queue.stats] = (signature, row)
        return row

    def ordered(self, vhosts: list[VirtualHost], keys: tuple[str, ...], reverse: bool) -> list[Queue]:
        """*vhosts*' queues sorted by *keys* (``name``/``vhost``), kept until
        a queue of theirs is created or deleted."""
        membership = tuple((vhost, len(vhost.queues), vhost.churn.queue_created) for vhost in vhosts)
        kept = self._orders.get((keys, reverse))
        if kept is not None and kept[0] == membership:
            return kept[1]
        queues = [queue for vhost in vhosts for queue in vhost.queues.values()]
        if keys:
            queues.sort(key=lambda queue: tuple(queue.vhost.name if key == "vhost" else queue.name for key in keys))
        if reverse:
            queues.reverse()
        self._orders = {order: value for order, value in self._orders.items() if value[0] == membership}
        self._orders[(keys, reverse)] = (membership, queues)
        return queues

    def rows(self, queues: Iterable[Queue]) -> Deferred[list[bytes]]:
        """The encoded rows of *queues*, in slices of at most
        :data:`SLICE_SECONDS` with the reactor free in between."""
        held = self.node.unacked()
        remaining = iter(queues)
        rows: list[bytes] = []
        done: Deferred[list[bytes]] = Deferred()

        def work() -> None:
            deadline = time.monotonic() + SLICE_SECONDS
            for count, queue in enumerate(remaining):
                rows.append(self.row(queue, held.get(queue, (0, 0))))
                if count % 64 == 63 and time.monotonic() > deadline:
                    self.node.clock.callLater(0, work)
                    return
            done.callback(rows)

        work()
        return done

    def _whole(self, queues: list[Queue], key: tuple[Any, ...]) -> Deferred[bytes]:
        """The encoded list of *queues*, made once per snapshot (and again
        when a queue was created or deleted since)."""
        snapshot = self.snapshot()
        kept = self._lists.get(key)
        if kept is not None and kept[0] == snapshot and kept[1] is queues:
            return succeed(kept[2])

        def keep(rows: list[bytes]) -> bytes:
            whole = b"".join((b"[", b",".join(rows), b"]"))
            self._lists = {other: value for other, value in self._lists.items() if value[0] == snapshot}
            self._lists[key] = (snapshot, queues, whole)
            return whole

        return self.rows(queues).addCallback(keep)

    def answer(self, vhosts: list[VirtualHost], query: Mapping[str, str], keys: tuple[str, ...]) -> Deferred[Encoded]:
        """The list (or, with ``page``, the paginated answer) of *vhosts*'
        queues in RabbitMQ's shape, from kept rows and orders.

        :raises ApiError: 400 with RabbitMQ's texts for bad page parameters,
            a page past the end or a regular expression that does not compile.
        """
        reverse = query.get("sort_reverse") == "true"
        queues = self.ordered(vhosts, keys, reverse)
        if "page" not in query:
            return self._whole(queues, (tuple(vhosts), keys, reverse)).addCallback(Encoded)
        page, size, filtered, chosen = page_of(queues, query, _name)

        def paginated(rows: list[bytes]) -> Encoded:
            head = {"filtered_count": len(filtered), "item_count": len(chosen)}
            tail = {"page": page, "page_count": (len(filtered) + size - 1) // size, "page_size": size,
                    "total_count": len(queues)}
            return Encoded(encode(head)[:-1] + b',"items":[' + b",".join(rows) + b"]," + encode(tail)[1:])

        return self.rows(chosen).addCallback(paginated)


def _name(queue: Queue) -> str:
    return queue.name
