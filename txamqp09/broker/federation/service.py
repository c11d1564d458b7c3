"""The federation service: runs the links the policies and upstreams ask for.

:class:`FederationService` is a child of the broker's MultiService. It
looks at which exchanges and queues of the virtual hosts that have
``federation-upstream`` parameters carry a federation policy
(:data:`~txamqp09.broker.model.policy.FEDERATION_KEYS`), starts a link for
each of their upstreams, and stops the links nothing asks for any more (a
policy, upstream or entity gone, an upstream changed).

Made, it adds the components ``federation-upstream`` and
``federation-upstream-set`` to the runtime configuration, which checks
their values from then on.

Nothing is polled. It looks again whenever a policy, an upstream or an
upstream set is set, changed or cleared (it watches them as
:class:`~txamqp09.broker.parameters.Components` parameters: through the API,
``amqp09ctl``, definitions, a vhost's deletion, the restore at start); it
watches the exchanges and queues declared and deleted in the virtual hosts
that have upstreams (:attr:`~txamqp09.broker.model.VirtualHost.entity_watchers`)
and looks at those alone; and each queue link consumes or pauses as its
queue tells it that consumers came or went, or messages started or stopped
waiting (:attr:`~txamqp09.broker.model.Queue.state_watchers`).

While the broker is low on memory or disk (its resource alarms), every
link :meth:`holds <txamqp09.broker.federation.links.Link.hold>` what
arrives, as the broker's blocked publishers wait, and republishes it once
the alarms have cleared.

Each broker names itself by the global parameter ``cluster_name`` (as
``rabbitmqctl set_cluster_name`` sets it on RabbitMQ), else by its node
name; links write it into the headers that stop messages going round a
ring of brokers, so brokers that federate with each other need names of
their own.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional, Union

from twisted.application.service import Service
from twisted.internet.defer import Deferred, gatherResults

from txamqp09.broker.alarms import ResourceAlarms
from txamqp09.broker.federation.links import ExchangeLink, Link, QueueLink
from txamqp09.broker.federation.upstreams import COMPONENTS, UPSTREAM, UPSTREAM_SET, Upstream, upstreams_for
from txamqp09.broker.model import Exchange, Queue, VirtualHost
from txamqp09.broker.model.policy import FEDERATION_KEYS
from txamqp09.broker.runtime import POLICY, RuntimeConfig
from txamqp09.links.uri import LocalAddress

__all__ = ["FederationService"]

#: The parameter components whose changes the service acts on at once.
_WATCHED = (POLICY, UPSTREAM, UPSTREAM_SET)

Entity = Union[Exchange, Queue]
#: A link's kind, vhost, entity name and upstream name.
LinkKey = tuple[str, str, str, str]
#: What a link is for: the entity, the upstream, the policy's name, the vhost.
Target = tuple[Entity, Upstream, Optional[str], VirtualHost]


def _federated(definition: Any, arguments: Any) -> bool:
    return any(key in definition for key in FEDERATION_KEYS) and "x-internal-purpose" not in arguments


class FederationService(Service):
    """Federation links of one broker (see the module's text).

    :param config: the broker's runtime configuration (parameters, model).
    :param reactor: connects the links.
    :param node: the node name (the cluster name when none is set).
    :param local: where this broker listens for AMQP, once it does (for
        upstream URIs without a host: this broker itself).
    :param alarms: the broker's resource alarms (none ever raised if omitted).
    """

    def __init__(self, config: RuntimeConfig, reactor: Any, node: str,
                 local: Callable[[], Optional[LocalAddress]] = lambda: None,
                 alarms: Optional[ResourceAlarms] = None) -> None:
        self.config = config
        self.alarms = alarms if alarms is not None else ResourceAlarms()
        self.local = local
        self.reactor = reactor
        self.node = node
        self.links: dict[LinkKey, Link] = {}
        #: The virtual hosts whose entities it watches, by name, with its watcher.
        self._watching: dict[str, tuple[VirtualHost, Callable[[Entity, bool], None]]] = {}
        for name, component in COMPONENTS.items():
            config.components.add(name, component)

    @property
    def cluster_name(self) -> str:
        """This broker's name in federation headers."""
        name = self.config.global_parameters.get("cluster_name")
        return name if isinstance(name, str) and name else self.node

    def startService(self) -> None:
        super().startService()
        self.alarms.subscribe(self._alarms_changed)
        for component in _WATCHED:
            self.config.components.watch(component, self)
        self.look()

    def _alarms_changed(self, active: frozenset[str]) -> None:
        """Hold every link's messages while an alarm is up; release them after."""
        for link in self.links.values():
            if active:
                link.hold()
            else:
                link.release()

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
        self.alarms.unsubscribe(self._alarms_changed)
        for component in _WATCHED:
            self.config.components.unwatch(component, self)
        self._watch([])
        links, self.links = list(self.links.values()), {}
        return gatherResults([link.stop() for link in links])

    def look(self) -> None:
        """Start and stop links as policies and upstreams ask."""
        parameters = self.config.parameters
        names = {vhost for (component, vhost, _) in parameters if component == UPSTREAM}
        vhosts = [vhost for name, vhost in self.config.broker.vhosts.items() if name in names]
        self._watch(vhosts)
        wanted: dict[LinkKey, Target] = {}
        for vhost in vhosts:
            if vhost.policies:
                entities: list[Entity] = [exchange for exchange in vhost.exchanges.values() if exchange.name]
                entities += vhost.queues.values()
                for entity in entities:
                    wanted.update(self._wanted(vhost, entity))
        for key, link in list(self.links.items()):
            target = wanted.get(key)
            if target is None or target[1] != link.upstream or target[0] is not getattr(link, link.kind):
                self._stop(key)
        self._start_missing(wanted)

    def _wanted(self, vhost: VirtualHost, entity: Entity) -> dict[LinkKey, Target]:
        """The links *entity* of *vhost* asks for, by key."""
        if not _federated(entity.effective_policy, entity.arguments):
            return {}
        kind = "exchange" if isinstance(entity, Exchange) else "queue"
        return {
            (kind, vhost.name, entity.name, upstream.name): (entity, upstream, entity.policy, vhost)
            for upstream in upstreams_for(entity.effective_policy, vhost.name, self.config.parameters)
        }

    def _start_missing(self, wanted: dict[LinkKey, Target]) -> None:
        """Start the links of *wanted* that are not running."""
        for key, target in wanted.items():
            if key not in self.links:
                self._start(key, target)

    def _stop(self, key: LinkKey) -> None:
        """Stop the link *key*, removing what it declared on its upstream."""
        self.links.pop(key).stop(clean_up=True)

    def _start(self, key: LinkKey, target: Target) -> None:
        entity, upstream, policy, vhost = target
        made: Link
        if isinstance(entity, Exchange):
            made = ExchangeLink(self.reactor, vhost, entity, upstream, policy, lambda: self.cluster_name, self.local)
        else:
            made = QueueLink(self.reactor, vhost, entity, upstream, policy, lambda: self.cluster_name, self.local)
        self.links[key] = made
        if self.alarms.active():
            made.hold()
        made.start()

    def _watch(self, vhosts: Iterable[VirtualHost]) -> None:
        """Watch the entities of *vhosts* (and of no other vhost)."""
        keep = {vhost.name: vhost for vhost in vhosts}
        for name, (vhost, watcher) in list(self._watching.items()):
            if keep.get(name) is not vhost:
                vhost.entity_watchers.remove(watcher)
                del self._watching[name]
        for name, vhost in keep.items():
            if name not in self._watching:
                watcher = self._entity_watcher(vhost)
                vhost.entity_watchers.append(watcher)
                self._watching[name] = (vhost, watcher)

    def _entity_watcher(self, vhost: VirtualHost) -> Callable[[Entity, bool], None]:
        def changed(entity: Entity, added: bool) -> None:
            """Start the links of a federated entity declared in *vhost*; stop
            those of one deleted."""
            if added:
                self._start_missing(self._wanted(vhost, entity))
                return
            for key, link in list(self.links.items()):
                if getattr(link, link.kind) is entity:
                    self._stop(key)

        return changed

    def status(self, vhost: Optional[str] = None) -> list[dict[str, Any]]:
        """Every link's status entry (``/api/federation-links``), or those of *vhost*."""
        return [link.status_entry(self.node) for link in self.links.values() if vhost in (None, link.vhost.name)]
