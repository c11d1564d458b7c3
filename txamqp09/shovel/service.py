"""The shovel service: one :class:`~.worker.Shovel` per ``shovel`` parameter,
and one per static shovel.

:class:`ShovelService` is a child of the broker's
:class:`~txamqp09.broker.service.BrokerService`, started after the store's
configuration is restored and the listeners listen. Made, it adds the
``shovel`` component to the runtime configuration
(:class:`~txamqp09.broker.parameters.Components`), which checks shovel
definitions from then on; running, it watches that component: a shovel set through the
management API, ``amqp09ctl set_parameter shovel ...``, a definitions file,
or kept in the store from before a restart, starts; a changed one starts
again with its new definition; a cleared one stops. It answers
``/api/shovels`` (:meth:`ShovelService.status`), and restarts or deletes a
shovel on request (:meth:`ShovelService.restart`, :meth:`ShovelService.delete`).

Static shovels (the ``shovels`` of the definitions file the broker starts
with, see :func:`~txamqp09.shovel.definition.static_shovels`) run from start
to stop, as RabbitMQ's configured ones: they belong to no vhost, are not
runtime parameters, and cannot be restarted or deleted while the broker
runs (the requests find no such shovel); the file says what they are at
the next start.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from typing import Any, Optional

from twisted.application.service import Service
from twisted.internet.defer import Deferred, DeferredList, succeed

from txamqp09.broker.runtime import ConfigError, RuntimeConfig
from txamqp09.links.uri import LocalAddress
from txamqp09.shovel.definition import SHOVEL, ShovelDefinition
from txamqp09.shovel.worker import Shovel

__all__ = ["COMPONENT", "ShovelService"]

#: The runtime-parameter component of dynamic shovels.
COMPONENT = "shovel"


class ShovelService(Service):
    """Runs the shovels the runtime configuration defines (see the module's text).

    :param config: the broker's runtime configuration.
    :param clock: the reactor the shovels connect and wait with.
    :param local: where the broker listens for AMQP (None: nowhere on TCP),
        for shovel URIs without a host.
    :param node_name: this broker's name in the ``x-shovelled`` header.
    :param static: the static shovels' definitions, by name.
    """

    def __init__(
        self,
        config: RuntimeConfig,
        clock: Any,
        local: Callable[[], Optional[LocalAddress]],
        node_name: Optional[str] = None,
        static: Optional[Mapping[str, ShovelDefinition]] = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.local = local
        self.node_name = node_name if node_name is not None else f"txamqp09@{socket.gethostname()}"
        self.static = dict(static or {})
        #: The dynamic shovels running, by (vhost, name).
        self.shovels: dict[tuple[str, str], Shovel] = {}
        #: The static shovels running, by name.
        self.static_shovels: dict[str, Shovel] = {}
        config.components.add(COMPONENT, SHOVEL)

    def startService(self) -> None:
        """Start the static shovels and the dynamic ones defined now, and
        follow the changes."""
        super().startService()
        for name, definition in self.static.items():
            self.static_shovels[name] = self._started(None, name, definition)
        self.config.components.watch(COMPONENT, self)

    def stopService(self) -> Deferred[Any]:
        """Stop every shovel; fires once all are idle."""
        super().stopService()
        self.config.components.unwatch(COMPONENT, self)
        shovels = [*self.static_shovels.values(), *self.shovels.values()]
        self.static_shovels, self.shovels = {}, {}
        return DeferredList([shovel.stop() for shovel in shovels])

    def _started(self, vhost: Optional[str], name: str, definition: ShovelDefinition) -> Shovel:
        """A shovel (static when *vhost* is None), started."""
        shovel = Shovel(self.clock, vhost, name, definition, self.local, self.node_name, self._completed)
        shovel.start()
        return shovel

    # -- the watcher of the "shovel" component ------------------------------------

    def parameter_set(self, vhost: str, name: str, value: Any) -> None:
        """A shovel is new or changed: (re)start it."""
        self._stop(vhost, name)
        self.shovels[vhost, name] = self._started(vhost, name, ShovelDefinition.from_json(value))

    def parameter_cleared(self, vhost: str, name: str) -> None:
        """A shovel is gone: stop it."""
        self._stop(vhost, name)

    def _stop(self, vhost: str, name: str) -> Deferred[None]:
        shovel = self.shovels.pop((vhost, name), None)
        return succeed(None) if shovel is None else shovel.stop()

    def _completed(self, shovel: Shovel) -> None:
        """*shovel* moved what ``src-delete-after`` asked: remove its
        parameter (a static one is forgotten until the next start)."""
        if shovel.vhost is None:
            if self.static_shovels.get(shovel.name) is shovel:
                del self.static_shovels[shovel.name]
            return
        if self.shovels.get((shovel.vhost, shovel.name)) is shovel:
            try:
                self.config.clear_parameter(COMPONENT, shovel.vhost, shovel.name)
            except ConfigError:
                self.shovels.pop((shovel.vhost, shovel.name), None)

    # -- status and control ----------------------------------------------------------

    def status(self, vhost: Optional[str] = None) -> list[dict[str, Any]]:
        """The shovels' status (of *vhost*; or all, the static ones first),
        as ``/api/shovels`` lists them."""
        static = [shovel.status() for _, shovel in sorted(self.static_shovels.items())] if vhost is None else []
        return static + [
            shovel.status() for (where, _), shovel in sorted(self.shovels.items())
            if vhost is None or where == vhost
        ]

    def delete(self, vhost: str, name: str) -> bool:
        """Delete shovel *name* of *vhost*: clear its parameter, which stops
        it; False if there is no such shovel."""
        if (vhost, name) not in self.shovels:
            return False
        self.config.clear_parameter(COMPONENT, vhost, name)
        return True

    def restart(self, vhost: str, name: str) -> bool:
        """Stop shovel *name* of *vhost* and start it again; False if there is none."""
        shovel = self.shovels.get((vhost, name))
        if shovel is None:
            return False
        value = self.config.parameters[COMPONENT, vhost, name]
        self.parameter_set(vhost, name, value)
        return True
