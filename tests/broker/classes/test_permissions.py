"""Publishing with the other classes needs the write permission basic.publish needs."""

from __future__ import annotations

from typing import Any

from twisted.internet import reactor

from tests.broker.classes.support import LiveClassTestCase
from tests.client.support import fails, inline
from txamqp09.broker.auth.permissions import Permissions
from txamqp09.broker.auth.security import Security
from txamqp09.broker.auth.users import UserDatabase
from txamqp09.client import ChannelClosed
from txamqp09.client.classes import FileClass, MessageClass, TunnelClass


def _no_write_on_amq_direct() -> dict[str, Any]:
    database = UserDatabase.default()
    database.set_permissions("guest", "/", Permissions(".*", r"^(?!amq\.direct$).*", ".*"))
    return {"security": Security(database, reactor)}


def _raise(error: Exception) -> None:
    raise error


class PublishPermissionTests(LiveClassTestCase):
    """guest may write to every exchange but amq.direct."""

    broker_options = _no_write_on_amq_direct()

    async def refused(self, channel: Any, method_name: str) -> None:
        error = await fails(channel.whenClosed().addCallback(_raise), ChannelClosed)
        self.assertEqual(error.reply_code, 403)
        self.assertIn("amq.direct", error.reply_text)
        self.assertEqual(error.method_name, method_name)

    @inline
    async def test_tunnel_request(self) -> None:
        channel = await self.channel()
        TunnelClass(channel).request(b"x", proxy_name="amq.direct", data_name="k")
        await self.refused(channel, "tunnel.request")

    @inline
    async def test_message_transfer(self) -> None:
        channel = await self.channel()
        MessageClass(channel).transfer(b"x", destination="amq.direct").addErrback(lambda _: None)
        await self.refused(channel, "message.transfer")

    @inline
    async def test_file_publish(self) -> None:
        channel = await self.channel()
        await FileClass(channel).publish(b"x", exchange="amq.direct", identifier="f")
        await self.refused(channel, "file.publish")

    @inline
    async def test_other_exchanges_are_allowed(self) -> None:
        channel = await self.channel()
        answer = await MessageClass(channel).transfer(b"x", destination="amq.fanout")
        self.assertEqual(answer.NAME, "message.ok")
