"""Helpers of the client tests: async test methods and expected failures."""

from __future__ import annotations

import functools
from typing import Any, Awaitable, Callable, TypeVar

from twisted.internet.defer import Deferred, ensureDeferred

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)


def inline(test: Callable[..., Awaitable[T]]) -> Callable[..., Deferred[T]]:
    """Run an ``async def`` test method as a Deferred trial waits for."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> Deferred[T]:
        return ensureDeferred(test(*args, **kwargs))  # type: ignore[arg-type]

    return run


async def fails(deferred: Deferred[Any], kind: type[E]) -> E:
    """Wait for *deferred*, which must fail with *kind*; the exception."""
    try:
        await deferred
    except kind as error:
        return error
    raise AssertionError(f"{deferred!r} did not fail with {kind.__name__}")


async def declare_orders(channel: Any) -> str:
    """Declare on *channel* (a recovering channel) the topology the failover
    tests look for on the next broker: the topic exchange ``orders``, the
    durable queue ``orders.eu`` bound with ``eu.#``, and a server-named
    exclusive queue bound with ``#``; the latter's name."""
    await channel.exchange_declare("orders", "topic", durable=True)
    await channel.queue_declare("orders.eu", durable=True)
    await channel.queue_bind("orders.eu", "orders", "eu.#")
    private: str = (await channel.queue_declare("", exclusive=True)).queue
    await channel.queue_bind(private, "orders", "#")
    return private
