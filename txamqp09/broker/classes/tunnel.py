"""The tunnel class (0-8, 0-9): blocks of data carried between peers.

tunnel.request publishes its content to the exchange named by the
``proxy-name`` property (empty: the default exchange) with the
``data-name`` property as routing key. The message is persistent when
``durable`` is non-zero. Its basic headers are the request's ``headers``
property, plus the request's meta-data table under ``x-tunnel-meta-data``
when it is not empty. Consumers of any class receive it.

``broadcast`` non-zero sends the request to every queue it is routed to and
drops it silently when there is none. With ``broadcast`` zero the request
must reach a queue: an unroutable one comes back to the sender as a
basic.return (312 NO_ROUTE) with the content and the basic properties the
request was translated to. (The 0-9 grammar lists a server-sent
tunnel.request, but its XML lets only servers receive the method, so the
broker never sends one.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from txamqp09.broker.classes.common import (
    PERSISTENT,
    TRANSIENT,
    DeliveringState,
    basic_message,
    to_basic,
)
from txamqp09.broker.classes.registry import register
from txamqp09.broker.model import Consumer, Message
from txamqp09.wire.errors import AMQPError
from txamqp09.wire.frames import Command

if TYPE_CHECKING:
    from txamqp09.wire import methods

__all__ = ["META_DATA_HEADER", "TunnelState"]

#: The basic header that carries tunnel.request's meta-data.
META_DATA_HEADER = "x-tunnel-meta-data"


@register
class TunnelState(DeliveringState):
    """The tunnel class on one channel."""

    AMQP_CLASS = "tunnel"

    def tunnel_request(self, command: Command[methods.TunnelRequest]) -> None:
        """Publish the tunnelled block as its properties say.

        :raises AccessRefused: the user may not write to the proxy-name exchange.
        :raises NotFound: no exchange has the proxy-name.
        """
        method = command.method
        properties: Any = command.properties
        exchange = properties.proxy_name or ""
        routing_key = properties.data_name or ""
        channel = self.channel
        try:
            channel.guard.check(channel.number, channel.spec.BasicPublish(exchange=exchange))
        except AMQPError as error:
            error.class_id, error.method_id = method.CLASS_ID, method.METHOD_ID
            raise
        raw = to_basic(
            properties, channel.version.properties[60],
            delivery_mode=PERSISTENT if properties.durable else TRANSIENT,
            extra_headers={META_DATA_HEADER: method.meta_data} if method.meta_data else None,
        )
        message = basic_message(channel, exchange, routing_key, raw, command.body)
        self.publish(exchange, message, not properties.broadcast, False)

    def returned(self, reply_code: int, reply_text: str, message: Message) -> None:
        """An unroutable request comes back as basic.return (tunnel has no return method)."""
        self.channel.publisher.returned(reply_code, reply_text, message)

    def deliver(self, consumer: Consumer, delivery_tag: int, redelivered: bool, message: Message) -> None:
        """The tunnel class has no consumers."""
        raise AssertionError("the tunnel class has no consumers")
