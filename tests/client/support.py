"""Helpers of the client tests: async test methods, expected failures, the
brokers the live tests run against, the failover tests' topology."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Awaitable, Callable, TypeVar

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.trial.unittest import TestCase

from txamqp09.testing.broker import LoopbackBroker
from txamqp09.testing.rabbitmq import rabbitmq_missing, shared_rabbitmq

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


if TYPE_CHECKING:
    _TestCaseBase = TestCase
else:
    _TestCaseBase = object


class OwnBroker(_TestCaseBase):
    """Mixin (first among the bases): this project's broker in this
    process; :meth:`url` names it."""

    def setUp(self) -> None:
        self.broker = LoopbackBroker()
        self.broker.start()
        self.addCleanup(self.broker.stop)

    def url(self) -> str:
        return self.broker.url


class RabbitMQNode(_TestCaseBase):
    """Mixin (first among the bases): the private RabbitMQ node; :meth:`url` names it."""

    skip = rabbitmq_missing()

    def setUp(self) -> None:
        self.node = shared_rabbitmq()

    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.node.port}/"


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
