"""The Twisted reactor of a Spark Python worker, run in a daemon thread.

Spark calls the data source from plain threads of its Python worker
processes (executors, and the planner and streaming-source processes of the
driver). The first call of :func:`call_in_reactor` in such a process starts
the global reactor in a daemon thread, once; every call then runs its
function in the reactor thread with ``blockingCallFromThread`` and returns
its result (waiting for a Deferred or coroutine to finish). Nothing starts
the reactor when a reader or writer is constructed or unpickled.

The process must not run the reactor itself already: a program that runs
Twisted in its main thread (a trial test, for instance) keeps the Spark
session's calls off the reactor thread and never calls this module.

A call from the reactor thread itself could never be answered (the thread
would wait for itself), so :func:`call_in_reactor` refuses it. One such
call cannot be avoided: a read's generator that is dropped unfinished
(inside a reference cycle, say) is closed by the garbage collector in
whichever thread it runs, the reactor thread too, and its cleanup then
closes the read's connection there. :func:`finish_in_reactor` serves
cleanups: from the reactor thread it starts them without waiting.

A task that moves many messages holds thousands of them (and their
properties and header tables) at once; with Python's default thresholds the
cyclic garbage collector then runs every 700 allocations and walks them
again and again, which took a third of a stream read's CPU time.
:func:`fewer_collections` raises the first threshold for the duration of a
task.

Spark's daemon also runs a full collection after every task a reused
worker ran, which walked every object of the process again (pyspark,
pyarrow, numpy, Twisted and this package: about 80,000 objects, 16-28 ms
per task on a 2-core machine, and as much for each planning call). So the
first :func:`call_in_reactor` in a process (:func:`settle_heap`; the data
source's ``schema()`` does the same in the worker that creates it) collects
once and then leaves the objects alive by then (modules, classes,
functions: what lives as long as the process) out of every later collection
(:func:`gc.freeze`); what later tasks allocate is collected as before.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Any, Callable, Coroutine, Iterator, TypeVar, overload

from twisted.internet import defer, threads
from twisted.logger import Logger

__all__ = ["call_in_reactor", "finish_in_reactor", "fewer_collections", "in_reactor_thread", "reactor", "settle_heap"]

#: Allocations between two collections of the youngest generation while a
#: task runs (Python's default is 700).
TASK_GC_THRESHOLD = 100_000

_T = TypeVar("_T")
_lock = threading.Lock()
_thread: "threading.Thread | None" = None
_settled = False
_log = Logger()


def reactor() -> Any:
    """The global reactor, running in its daemon thread."""
    global _thread
    from twisted.internet import reactor as global_reactor

    with _lock:
        if _thread is None:
            settle_heap()
            _thread = threading.Thread(
                target=global_reactor.run,
                kwargs={"installSignalHandlers": False},
                name="txamqp09-reactor",
                daemon=True,
            )
            _thread.start()
    return global_reactor


def settle_heap() -> None:
    """Collect garbage, then leave every object alive now out of the
    cyclic garbage collector's later collections (see the module's text);
    once per process."""
    global _settled
    if not _settled:
        _settled = True
        gc.collect()
        gc.freeze()


@overload
def call_in_reactor(function: Callable[..., Coroutine[Any, Any, _T]], *args: Any, **kwargs: Any) -> _T: ...


@overload
def call_in_reactor(function: Callable[..., "defer.Deferred[_T]"], *args: Any, **kwargs: Any) -> _T: ...


@overload
def call_in_reactor(function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T: ...


def call_in_reactor(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run *function* in the reactor thread and return what it produced.

    A coroutine or Deferred is waited for; its failure is raised here.

    :raises RuntimeError: called from the reactor thread (the call would
        wait for ever).
    """
    running = reactor()
    if in_reactor_thread():
        raise RuntimeError(f"call_in_reactor({function!r}) from the reactor thread would wait for itself")

    def start() -> "defer.Deferred[Any]":
        return defer.maybeDeferred(function, *args, **kwargs)

    return threads.blockingCallFromThread(running, start)


def in_reactor_thread() -> bool:
    """Whether the calling thread is the reactor thread of this module."""
    return _thread is not None and threading.current_thread() is _thread


def finish_in_reactor(function: Callable[..., Any], *args: Any) -> None:
    """Run the cleanup *function* (closing a connection) in the reactor
    thread: as :func:`call_in_reactor` from any other thread; from the
    reactor thread (a generator the garbage collector closes there), it is
    started on the reactor's next turn and not waited for, and a failure
    is logged."""
    if not in_reactor_thread():
        call_in_reactor(function, *args)
        return

    def start() -> None:
        defer.maybeDeferred(function, *args).addErrback(
            lambda failure: _log.failure("cleanup {function!r} failed", failure, function=function)
        )

    reactor().callLater(0, start)


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Collect the youngest generation every :data:`TASK_GC_THRESHOLD`
    allocations (not fewer) inside the block; the thresholds it found are
    restored after it."""
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], TASK_GC_THRESHOLD), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
