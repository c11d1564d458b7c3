"""The client's side of 0-9's ping, pong, channel-id and resume, against a scripted server."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from txamqp09.testing.scripted import ScriptedServer
from txamqp09.wire.versions import AMQP0_9


class ServerPingTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.server = ScriptedServer(AMQP0_9)
        self.server.open()
        self.channel = self.server.open_channel(1)

    def test_server_ping_is_answered_ok_then_ponged(self) -> None:
        self.server.send(1, self.server.spec.ChannelPing())
        self.assertEqual(self.server.names(), ["channel.ok", "channel.pong"])
        self.server.send(1, self.server.spec.ChannelOk())
        self.assertIs(self.channel.closed_by, None)

    def test_server_pong_is_answered_ok(self) -> None:
        self.server.send(1, self.server.spec.ChannelPong())
        self.assertEqual(self.server.names(), ["channel.ok"])

    def test_open_ok_carries_the_channel_id(self) -> None:
        self.assertEqual(self.channel.channel_id, b"")
        second = self.server.client.channel(2)
        self.server.send(2, self.server.spec.ChannelOpenOk(channel_id=b"amq.channel-2"))
        self.assertEqual(self.successResultOf(second).channel_id, b"amq.channel-2")

    def test_resume_sends_channel_resume_and_opens_on_ok(self) -> None:
        resumed = self.server.client.channel(3, resume=b"amq.channel-old")
        [(number, method)] = self.server.methods()
        self.assertEqual((number, method.NAME, method.channel_id), (3, "channel.resume", b"amq.channel-old"))
        self.assertNoResult(resumed)
        self.server.send(3, self.server.spec.ChannelOk())
        self.assertEqual(self.successResultOf(resumed).channel_id, b"amq.channel-old")
