"""The classes of AMQP 0-8 and 0-9 beyond basic: file, stream, dtx, tunnel, message.

Each class's broker logic is a module of its own, sharing the model's
exchanges and queues; :func:`~.registry.class_handler` gives the server
channel the handlers of their methods, and :class:`~.registry.ChannelClasses`
holds each channel's state of them. See docs/amqp09-classes.rst.
"""

from txamqp09.broker.classes import channel, dtx, file, message, stream, tunnel
from txamqp09.broker.classes.registry import ChannelClasses, class_handler

__all__ = ["ChannelClasses", "channel", "class_handler", "dtx", "file", "message", "stream", "tunnel"]
