"""A read of the data source stopped after its first batches, as Spark
stops one (``limit``, ``take``, a failing task), in a process of its own.

``python -m tests.spark.partial KIND HOW`` starts this project's broker on
127.0.0.1 in the process's reactor thread (:mod:`txamqp09.spark.reactor`),
fills a queue with :data:`MESSAGES` messages, reads it with
:func:`~txamqp09.spark.source.read_offset_range` (KIND ``stream``) or
:func:`~txamqp09.spark.source.drain` (KIND ``classic``), takes
:data:`BATCHES` record batches and stops HOW:

* ``close``: closes the generator (what Spark does when it stops reading);
* ``raise``: the loop taking the batches raises (the generator is dropped
  as the exception leaves it);
* ``collect``: drops the generator inside a reference cycle, then collects
  the cycle in the reactor thread (the garbage collector closes the
  generator in whichever thread it runs).

Once the broker has no connection left (waited for), it prints, as JSON:
the rows taken, the queue's ready messages and consumers, and the reactor's
delayed calls and the process's threads that were not there before the read.
"""

from __future__ import annotations

import gc
import json
import sys
import threading
from collections import Counter
from typing import Any, Iterator

#: Messages in the queue; record batches taken before stopping.
MESSAGES = 30_000
BATCHES = 2
#: Rows per record batch of the read (below the queue's size, so that a
#: read stopped after BATCHES batches leaves most of its rows untaken).
ROWS = 2_000

__all__ = ["MESSAGES", "BATCHES", "ROWS", "main"]


class ConsumerFailed(Exception):
    """The exception of ``raise``."""


async def fill(url: str, queue: str, stream: bool) -> None:
    """Queue *queue* holding :data:`MESSAGES` confirmed messages."""
    from twisted.internet import reactor
    from twisted.internet.defer import gatherResults

    from txamqp09.client import connect

    connection = await connect(reactor, url)
    try:
        channel = await connection.channel()
        arguments = {"x-queue-type": "stream"} if stream else {}
        await channel.queue_declare(queue, durable=True, arguments=arguments)
        await channel.confirm_select()
        await gatherResults([channel.basic_publish(b"%d" % number, routing_key=queue) for number in range(MESSAGES)])
    finally:
        await connection.disconnect()


async def counts(url: str, queue: str) -> tuple[int, int]:
    """(messages ready, consumers) of *queue*."""
    from twisted.internet import reactor

    from txamqp09.client import connect

    connection = await connect(reactor, url)
    try:
        declared = await (await connection.channel()).queue_declare(queue, passive=True)
        return int(declared.message_count), int(declared.consumer_count)
    finally:
        await connection.disconnect()


def delayed_calls() -> Counter[str]:
    """The reactor's pending delayed calls, by what they call (a looping
    call's next call is another object each time)."""
    from twisted.internet import reactor

    return Counter(getattr(call.func, "__qualname__", repr(call.func)) for call in reactor.getDelayedCalls())


def main(kind: str, how: str) -> dict[str, Any]:
    from twisted.internet import reactor

    from txamqp09.spark import source
    from txamqp09.spark.options import ReadOptions
    from txamqp09.spark.reactor import call_in_reactor
    from txamqp09.testing.broker import LoopbackBroker
    from txamqp09.testing.waiting import eventually

    source.BATCH_ROWS = ROWS
    broker = call_in_reactor(LoopbackBroker)
    call_in_reactor(broker.start)
    stream = kind == "stream"
    call_in_reactor(fill, broker.url, "q", stream)
    options = ReadOptions.parse({"url": broker.url, "queue": "q", "queueType": kind}, streaming=False)
    calls_before = call_in_reactor(delayed_calls)
    threads_before = set(threading.enumerate())
    if stream:
        batches: Iterator[Any] = source.read_offset_range(options, source.OffsetRange(0, MESSAGES))
    else:
        batches = source.drain(options, MESSAGES)
    taken = 0
    try:
        for batch in batches:
            taken += batch.num_rows
            if taken >= BATCHES * ROWS:
                if how == "raise":
                    raise ConsumerFailed()
                break
    except ConsumerFailed:
        pass
    if how == "close":
        batches.close()
    elif how == "collect":
        gc.disable()  # so that no collection in this thread closes it first
        cycle: list[Any] = [batches]
        cycle.append(cycle)
        del cycle
    del batches
    if how == "collect":
        call_in_reactor(gc.collect)
    call_in_reactor(
        eventually, lambda: not broker.factory.connections, reactor, timeout=30, what="the read's connection closed"
    )
    ready, consumers = call_in_reactor(counts, broker.url, "q")
    calls_left = call_in_reactor(delayed_calls) - calls_before
    threads_left = [thread.name for thread in set(threading.enumerate()) - threads_before]
    call_in_reactor(broker.stop)
    return {"taken": taken, "ready": ready, "consumers": consumers, "calls": sorted(calls_left.elements()), "threads": threads_left}


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:])))
