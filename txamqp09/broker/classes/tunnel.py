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
tunnel.request from the server, with the original properties and content
and the meta-data ``{"reply-code": 312, "reply-text": "NO_ROUTE"}``.
"""

from __future__ import annotations

from typing import Any

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

__all__ = ["META_DATA_HEADER", "TunnelState"]

#: The basic header that carries tunnel.request's meta-data.
META_DATA_HEADER = "x-tunnel-meta-data"


@register
class TunnelState(DeliveringState):
    """The tunnel class on one channel."""

    AMQP_CLASS = "tunnel"

    def tunnel_request(self, command: Command) -> None:
        """Publish the tunnelled block as its properties say.

        :raises AccessRefused: the user may not write to the proxy-name exchange.
        :raises NotFound: no exchange has the proxy-name.
        """
        method: Any = command.method
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
        """Send an unroutable request back to the client as a tunnel.request."""
        properties: Any = message.properties
        headers = dict(properties.headers or {})
        headers.pop(META_DATA_HEADER, None)
        tunnel_properties = self.channel.spec.TunnelProperties(
            headers=headers or None, proxy_name=message.exchange, data_name=message.routing_key,
            durable=1 if properties.delivery_mode == PERSISTENT else 0, broadcast=0,
        )
        self.send_content(
            "tunnel.request", tunnel_properties, message.body or b"",
            meta_data={"reply-code": reply_code, "reply-text": reply_text},
        )

    def deliver(self, consumer: Consumer, delivery_tag: int, redelivered: bool, message: Message) -> None:
        """The tunnel class has no consumers."""
        raise AssertionError("the tunnel class has no consumers")
