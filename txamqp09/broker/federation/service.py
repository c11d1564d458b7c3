"""The federation service: runs the links the policies and upstreams ask for.

:class:`FederationService` is a child of the broker's MultiService. It looks
at which exchanges and queues of the virtual hosts that have
``federation-upstream`` parameters carry a federation policy
(:data:`~txamqp09.broker.model.policy.FEDERATION_KEYS`), starts a link for
each of their upstreams, stops the links nothing asks for any more (a
policy, upstream or entity gone, an upstream changed), and lets each queue
link consume or pause as its queue's consumers come and go.

It looks at once whenever a policy, an upstream or an upstream set is set,
changed or cleared (it watches them as
:class:`~txamqp09.broker.parameters.Components` parameters: through the API,
``amqp09ctl``, definitions, a vhost's deletion, the restore at start). What
the model announces to nobody — exchanges and queues declared or deleted
under a federation policy, a federated queue's consumers and backlog — it
finds by looking again every :data:`INTERVAL` seconds; a broker without
federation upstreams pays one dictionary scan per look.

Each broker names itself by the global parameter ``cluster_name`` (as
``rabbitmqctl set_cluster_name`` sets it on RabbitMQ), else by its node
name; links write it into the headers that stop messages going round a
ring of brokers, so brokers that federate with each other need names of
their own.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

from twisted.application.service import Service
from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.task import LoopingCall

from txamqp09.broker.federation.links import ExchangeLink, Link, QueueLink
from txamqp09.broker.federation.upstreams import UPSTREAM, UPSTREAM_SET, Upstream, upstreams_for
from txamqp09.broker.model import Exchange, Queue, VirtualHost
from txamqp09.broker.model.policy import FEDERATION_KEYS
from txamqp09.broker.runtime import POLICY, RuntimeConfig
from txamqp09.links.uri import LocalAddress

__all__ = ["FederationService"]

#: Seconds between two looks at entities declared or deleted and queue consumers.
INTERVAL = 0.2
#: The parameter components whose changes the service acts on at once.
_WATCHED = (POLICY, UPSTREAM, UPSTREAM_SET)


def _federated(definition: Any, arguments: Any) -> bool:
    return any(key in definition for key in FEDERATION_KEYS) and "x-internal-purpose" not in arguments


class FederationService(Service):
    """Federation links of one broker (see the module's text).

    :param config: the broker's runtime configuration (parameters, model).
    :param reactor: connects the links and runs the looks.
    :param node: the node name (the cluster name when none is set).
    :param local: where this broker listens for AMQP, once it does (for
        upstream URIs without a host: this broker itself).
    """

    def __init__(self, config: RuntimeConfig, reactor: Any, node: str,
                 local: Callable[[], Optional[LocalAddress]] = lambda: None) -> None:
        self.config = config
        self.local = local
        self.reactor = reactor
        self.node = node
        self.links: dict[tuple[str, str, str, str], Link] = {}
        self._loop = LoopingCall(self.look)
        self._loop.clock = reactor

    @property
    def cluster_name(self) -> str:
        """This broker's name in federation headers."""
        name = self.config.global_parameters.get("cluster_name")
        return name if isinstance(name, str) and name else self.node

    def startService(self) -> None:
        super().startService()
        self._loop.start(INTERVAL, now=True)
        for component in _WATCHED:
            self.config.components.watch(component, self)

    def parameter_set(self, vhost: str, name: str, value: Any) -> None:
        """A policy, upstream or set is new or changed: act on it at once."""
        if self.running:
            self.look()

    def parameter_cleared(self, vhost: str, name: str) -> None:
        """A policy, upstream or set is gone: stop its links at once."""
        if self.running:
            self.look()

    def stopService(self) -> Deferred[Any]:
        super().stopService()
        for component in _WATCHED:
            self.config.components.unwatch(component, self)
        if self._loop.running:
            self._loop.stop()
        links, self.links = list(self.links.values()), {}
        return gatherResults([link.stop() for link in links])

    def look(self) -> None:
        """Start and stop links as policies and upstreams ask; let queue
        links consume or pause."""
        wanted = self._wanted()
        for key, link in list(self.links.items()):
            target = wanted.get(key)
            if target is None or target[1] != link.upstream or target[0] is not getattr(link, link.kind):
                del self.links[key]
                link.stop(clean_up=True)
        for key, (entity, upstream, policy, vhost) in wanted.items():
            if key not in self.links:
                made: Link
                if isinstance(entity, Exchange):
                    made = ExchangeLink(self.reactor, vhost, entity, upstream, policy, lambda: self.cluster_name,
                                        self.local)
                else:
                    made = QueueLink(self.reactor, vhost, entity, upstream, policy, lambda: self.cluster_name,
                                     self.local)
                self.links[key] = made
                made.start()
        for running in self.links.values():
            if isinstance(running, QueueLink):
                running.adjust()

    def _wanted(self) -> dict[tuple[str, str, str, str], tuple[Union[Exchange, Queue], Upstream, Optional[str], VirtualHost]]:
        parameters = self.config.parameters
        vhosts = {vhost for (component, vhost, _) in parameters if component == UPSTREAM}
        wanted: dict[tuple[str, str, str, str], tuple[Union[Exchange, Queue], Upstream, Optional[str], VirtualHost]] = {}
        for name in vhosts:
            vhost = self.config.broker.vhosts.get(name)
            if vhost is None or not vhost.policies:
                continue
            entities: list[tuple[str, Union[Exchange, Queue]]] = [
                ("exchange", exchange) for exchange in vhost.exchanges.values() if exchange.name
            ]
            entities += [("queue", queue) for queue in vhost.queues.values()]
            for kind, entity in entities:
                if not _federated(entity.effective_policy, entity.arguments):
                    continue
                for upstream in upstreams_for(entity.effective_policy, name, parameters):
                    wanted[kind, name, entity.name, upstream.name] = (entity, upstream, entity.policy, vhost)
        return wanted

    def status(self, vhost: Optional[str] = None) -> list[dict[str, Any]]:
        """Every link's status entry (``/api/federation-links``), or those of *vhost*."""
        return [link.status_entry(self.node) for link in self.links.values() if vhost in (None, link.vhost.name)]
