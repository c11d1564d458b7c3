"""The tunnel and dtx classes over loopback."""

from __future__ import annotations

from twisted.internet.defer import Deferred

from tests.broker.classes.support import LiveClassTestCase
from tests.client.support import fails, inline
from txamqp09.broker.classes.dtx import DtxState
from txamqp09.client import ChannelClosed, Message
from txamqp09.client.classes import DtxClass, TunnelClass


class TunnelTests(LiveClassTestCase):
    """On 0-9."""

    @inline
    async def test_request_routed_by_its_properties(self) -> None:
        channel = await self.channel()
        queue = await self.declare(channel, "tunnelled")
        await channel.queue_bind(queue=queue, exchange="amq.direct", routing_key="relay")
        TunnelClass(channel).request(
            b"\x01\x02frame", {"origin": "peer-7"}, proxy_name="amq.direct", data_name="relay",
            durable=True, headers={"h": 1},
        )
        await self.round_trip(channel)
        got = await channel.basic_get(queue, no_ack=True)
        self.assertEqual(got.body, b"\x01\x02frame")
        self.assertEqual((got.exchange, got.routing_key), ("amq.direct", "relay"))
        self.assertEqual(got.properties.delivery_mode, 2)
        self.assertEqual(got.headers, {"h": 1, "x-tunnel-meta-data": {"origin": b"peer-7"}})

    @inline
    async def test_unroutable_non_broadcast_comes_back(self) -> None:
        channel = await self.channel()
        returned: Deferred[Message] = Deferred()
        channel.return_handler = returned.callback
        TunnelClass(channel).request(b"lost", {"m": 1}, data_name="nowhere", headers={"h": 2})
        message = await returned
        self.assertEqual((message.method.NAME, message.method.reply_code), ("basic.return", 312))
        self.assertEqual((message.body, message.routing_key), (b"lost", "nowhere"))
        self.assertEqual(message.headers, {"h": 2, "x-tunnel-meta-data": {"m": 1}})

    @inline
    async def test_unroutable_broadcast_is_dropped(self) -> None:
        channel = await self.channel()
        returned: list = []
        channel.return_handler = returned.append
        TunnelClass(channel).request(b"x", data_name="nowhere", broadcast=True)
        await self.round_trip(channel)
        self.assertEqual(returned, [])

    @inline
    async def test_missing_proxy_exchange_is_404(self) -> None:
        channel = await self.channel()
        TunnelClass(channel).request(b"x", proxy_name="no-such-exchange")
        error = await fails(channel.whenClosed().addCallback(_raise), ChannelClosed)
        self.assertEqual(error.reply_code, 404)
        self.assertEqual((error.class_id, error.method_id), (110, 10))


class TunnelTests08(TunnelTests):
    """The same on 0-8."""

    version = "0-8"


class DtxTests(LiveClassTestCase):
    """On 0-9."""

    @inline
    async def test_start_then_commit(self) -> None:
        channel = await self.channel()
        queue = await self.declare(channel, "dtx")
        dtx = DtxClass(channel)
        await dtx.select()
        await dtx.start("xid-1")
        self.assertEqual(self.server_classes().state(DtxState).identifier, "xid-1")
        channel.basic_publish(b"held", routing_key=queue)
        await self.round_trip(channel)
        self.assertEqual(self.queue(queue).message_count, 0)
        await channel.tx_commit()
        self.assertEqual(self.queue(queue).message_count, 1)

    @inline
    async def test_rollback_drops_publishes(self) -> None:
        channel = await self.channel()
        queue = await self.declare(channel, "dtx-rollback")
        dtx = DtxClass(channel)
        await dtx.select()
        await dtx.start("xid-2")
        channel.basic_publish(b"dropped", routing_key=queue)
        await channel.tx_rollback()
        await channel.tx_commit()
        self.assertEqual(self.queue(queue).message_count, 0)

    @inline
    async def test_start_without_select_is_406(self) -> None:
        channel = await self.channel()
        error = await fails(DtxClass(channel).start("x"), ChannelClosed)
        self.assertEqual(error.reply_code, 406)
        self.assertIn("dtx.select", error.reply_text)

    @inline
    async def test_start_after_publishing_is_406(self) -> None:
        channel = await self.channel()
        dtx = DtxClass(channel)
        await dtx.select()
        channel.basic_publish(b"early", routing_key="q")
        error = await fails(dtx.start("late"), ChannelClosed)
        self.assertEqual(error.reply_code, 406)

    @inline
    async def test_second_start_is_406(self) -> None:
        channel = await self.channel()
        dtx = DtxClass(channel)
        await dtx.select()
        await dtx.start("one")
        error = await fails(dtx.start("two"), ChannelClosed)
        self.assertIn("'one'", error.reply_text)


class DtxTests08(DtxTests):
    """The same on 0-8."""

    version = "0-8"


def _raise(error: Exception) -> None:
    raise error
