"""Every method of a protocol version as a method of the channel.

:func:`channel_class` builds, once per version, a :class:`Channel` subclass
with one method per AMQP method a client sends on a channel:
``queue.bind`` becomes ``channel.queue_bind(queue=..., exchange=...)``, with
the method class's typed fields as keyword-only parameters and the spec's
text as its docstring (``help(channel.queue_bind)`` shows both). Methods with
responses return a Deferred for the response; content methods take ``body``
and ``properties`` too. The explicit wrappers of :class:`Channel` (such as
``queue_declare`` and ``basic_publish``) take precedence over the generated
ones of the same name.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Optional

from twisted.internet.defer import Deferred

from txamqp09.client.base import BodyLike, PropertiesLike
from txamqp09.client.channel import Channel
from txamqp09.wire.base import Method
from txamqp09.wire.versions import ProtocolVersion

__all__ = ["channel_class", "client_sent_methods"]

#: Channel methods the channel's own lifecycle sends; use Channel.close().
_MANAGED = frozenset({"channel.open", "channel.close", "channel.close-ok"})

_classes: dict[str, type[Channel]] = {}


def client_sent_methods(version: ProtocolVersion) -> list[type[Method]]:
    """The methods a client may send on a channel in *version*, in spec order."""
    return [
        cls
        for cls in version.methods.values()
        if "server" in cls.CHASSIS
        and not cls.NAME.startswith("connection.")
        and cls.NAME not in _MANAGED
    ]


def _signature(method_class: type[Method]) -> inspect.Signature:
    fields = list(inspect.signature(method_class.__init__).parameters.values())[1:]
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)]
    if method_class.CONTENT:
        parameters += [
            inspect.Parameter("body", inspect.Parameter.KEYWORD_ONLY, default=b"", annotation="bytes"),
            inspect.Parameter(
                "properties", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="PropertiesLike"
            ),
        ]
    parameters += [field.replace(kind=inspect.Parameter.KEYWORD_ONLY) for field in fields]
    returns = "Optional[Deferred[Any]]" if _answered(method_class) else "None"
    return inspect.Signature(parameters, return_annotation=returns)


def _answered(method_class: type[Method]) -> bool:
    """Calls of *method_class* return a Deferred for its response."""
    return bool(method_class.RESPONSES) and not method_class.CONTENT


_RETURNS = {
    True: "\n\n    Returns a Deferred firing with the response ({responses}); with nowait set, None at once.\n",
    False: "\n\n    Returns None: the method has no response.\n",
}


def _docstring(method_class: type[Method]) -> str:
    responses = ", ".join(response.NAME for response in method_class.RESPONSES)
    return (method_class.__doc__ or method_class.NAME) + _RETURNS[_answered(method_class)].format(
        responses=responses
    )


def _content_sender(method_class: type[Method]) -> Callable[..., Any]:
    def send(
        self: Channel, *, body: BodyLike = b"", properties: PropertiesLike = None, **fields: Any
    ) -> None:
        self.callWithContent(method_class(**fields), properties, body)

    return send


def _sender(method_class: type[Method]) -> Callable[..., Any]:
    def send(self: Channel, **fields: Any) -> Optional[Deferred[Any]]:
        return self.call(method_class(**fields))

    return send


def _caller(method_class: type[Method]) -> Callable[..., Any]:
    """The channel method that sends *method_class*, named and documented after it."""
    send = (_content_sender if method_class.CONTENT else _sender)(method_class)
    name = method_class.HANDLER
    send.__name__ = name
    send.__qualname__ = f"Channel.{name}"
    send.__doc__ = _docstring(method_class)
    send.__signature__ = _signature(method_class)  # type: ignore[attr-defined]
    return send


def channel_class(version: ProtocolVersion) -> type[Channel]:
    """The :class:`Channel` subclass with every client-sent method of *version*."""
    cls = _classes.get(version.name)
    if cls is None:
        methods: dict[str, Any] = {
            method_class.HANDLER: _caller(method_class)
            for method_class in client_sent_methods(version)
            if not hasattr(Channel, method_class.HANDLER)
        }
        suffix = version.name.replace("-", "_")
        methods["__doc__"] = f"A channel of an AMQP {version.name} connection.\n\n{Channel.__doc__}"
        cls = _classes[version.name] = type(f"Channel{suffix}", (Channel,), methods)
    return cls
