"""Runtime parameter components: their checks, how the API shows them, who acts on them.

RabbitMQ's plugins own the components of runtime parameters (``shovel``,
``federation-upstream`` ...): each checks a value before it is kept and acts
on it once it is. :class:`Components` is that registry for this broker's
:class:`~txamqp09.broker.runtime.RuntimeConfig`, which knows no component of
its own: the services that act on parameters plug theirs in from above
(:class:`~txamqp09.shovel.service.ShovelService` the ``shovel`` component,
:class:`~txamqp09.broker.federation.service.FederationService` the
federation upstreams and sets), as they are made, before the broker starts:

- a :class:`Component`, :meth:`added <Components.add>` under its name,
  checks a value (``errors``, RabbitMQ's texts) and says how the management
  API shows it (``shown``: URIs without their passwords); the values of a
  component nobody added are kept unchecked, and a definitions import
  reports them as not acted on;
- a :class:`ParameterWatcher` (the shovel service, the federation links)
  :meth:`watches <Components.watch>` one component: it is told of every
  parameter of that component at once, then of each one set, changed or
  cleared — by the API, ``amqp09ctl``, a definitions import, or the store's
  configuration restored at start. A value set again unchanged tells nobody
  (RabbitMQ's ``notify`` is not called either).

Policies reach watchers the same way, as parameters of the component
:data:`~txamqp09.broker.runtime.POLICY` (RabbitMQ keeps them as runtime
parameters of component ``policy`` too): set, changed or cleared by the API,
``amqp09ctl``, a definitions import, a vhost's deletion or the restore at start.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Component", "Components", "ParameterKey", "ParameterWatcher"]

#: A parameter's (component, vhost, name).
ParameterKey = tuple[str, str, str]


def _as_is(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Component:
    """What the broker knows of one component's values.

    :ivar errors: ``errors(name, value)``: why *value* cannot be parameter
        *name*, as RabbitMQ words it, one text per problem (none: valid).
    :ivar shown: the value as the management API lists it (credentials redacted).
    """

    errors: Callable[[str, Any], list[str]]
    shown: Callable[[Any], Any] = _as_is


class ParameterWatcher(Protocol):
    """Acts on the parameters of one component."""

    def parameter_set(self, vhost: str, name: str, value: Any) -> None:
        """Parameter *name* of *vhost* is new or has a new *value*."""

    def parameter_cleared(self, vhost: str, name: str) -> None:
        """Parameter *name* of *vhost* is gone."""


class Components:
    """The known components and the watchers of their parameters.

    :param components: the components by name (others are kept unchecked).
    """

    def __init__(self, components: Mapping[str, Component] = {}) -> None:
        self.components = dict(components)
        self._watchers: dict[str, list[ParameterWatcher]] = {}
        self._known: dict[ParameterKey, Any] = {}

    def add(self, name: str, component: Component) -> None:
        """Check and show the parameters of component *name* with *component*."""
        self.components[name] = component

    def __contains__(self, name: object) -> bool:
        """Whether component *name* was added (something acts on its parameters)."""
        return name in self.components

    def errors(self, component: str, name: str, value: Any) -> list[str]:
        """Why *value* cannot be parameter *name* of *component* (none: it can)."""
        known = self.components.get(component)
        return [] if known is None else known.errors(name, value)

    def shown(self, component: str, value: Any) -> Any:
        """*value* as the API shows a parameter of *component*."""
        known = self.components.get(component)
        return value if known is None else known.shown(value)

    def watch(self, component: str, watcher: ParameterWatcher) -> None:
        """Tell *watcher* of every parameter of *component* now, and of every change later."""
        self._watchers.setdefault(component, []).append(watcher)
        for (kind, vhost, name), value in list(self._known.items()):
            if kind == component:
                watcher.parameter_set(vhost, name, value)

    def unwatch(self, component: str, watcher: ParameterWatcher) -> None:
        """Tell *watcher* nothing more."""
        watchers = self._watchers.get(component, [])
        if watcher in watchers:
            watchers.remove(watcher)

    def update(self, parameters: Mapping[ParameterKey, Any]) -> None:
        """The parameters are now *parameters*: tell the watchers what changed."""
        before, self._known = self._known, dict(parameters)
        for key in before.keys() - parameters.keys():
            for watcher in list(self._watchers.get(key[0], [])):
                watcher.parameter_cleared(key[1], key[2])
        for key, value in parameters.items():
            if key not in before or before[key] != value:
                for watcher in list(self._watchers.get(key[0], [])):
                    watcher.parameter_set(key[1], key[2], value)
