"""0-9's channel.resume, ping, pong and ok over loopback."""

from __future__ import annotations

from tests.broker.classes.support import LiveClassTestCase
from tests.client.support import fails, inline
from txamqp09.broker.classes.channel import ChannelMethods
from txamqp09.broker.classes.registry import vhost_classes
from txamqp09.client import ChannelClosed
from txamqp09.client.classes import MessageClass


class ChannelMethodTests(LiveClassTestCase):
    """On 0-9."""

    @inline
    async def test_ping_is_answered_ok_then_ponged(self) -> None:
        channel = await self.channel()
        answer = await channel.channel_ping()
        self.assertEqual(answer.NAME, "channel.ok")
        await self.round_trip(channel)
        self.assertEqual(self.server_classes().state(ChannelMethods).pongs_unanswered, 0)
        self.assertEqual((await channel.channel_pong()).NAME, "channel.ok")

    @inline
    async def test_resume_takes_over_an_interrupted_channel(self) -> None:
        first = await self.channel()
        self.assertTrue(first.channel_id.startswith(b"amq.channel-"))
        await first.queue_declare("kept")
        await first.basic_qos(prefetch_count=7)
        first.basic_publish(b"m", routing_key="kept")
        await first.connection.disconnect()

        connection = await self.connect()
        resumed = await connection.channel(resume=first.channel_id)
        self.assertEqual(resumed.channel_id, first.channel_id)
        got = await resumed.basic_get("", no_ack=True)
        self.assertEqual(got.body, b"m")
        (server,) = [c for c in self.server.factory.connections if c.channels]
        (server_channel,) = server.channels.values()
        self.assertEqual(server_channel.session.prefetch.count, 7)
        await fails(connection.channel(resume=first.channel_id), ChannelClosed)

    @inline
    async def test_resume_keeps_open_references(self) -> None:
        first = await self.channel()
        await first.queue_declare("refs")
        messages = MessageClass(first)
        await messages.open(b"r")
        await messages.append(b"r", b"abc")
        await first.connection.disconnect()

        resumed = await (await self.connect()).channel(resume=first.channel_id)
        messages = MessageClass(resumed)
        await messages.append(b"r", b"def")
        sent = messages.transfer(routing_key="refs", reference=b"r")
        await messages.close(b"r")
        await sent
        got = await messages.get("refs", no_ack=True)
        self.assertEqual(got.body, b"abcdef")
        self.assertEqual(len(vhost_classes(self.server.broker.vhosts["/"]).staging), 0)

    @inline
    async def test_resume_unknown_is_404(self) -> None:
        connection = await self.connect()
        error = await fails(connection.channel(resume=b"amq.channel-none"), ChannelClosed)
        self.assertEqual(error.reply_code, 404)
        self.assertIsNotNone(await connection.channel())

    @inline
    async def test_open_channel_cannot_be_resumed(self) -> None:
        first = await self.channel()
        connection = await self.connect()
        error = await fails(connection.channel(resume=first.channel_id), ChannelClosed)
        self.assertEqual(error.reply_code, 404)
