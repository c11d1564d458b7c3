"""A Twisted client for AMQP 0-9-1, 0-9 and 0-8.

::

    from twisted.internet import defer, task
    from txamqp09.client import connect

    async def main(reactor):
        connection = await connect(reactor, "amqp://guest:guest@localhost/")
        channel = await connection.channel()
        await channel.queue_declare("hello")
        channel.basic_publish(b"world", routing_key="hello")
        message = await channel.basic_get("hello", no_ack=True)
        print(message.body)
        await connection.disconnect()

    task.react(lambda reactor: defer.ensureDeferred(main(reactor)))

See docs/client.rst for the guide.
"""

from txamqp09.client.base import ChannelState
from txamqp09.client.channel import Channel
from txamqp09.client.connection import ClientConnection, ClientFactory, connect
from txamqp09.client.consumer import Consumer
from txamqp09.client.errors import (
    AlreadySettled,
    ChannelClosed,
    ClientError,
    ConnectionClosed,
    MessageNacked,
    NotInThisVersion,
    TLSFailed,
)
from txamqp09.client.message import Message
from txamqp09.client.params import ConnectionParameters, TLSOptions, parse_url
from txamqp09.client.events import (
    AttemptFailed,
    Connected,
    ConnectionLost,
    QueueRenamed,
    RecoveryEvent,
    RecoveryFailed,
)
from txamqp09.client.reconnect import LinkState, ReconnectingClient
from txamqp09.client.recovery import RecoveringChannel, RecoveringConsumer
from txamqp09.client.rpc import RPCClient, RPCStopped

__all__ = [
    "connect",
    "ClientConnection",
    "ClientFactory",
    "ConnectionParameters",
    "TLSOptions",
    "parse_url",
    "Channel",
    "ChannelState",
    "Consumer",
    "Message",
    "ReconnectingClient",
    "RPCClient",
    "RPCStopped",
    "LinkState",
    "RecoveringChannel",
    "RecoveringConsumer",
    "RecoveryEvent",
    "Connected",
    "ConnectionLost",
    "AttemptFailed",
    "QueueRenamed",
    "RecoveryFailed",
    "ClientError",
    "ChannelClosed",
    "ConnectionClosed",
    "TLSFailed",
    "MessageNacked",
    "AlreadySettled",
    "NotInThisVersion",
]
