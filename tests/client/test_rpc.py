"""The client's RPC over direct reply-to (:mod:`txamqp09.client.rpc`) against
real brokers over loopback: this project's broker and RabbitMQ.

:class:`RPCCases` holds the cases; :class:`OwnBrokerTests` runs them
against :class:`~txamqp09.testing.broker.LoopbackBroker` in this process and
:class:`RabbitMQTests` against the private RabbitMQ node of
:mod:`txamqp09.testing.rabbitmq` (skipped when RabbitMQ is not installed).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from twisted.internet import reactor
from twisted.internet.defer import TimeoutError, gatherResults
from twisted.trial.unittest import TestCase

from tests.client.support import OwnBroker, RabbitMQNode, fails, inline
from txamqp09.client import Channel, ChannelClosed, Message, RPCClient, RPCStopped, connect
from txamqp09.testing.waiting import eventually

if TYPE_CHECKING:
    _TestCaseBase = TestCase
else:
    _TestCaseBase = object

#: Calls the main case makes at once.
CALLS = 200


class RPCCases(_TestCaseBase):
    """Cases that need a broker; a subclass provides :meth:`url`."""

    timeout = 30

    def url(self) -> str:
        raise NotImplementedError

    async def channel(self) -> Channel:
        connection = await connect(reactor, self.url())
        self.addCleanup(connection.disconnect)
        return await connection.channel()

    async def square_server(self) -> str:
        """A server on its own connection that answers a number with its
        square; the name of the queue it serves."""
        channel = await self.channel()
        queue = f"square-{uuid.uuid4().hex[:8]}"
        await channel.queue_declare(queue, exclusive=True)

        def answer(request: Message) -> None:
            channel.basic_publish(
                str(int(request.body) ** 2).encode(), routing_key=request.properties.reply_to,
                properties={"correlation_id": request.properties.correlation_id},
            )
            request.ack()

        await channel.basic_consume(queue, answer)
        return queue

    @inline
    async def test_every_call_is_answered(self) -> None:
        queue = await self.square_server()
        rpc = await (await self.channel()).rpc_client()
        replies = await gatherResults([rpc.call(str(n).encode(), queue) for n in range(CALLS)])
        self.assertEqual([int(reply.body) for reply in replies], [n * n for n in range(CALLS)])
        self.assertEqual(rpc.waiting, 0)

    async def unanswered(self) -> tuple[Channel, RPCClient, str]:
        """A channel, an RPC client on it, and a queue no server answers."""
        channel = await self.channel()
        silent = (await channel.queue_declare("", exclusive=True)).queue
        return channel, await RPCClient.start(channel), silent

    @inline
    async def test_a_call_without_answer_times_out(self) -> None:
        channel, rpc, silent = await self.unanswered()
        await fails(rpc.call(b"anyone?", silent, timeout=0.2), TimeoutError)
        self.assertEqual(rpc.waiting, 0)
        request = await channel.basic_get(silent, no_ack=True)
        assert request is not None
        self.assertTrue(request.properties.reply_to.startswith("amq.rabbitmq.reply-to."))
        channel.basic_publish(b"late", routing_key=request.properties.reply_to,
                              properties={"correlation_id": request.properties.correlation_id})
        queue = await self.square_server()
        self.assertEqual((await rpc.call(b"3", queue)).body, b"9", "the late reply was ignored")

    @inline
    async def test_stop_fails_the_waiting_calls(self) -> None:
        channel, rpc, silent = await self.unanswered()
        waiting = rpc.call(b"anyone?", silent)
        await rpc.stop()
        await fails(waiting, RPCStopped)
        await fails(rpc.call(b"again", silent), RPCStopped)
        declared = await channel.queue_declare("amq.rabbitmq.reply-to", passive=True)
        self.assertEqual(declared.queue, "amq.rabbitmq.reply-to")

    @inline
    async def test_a_closed_channel_fails_the_waiting_calls(self) -> None:
        channel, rpc, silent = await self.unanswered()
        waiting = rpc.call(b"anyone?", silent)
        channel.queue_declare("amq.rabbitmq.reply-to.nobody", passive=True).addErrback(lambda _: None)
        error = await fails(waiting, ChannelClosed)
        self.assertEqual(error.reply_code, 404)

    @inline
    async def test_replies_leave_the_acknowledgements_of_the_channel_alone(self) -> None:
        """A reply comes under the tag of the channel's next delivery: it
        must not count as settling that tag (an ack of a later delivery with
        ``multiple`` would take an unacknowledged one along)."""
        queue = await self.square_server()
        channel = await self.channel()
        rpc = await channel.rpc_client()
        work = (await channel.queue_declare("", exclusive=True)).queue
        deliveries: list[Message] = []
        await channel.basic_consume(work, deliveries.append)
        channel.basic_publish(b"first", routing_key=work)
        await eventually(lambda: len(deliveries) == 1, reactor)
        deliveries[0].ack()
        await rpc.call(b"2", queue)
        for body in (b"second", b"third"):
            channel.basic_publish(body, routing_key=work)
        await eventually(lambda: len(deliveries) == 3, reactor)
        deliveries[2].ack()
        deliveries[1].ack()
        self.assertEqual((await rpc.call(b"4", queue)).body, b"16", "the channel is still open")
        declared = await channel.queue_declare(work, passive=True)
        self.assertEqual(declared.message_count, 0)


class OwnBrokerTests(OwnBroker, RPCCases, TestCase):
    """Against this project's broker, in this process."""


class RabbitMQTests(RabbitMQNode, RPCCases, TestCase):
    """Against a private RabbitMQ node."""
