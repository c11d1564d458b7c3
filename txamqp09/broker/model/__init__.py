"""The broker's model: virtual hosts, exchanges, queues, consumers, sessions.

Nothing here imports Twisted or knows about frames; the server layer turns
commands into calls on these objects and the :class:`~.session.ISink` calls
back into frames.
"""

from txamqp09.broker.model.exchange import (
    EXCHANGE_TYPES,
    Binding,
    DirectExchange,
    Exchange,
    FanoutExchange,
    HeadersExchange,
    TopicExchange,
)
from txamqp09.broker.model.message import Message, Origin, origin
from txamqp09.broker.model.queue import Consumer, Delivery, Prefetch, Queue
from txamqp09.broker.model.session import Client, ISink, Mode, Session
from txamqp09.broker.model.store import Persistence
from txamqp09.broker.model.vhost import Broker, VirtualHost

__all__ = [
    "EXCHANGE_TYPES",
    "Binding",
    "Broker",
    "Client",
    "Consumer",
    "Delivery",
    "DirectExchange",
    "Exchange",
    "FanoutExchange",
    "HeadersExchange",
    "Message",
    "Mode",
    "Origin",
    "Persistence",
    "Prefetch",
    "Queue",
    "Session",
    "ISink",
    "TopicExchange",
    "VirtualHost",
    "origin",
]
