"""The broker's runtime configuration: changed while it runs, kept in its store.

:class:`RuntimeConfig` is the one place users, password hashes, tags,
vhosts, permissions, topic permissions, policies, operator policies, vhost
and user limits and runtime parameters change. It changes them where the
broker reads them — the users database (:class:`~.auth.users.UserDatabase`,
which AMQP logins and the management API's basic authentication both check)
and the model's virtual hosts (policies, ``max-queues``) — and writes every
change to the message store as settings (:meth:`~txamqp09.store.interface.IMessageStore.put_setting`),
each setting being the entry a RabbitMQ definitions export holds for it. A
restarted broker (after a clean stop or ``kill -9``) reads them back with
:meth:`RuntimeConfig.restore`.

Definitions (RabbitMQ's JSON: ``rabbitmqctl export_definitions``) go both
ways: :meth:`RuntimeConfig.export` writes everything in RabbitMQ's format,
:meth:`RuntimeConfig.import_definitions` checks a whole file before it
changes anything, then creates or updates its vhosts, users, permissions,
topic permissions, limits, policies, parameters, exchanges, queues and
bindings. What it cannot act on is named in :attr:`ImportReport.unsupported`
(and logged), never dropped silently.

At start-up (:meth:`RuntimeConfig.start`) the store's settings come first;
a ``--definitions`` file is then imported over them on every start, as
RabbitMQ's ``load_definitions`` does. A broker starting with an empty store
and no file gets RabbitMQ's defaults: vhost ``/`` and user ``guest``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from twisted.internet.defer import Deferred, succeed
from twisted.logger import Logger

from txamqp09 import __version__
from txamqp09.broker.auth.definitions import (
    Definitions,
    DefinitionsError,
    definition_entries as _entries,
    pairs_to_object,
)
from txamqp09.broker.auth.passwords import PasswordHash, hash_password
from txamqp09.broker.auth.permissions import Permissions
from txamqp09.broker.auth.users import (
    LIMIT_NAMES,
    TopicPermissions,
    User,
    UserDatabase,
    VirtualHost,
    check_limits,
)
from txamqp09.broker.model.arguments import CLASSIC, QUEUE_TYPES, QueueArguments
from txamqp09.broker.model.exchange import EXCHANGE_TYPES
from txamqp09.broker.model.policy import Policy, PolicyError
from txamqp09.broker.model.queue import Queue
from txamqp09.broker.model.vhost import Broker
from txamqp09.broker.parameters import Components, ParameterKey
from txamqp09.store.interface import IMessageStore, Settings
from txamqp09.wire.errors import AMQPError

__all__ = [
    "ConfigError",
    "ImportReport",
    "MAX_NAME_BYTES",
    "RuntimeConfig",
    "jsonable",
    "queue_policy_fields",
]

#: The longest name (of a vhost, user, queue, exchange, policy...) in UTF-8 bytes.
MAX_NAME_BYTES = 255
#: Components of runtime parameters that stand for something else here.
VHOST_LIMITS = "vhost-limits"
OPERATOR_POLICY = "operator_policy"
#: The component under which the parameters' watchers see policies (as
#: RabbitMQ keeps its policies: runtime parameters of component ``policy``).
POLICY = "policy"
#: Top-level definitions keys this broker reads.
_SECTIONS = (
    "users", "vhosts", "permissions", "topic_permissions", "parameters", "global_parameters",
    "policies", "queues", "exchanges", "bindings", "access_realms", "realm_grants",
)
#: Top-level keys that describe the file, not the broker.
_DESCRIPTIVE = ("rabbit_version", "rabbitmq_version", "product_name", "product_version", "explanation")
#: The setting kinds in the store, with the fields of an entry that make its key.
_SETTING_KEYS: dict[str, tuple[str, ...]] = {
    "vhosts": ("name",),
    "users": ("name",),
    "permissions": ("user", "vhost"),
    "topic_permissions": ("user", "vhost", "exchange"),
    "access_realms": ("vhost", "name"),
    "realm_grants": ("user", "vhost", "realm"),
    "policies": ("vhost", "name"),
    "parameters": ("component", "vhost", "name"),
    "global_parameters": ("name",),
}
#: The store setting that says the broker has been configured once.
_INITIALISED = ("node", "initialised")
#: Something with no client: definitions declare queues as no connection.
_NO_CLIENT: Any = None


class ConfigError(ValueError):
    """A change that cannot be made; nothing was changed.

    :ivar not_found: the change names something that does not exist (404
        over HTTP) rather than something invalid (400).
    """

    def __init__(self, reason: str, *, not_found: bool = False) -> None:
        super().__init__(reason)
        self.not_found = not_found


@dataclass
class ImportReport:
    """What an import did.

    :ivar unsupported: what the file holds that this broker does not act
        on, each named (``"top-level key 'federation_upstreams'"``).
    """

    unsupported: list[str] = field(default_factory=list)


def check_name(kind: str, name: Any) -> str:
    """*name* as the name of a *kind* (``"vhost"``, ``"user"`` ...).

    :raises ConfigError: not a string, empty, or over :data:`MAX_NAME_BYTES` bytes.
    """
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{kind} name must be a non-empty string, not {name!r}")
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise ConfigError(f"{kind} name is longer than {MAX_NAME_BYTES} bytes")
    return name


def queue_policy_fields(queue: Any) -> dict[str, Any]:
    """The policy fields of a queue's (or an exchange's) management JSON:
    ``policy``, ``operator_policy`` and ``effective_policy_definition``, as
    RabbitMQ 3.10 shows them (``null`` / ``{}`` without a policy).

    For the queue and exchange endpoints: ``body.update(queue_policy_fields(queue))``.
    """
    return {
        "policy": queue.policy,
        "operator_policy": queue.operator_policy,
        "effective_policy_definition": dict(queue.effective_policy),
    }


def jsonable(value: Any) -> Any:
    """*value* (an argument: bytes, numbers, tables, arrays) as JSON shows it:
    bytes as text (UTF-8, else base64), tuples as lists."""
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(value).decode("ascii")
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _key(entry: Mapping[str, Any], fields: tuple[str, ...]) -> str:
    values = [entry[name] for name in fields]
    return values[0] if len(values) == 1 else json.dumps(values, ensure_ascii=False)


def _field(entry: Mapping[str, Any], name: str, where: str, default: Any = ...) -> Any:
    if name in entry:
        return entry[name]
    if default is ...:
        raise ConfigError(f"{where}: missing field {name!r}")
    return default


class RuntimeConfig:
    """The broker's runtime configuration (see the module's text).

    :param database: the users database the broker's security checks.
    :param broker: the model, whose virtual hosts hold policies and limits.
    :param store: where changes are kept (None: memory only).
    """

    log = Logger()

    def __init__(self, database: UserDatabase, broker: Broker, store: Optional[IMessageStore] = None) -> None:
        self.database = database
        self.broker = broker
        self.store = store
        #: Runtime parameters other than vhost limits and operator policies,
        #: by (component, vhost, name).
        self.parameters: dict[tuple[str, str, str], Any] = {}
        #: Global parameters by name.
        self.global_parameters: dict[str, Any] = {}
        #: Called with a vhost's name once it is deleted (to close its connections).
        self.vhost_deleted: list[Callable[[str], None]] = []
        #: Called with a user's name once the user is deleted.
        self.user_deleted: list[Callable[[str], None]] = []
        #: Checks of the parameters' values, and the services that act on
        #: them: each service adds its component as it is made.
        self.components = Components()
        self._saved: Settings = {}

    # -- start-up and the store --------------------------------------------------

    def start(self, settings: Settings, definitions: Optional[Mapping[str, Any]] = None) -> ImportReport:
        """Take the store's *settings* (if it has any), then import *definitions*
        (the ``--definitions`` file, less what other services read from it)
        over them, and keep the result.

        :raises ConfigError: the file is invalid (nothing of it applied).
        """
        if _INITIALISED[1] in settings.get(_INITIALISED[0], {}):
            self.restore(settings)
        self._saved = settings
        report = ImportReport()
        if definitions is not None:
            report = self.import_definitions(definitions)
        else:
            self._sync()
            self.save()
        if self.store is not None:
            self.store.put_setting(*_INITIALISED, True)
        return report

    def restore(self, settings: Settings) -> None:
        """Replace the configuration by what the store kept (*settings*)."""
        data = {kind: list(settings.get(kind, {}).values()) for kind in _SETTING_KEYS}
        database = UserDatabase()
        try:
            Definitions.from_json(data, database)
        except DefinitionsError as error:
            raise ConfigError(f"the store's settings cannot be read: {error}") from None
        self.database.replace(database)
        for vhost in list(self.broker.vhosts):
            if vhost not in database.vhosts:
                self.broker.remove_vhost(vhost)
        self.parameters.clear()
        self.global_parameters.clear()
        for model in self.broker.vhosts.values():
            model.policies.policies.clear()
            model.policies.operator_policies.clear()
        self._apply_sections(self._checked(data, database), ImportReport())
        self._sync()

    def settings(self) -> Settings:
        """The configuration as store settings: definitions entries by kind and key."""
        exported = self._configuration()
        return {
            kind: {_key(entry, fields): entry for entry in exported.get(kind, [])}
            for kind, fields in _SETTING_KEYS.items()
        }

    def save(self) -> None:
        """Write what changed since the last save to the store; tell the
        parameters' watchers what changed."""
        current = self.settings()
        if self.store is not None:
            for kind, entries in current.items():
                before = self._saved.get(kind, {})
                for key, entry in entries.items():
                    if before.get(key) != entry:
                        self.store.put_setting(kind, key, entry)
                for key in before.keys() - entries.keys():
                    self.store.remove_setting(kind, key)
        self._saved = current
        self.components.update(self._watched())

    def _watched(self) -> dict[ParameterKey, Any]:
        """The parameters and the policies as their watchers see them: a
        policy as parameter ``(policy, vhost, name)``, its definitions JSON as value."""
        watched = dict(self.parameters)
        for vhost in self.broker.vhosts.values():
            for policy in vhost.policies.policies.values():
                watched[POLICY, vhost.name, policy.name] = policy.to_json()
        return watched

    def when_saved(self) -> Deferred[None]:
        """Fires once everything saved so far is on disk (at once without a store)."""
        if self.store is None:
            return succeed(None)
        return self.store.when_durable(self.store.last_sequence)

    def _sync(self) -> None:
        """Make the model follow the database: its vhosts, their limits and policies."""
        for name in self.database.vhosts:
            vhost = self.broker.add_vhost(name)
            vhost.max_queues = self.database.limit("vhost", name, "max-queues")
            vhost.apply_policies()

    # -- export --------------------------------------------------------------------

    def _configuration(self) -> dict[str, Any]:
        """Everything but the entities, as definitions sections."""
        data = Definitions(self.database).to_json()
        data["policies"] = [
            policy.to_json() for vhost in self.broker.vhosts.values() for policy in vhost.policies.policies.values()
        ]
        data["parameters"] = self._parameters()
        data["global_parameters"] = [
            {"name": name, "value": value} for name, value in self.global_parameters.items()
        ]
        return data

    def _parameters(self) -> list[dict[str, Any]]:
        parameters = [
            {"vhost": vhost, "component": component, "name": name, "value": value}
            for (component, vhost, name), value in self.parameters.items()
        ]
        parameters += [
            {"vhost": vhost, "component": VHOST_LIMITS, "name": "limits", "value": dict(limits)}
            for vhost, limits in self.database.vhost_limits.items()
        ]
        for vhost in self.broker.vhosts.values():
            for policy in vhost.policies.operator_policies.values():
                value = policy.to_json()
                del value["vhost"], value["name"]
                parameters.append(
                    {"vhost": vhost.name, "component": OPERATOR_POLICY, "name": policy.name, "value": value}
                )
        return parameters

    def export(self, vhost: Optional[str] = None) -> dict[str, Any]:
        """Definitions in RabbitMQ's format: everything, or one vhost's
        entities, policies and parameters (``/api/definitions/{vhost}``).

        :raises ConfigError: *vhost* does not exist (not_found).
        """
        if vhost is not None:
            self.require_vhost(vhost)
        data: dict[str, Any] = {"rabbit_version": "3.10.8", "rabbitmq_version": "3.10.8",
                                "product_name": "txamqp09", "product_version": __version__}
        configuration = self._configuration()
        entities = self._entities(vhost)
        if vhost is None:
            data.update(configuration)
        else:
            data["policies"] = [p for p in configuration["policies"] if p["vhost"] == vhost]
            data["parameters"] = [p for p in configuration["parameters"] if p["vhost"] == vhost]
            for entry in (*entities["queues"], *entities["exchanges"], *entities["bindings"]):
                del entry["vhost"]
            for policy in data["policies"]:
                del policy["vhost"]
        data.update(entities)
        return data

    def _entities(self, only: Optional[str]) -> dict[str, list[dict[str, Any]]]:
        queues: list[dict[str, Any]] = []
        exchanges: list[dict[str, Any]] = []
        bindings: list[dict[str, Any]] = []
        for vhost in self.broker.vhosts.values():
            if only is not None and vhost.name != only:
                continue
            for queue in vhost.queues.values():
                if queue.exclusive:
                    continue
                queues.append({
                    "name": queue.name, "vhost": vhost.name, "type": queue.settings.queue_type,
                    "durable": queue.durable,
                    "auto_delete": queue.auto_delete, "arguments": jsonable(queue.arguments),
                })
            for exchange in vhost.exchanges.values():
                if exchange.name and not exchange.name.startswith("amq."):
                    exchanges.append({
                        "name": exchange.name, "vhost": vhost.name, "type": exchange.kind,
                        "durable": exchange.durable, "auto_delete": exchange.auto_delete,
                        "internal": exchange.internal, "arguments": jsonable(exchange.arguments),
                    })
                for binding in exchange.bindings.values():
                    destination = binding.destination
                    if isinstance(destination, Queue) and destination.exclusive:
                        continue
                    if exchange is vhost.default_exchange:
                        continue
                    bindings.append({
                        "source": exchange.name, "vhost": vhost.name, "destination": destination.name,
                        "destination_type": "queue" if isinstance(destination, Queue) else "exchange",
                        "routing_key": binding.routing_key, "arguments": jsonable(binding.arguments),
                    })
        return {"queues": queues, "exchanges": exchanges, "bindings": bindings}

    # -- import --------------------------------------------------------------------

    def import_definitions(self, data: Any, vhost: Optional[str] = None) -> ImportReport:
        """Check all of *data*, then apply it (``POST /api/definitions``).

        :param vhost: import into this vhost only (``/api/definitions/{vhost}``):
            entries' own ``vhost`` fields are ignored, users and vhosts too.
        :raises ConfigError: something in *data* is invalid; nothing was changed.
        """
        if not isinstance(data, Mapping):
            raise ConfigError("definitions must be a JSON object")
        report = ImportReport()
        if vhost is not None:
            self.require_vhost(vhost)
            data = {
                section: [{**entry, "vhost": vhost} if isinstance(entry, Mapping) else entry
                          for entry in (data.get(section) or [])]
                for section in ("queues", "exchanges", "bindings", "policies", "parameters")
                if section in data
            }
        for key in data:
            if key not in _SECTIONS and key not in _DESCRIPTIVE:
                report.unsupported.append(f"top-level key {key!r}")
        database = self.database.copy()
        security = {section: data[section] for section in Definitions.SECTIONS if section in data}
        try:
            Definitions.from_json(security, database)
        except DefinitionsError as error:
            raise ConfigError(str(error)) from None
        checked = self._checked(data, database)
        self.database.replace(database)
        self._apply_sections(checked, report)
        self._sync()
        self.save()
        for item in report.unsupported:
            self.log.warn("definitions: not supported by this broker, not applied: {item}", item=item)
        return report

    def _checked(self, data: Mapping[str, Any], database: UserDatabase) -> _Checked:
        """Everything of *data* beyond the users database, checked against
        *database* (which holds the file's vhosts already).

        :raises ConfigError: something is invalid.
        """
        try:
            return self._check_sections(data, database)
        except DefinitionsError as error:
            raise ConfigError(str(error)) from None

    def _check_sections(self, data: Mapping[str, Any], database: UserDatabase) -> _Checked:
        checked = _Checked()
        for where, entry in _entries(data, "policies"):
            name = _field(entry, "vhost", where)
            self._require(database, name, where)
            checked.policies.append((self._policy(name, _field(entry, "name", where), entry, where), False))
        for where, entry in _entries(data, "parameters"):
            component = _field(entry, "component", where)
            name = _field(entry, "vhost", where)
            self._require(database, name, where)
            value = _field(entry, "value", where)
            if component == VHOST_LIMITS:
                checked.vhost_limits.append((name, self._limits("vhost", value, where)))
            elif component == OPERATOR_POLICY:
                if not isinstance(value, Mapping):
                    raise ConfigError(f"{where}: an operator policy's value must be an object")
                policy = self._policy(name, _field(entry, "name", where), value, where, operator=True)
                checked.policies.append((policy, True))
            else:
                parameter = check_name("parameter", entry.get("name"))
                self._check_parameter(str(component), parameter, value, f"{where}: ")
                checked.parameters.append((str(component), name, parameter, value))
        for where, entry in _entries(data, "global_parameters"):
            checked.global_parameters.append((check_name("parameter", _field(entry, "name", where)), entry.get("value")))
        for where, entry in _entries(data, "exchanges"):
            checked.exchanges.append(self._exchange(database, entry, where))
        for where, entry in _entries(data, "queues"):
            checked.queues.append(self._queue(database, entry, where))
        declared = {(e["vhost"], e["name"]) for e in checked.exchanges}
        queues = {(q["vhost"], q["name"]) for q in checked.queues}
        for where, entry in _entries(data, "bindings"):
            checked.bindings.append(self._binding(entry, where, declared, queues))
        return checked

    def _require(self, database: UserDatabase, vhost: Any, where: str) -> None:
        if vhost not in database.vhosts:
            raise ConfigError(f"{where}: virtual host {vhost!r} does not exist", not_found=True)

    def _limits(self, kind: str, limits: Any, where: str) -> dict[str, int]:
        try:
            return check_limits(kind, limits)
        except ValueError as error:
            raise ConfigError(f"{where}: {error}") from None

    def _policy(self, vhost: str, name: Any, body: Mapping[str, Any], where: str, operator: bool = False) -> Policy:
        if "definition" in body:
            body = {**body, "definition": pairs_to_object(body["definition"])}
        try:
            return Policy.from_json(vhost, check_name("policy", name), body, operator=operator)
        except PolicyError as error:
            raise ConfigError(f"{where}: {error}") from None

    def _exchange(self, database: UserDatabase, entry: Mapping[str, Any], where: str) -> dict[str, Any]:
        name = check_name("exchange", _field(entry, "name", where))
        vhost = _field(entry, "vhost", where)
        self._require(database, vhost, where)
        kind = _field(entry, "type", where)
        if kind not in EXCHANGE_TYPES:
            raise ConfigError(f"{where}: exchange type {kind!r} is not supported by this broker "
                              f"(it has {', '.join(sorted(EXCHANGE_TYPES))})")
        arguments = _field(entry, "arguments", where, {})
        if not isinstance(arguments, Mapping):
            raise ConfigError(f"{where}: arguments must be an object")
        return {"vhost": vhost, "name": name, "type": kind, "durable": bool(entry.get("durable", True)),
                "auto_delete": bool(entry.get("auto_delete", False)),
                "internal": bool(entry.get("internal", False)), "arguments": dict(arguments)}

    def _queue(self, database: UserDatabase, entry: Mapping[str, Any], where: str) -> dict[str, Any]:
        name = check_name("queue", _field(entry, "name", where))
        vhost = _field(entry, "vhost", where)
        self._require(database, vhost, where)
        arguments = dict(_field(entry, "arguments", where, {}) or {})
        queue_type = entry.get("type") or arguments.get("x-queue-type") or CLASSIC
        if queue_type not in QUEUE_TYPES:
            raise ConfigError(f"{where}: queue type {queue_type!r} is not supported by this broker")
        if queue_type != CLASSIC:
            arguments["x-queue-type"] = queue_type
        try:
            QueueArguments(arguments, f"queue {name!r} in vhost {vhost!r}")
        except AMQPError as error:
            raise ConfigError(f"{where}: {error.reply_text}") from None
        return {"vhost": vhost, "name": name, "durable": bool(entry.get("durable", True)),
                "auto_delete": bool(entry.get("auto_delete", False)), "arguments": arguments}

    def _binding(
        self, entry: Mapping[str, Any], where: str,
        exchanges: set[tuple[str, str]], queues: set[tuple[str, str]],
    ) -> dict[str, Any]:
        vhost = _field(entry, "vhost", where)
        source = _field(entry, "source", where)
        destination = _field(entry, "destination", where)
        kind = _field(entry, "destination_type", where)
        if kind not in ("queue", "exchange"):
            raise ConfigError(f"{where}: destination_type must be queue or exchange, not {kind!r}")
        model = self.broker.vhosts.get(vhost)
        if (vhost, source) not in exchanges and (model is None or source not in model.exchanges):
            raise ConfigError(f"{where}: no exchange {source!r} in vhost {vhost!r}", not_found=True)
        known = queues if kind == "queue" else exchanges
        places: Mapping[str, Any] = {} if model is None else (model.queues if kind == "queue" else model.exchanges)
        if (vhost, destination) not in known and destination not in places:
            raise ConfigError(f"{where}: no {kind} {destination!r} in vhost {vhost!r}", not_found=True)
        arguments = _field(entry, "arguments", where, {}) or {}
        return {"vhost": vhost, "source": source, "destination": destination, "kind": kind,
                "routing_key": str(entry.get("routing_key", "")), "arguments": dict(arguments)}

    def _apply_sections(self, checked: _Checked, report: ImportReport) -> None:
        """Apply what :meth:`_checked` accepted (the users database is in place)."""
        for name, limits in checked.vhost_limits:
            self.database.set_limits("vhost", name, limits)
        for vhost in self.database.vhosts:
            self.broker.add_vhost(vhost)
        for policy, operator in checked.policies:
            self.broker.vhosts[policy.vhost].policies.put(policy, operator=operator)
        for component, vhost, name, value in checked.parameters:
            self.parameters[component, vhost, name] = value
            if component not in self.components:
                report.unsupported.append(f"parameter component {component!r} ({vhost}/{name}): kept, not acted on")
        for name, value in checked.global_parameters:
            self.global_parameters[name] = value
        for exchange in checked.exchanges:
            self._declare(report, f"exchange {exchange['name']!r}", self._declare_exchange, exchange)
        for queue in checked.queues:
            self._declare(report, f"queue {queue['name']!r}", self._declare_queue, queue)
        for binding in checked.bindings:
            self._declare(report, f"binding to {binding['kind']} {binding['destination']!r}", self._bind, binding)

    def _declare_exchange(self, e: Mapping[str, Any]) -> None:
        self.broker.vhosts[e["vhost"]].declare_exchange(
            e["name"], e["type"], durable=e["durable"], auto_delete=e["auto_delete"],
            internal=e["internal"], arguments=e["arguments"],
        )

    def _declare_queue(self, q: Mapping[str, Any]) -> None:
        self.broker.vhosts[q["vhost"]].declare_queue(
            q["name"], _NO_CLIENT, durable=q["durable"], auto_delete=q["auto_delete"], arguments=q["arguments"]
        )

    def _bind(self, b: Mapping[str, Any]) -> None:
        vhost = self.broker.vhosts[b["vhost"]]
        if b["kind"] == "queue":
            vhost.bind_queue(b["destination"], b["source"], b["routing_key"], b["arguments"], _NO_CLIENT)
        else:
            vhost.bind_exchange(b["destination"], b["source"], b["routing_key"], b["arguments"])

    def _declare(
        self, report: ImportReport, what: str, declare: Callable[[Mapping[str, Any]], None],
        entry: Mapping[str, Any],
    ) -> None:
        """Declare an entity; one that exists with other properties is kept
        as it is and reported (RabbitMQ 3.10 keeps it too, without a word)."""
        try:
            declare(entry)
        except AMQPError as error:
            report.unsupported.append(f"{what} not changed: {error.reply_text}")

    # -- checks --------------------------------------------------------------------

    def require_vhost(self, name: str) -> None:
        """:raises ConfigError: no vhost *name* (not_found)."""
        if name not in self.database.vhosts:
            raise ConfigError(f"virtual host {name!r} does not exist", not_found=True)

    def require_user(self, name: str) -> None:
        """:raises ConfigError: no user *name* (not_found)."""
        if name not in self.database.users:
            raise ConfigError(f"user {name!r} does not exist", not_found=True)

    # -- users -----------------------------------------------------------------------

    def put_user(
        self, name: str, *, password: Optional[str] = None, password_hash: Optional[str] = None,
        hashing_algorithm: Optional[str] = None, tags: Iterable[str] = (),
    ) -> User:
        """Create or replace user *name* (``PUT /api/users/{name}``).

        Without *password* and *password_hash* an existing user keeps their
        hash; a new one gets none (no password login). An empty
        *password_hash* removes the password.

        :raises ConfigError: a bad name or hash.
        """
        check_name("user", name)
        existing = self.database.users.get(name)
        if password is not None:
            hashed = hash_password(password)
        elif password_hash is not None:
            try:
                hashed = PasswordHash.from_definition(password_hash, hashing_algorithm or "rabbit_password_hashing_sha256")
            except ValueError as error:
                raise ConfigError(str(error)) from None
        elif existing is not None:
            hashed = existing.password_hash
        else:
            hashed = PasswordHash("rabbit_password_hashing_sha256", b"")
        user = self.database.put_user(User(name, hashed, tuple(tags), existing.extra if existing else {}))
        self.save()
        return user

    def delete_user(self, name: str) -> None:
        """Delete user *name* with their permissions and limits."""
        self.require_user(name)
        self.database.delete_user(name)
        self.save()
        for listener in self.user_deleted:
            listener(name)

    def set_permissions(self, user: str, vhost: str, configure: str, write: str, read: str) -> None:
        """``PUT /api/permissions/{vhost}/{user}``.

        :raises ConfigError: no such user or vhost, or a bad expression.
        """
        self.require_vhost(vhost)
        self.require_user(user)
        try:
            permissions = Permissions(configure, write, read)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        self.database.set_permissions(user, vhost, permissions)
        self.save()

    def clear_permissions(self, user: str, vhost: str) -> None:
        """``DELETE /api/permissions/{vhost}/{user}``."""
        if self.database.permissions_for(user, vhost) is None:
            raise ConfigError(f"user {user!r} has no permissions on vhost {vhost!r}", not_found=True)
        self.database.clear_permissions(user, vhost)
        self.save()

    def set_topic_permissions(self, user: str, vhost: str, exchange: str, write: str, read: str) -> None:
        """``PUT /api/topic-permissions/{vhost}/{user}``."""
        self.require_vhost(vhost)
        self.require_user(user)
        try:
            permissions = TopicPermissions(check_name("exchange", exchange), write, read)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        self.database.set_topic_permissions(user, vhost, permissions)
        self.save()

    def clear_topic_permissions(self, user: str, vhost: str, exchange: Optional[str] = None) -> None:
        """``DELETE /api/topic-permissions/{vhost}/{user}`` (every exchange, or one)."""
        if not any(key[:2] == (user, vhost) and exchange in (None, key[2]) for key in self.database.topic_permissions):
            raise ConfigError(f"user {user!r} has no topic permissions on vhost {vhost!r}", not_found=True)
        self.database.clear_topic_permissions(user, vhost, exchange)
        self.save()

    # -- vhosts ----------------------------------------------------------------------

    def put_vhost(self, name: str, metadata: Optional[Mapping[str, Any]] = None) -> VirtualHost:
        """Create vhost *name* or change its description, tags or default
        queue type (``PUT /api/vhosts/{name}``)."""
        check_name("vhost", name)
        existing = self.database.vhosts.get(name)
        extra = dict(existing.extra) if existing is not None else {}
        extra.update(metadata or {})
        vhost = self.database.add_vhost(VirtualHost(name, extra))
        self._sync()
        self.save()
        return vhost

    def delete_vhost(self, name: str) -> None:
        """Delete vhost *name*: its queues, exchanges, permissions, policies,
        limits and parameters; its connections are closed by the listeners."""
        self.require_vhost(name)
        self.database.delete_vhost(name)
        self.broker.remove_vhost(name)
        self.parameters = {key: value for key, value in self.parameters.items() if key[1] != name}
        self.save()
        for listener in self.vhost_deleted:
            listener(name)

    # -- policies ----------------------------------------------------------------------

    def put_policy(self, vhost: str, name: str, body: Mapping[str, Any], *, operator: bool = False) -> Policy:
        """Set a policy (or operator policy) and apply it at once to what exists.

        :raises ConfigError: no such vhost, or an invalid policy.
        """
        self.require_vhost(vhost)
        policy = self._policy(vhost, name, body, "policy", operator)
        model = self.broker.add_vhost(vhost)
        model.policies.put(policy, operator=operator)
        model.apply_policies()
        self.save()
        return policy

    def delete_policy(self, vhost: str, name: str, *, operator: bool = False) -> None:
        """Remove a policy; what it applied to goes back to its arguments (or
        the next matching policy)."""
        self.require_vhost(vhost)
        model = self.broker.add_vhost(vhost)
        if not model.policies.remove(name, operator=operator):
            raise ConfigError(f"no policy {name!r} in vhost {vhost!r}", not_found=True)
        model.apply_policies()
        self.save()

    def policies(self, vhost: Optional[str] = None, *, operator: bool = False) -> list[Policy]:
        """The policies (or operator policies) of *vhost*, or of every vhost."""
        found: list[Policy] = []
        for model in self.broker.vhosts.values():
            if vhost is None or model.name == vhost:
                table = model.policies.operator_policies if operator else model.policies.policies
                found.extend(table.values())
        return sorted(found, key=lambda policy: (policy.vhost, policy.name))

    # -- limits ------------------------------------------------------------------------

    def set_limit(self, kind: str, name: str, limit: str, value: Any) -> None:
        """Set one limit of a user or vhost (``PUT /api/vhost-limits/{vhost}/{limit}``).

        :raises ConfigError: no such user or vhost, an unknown limit or a bad value.
        """
        (self.require_user if kind == "user" else self.require_vhost)(name)
        table = self.database.user_limits if kind == "user" else self.database.vhost_limits
        limits = dict(table.get(name, {}))
        limits[limit] = value
        self.database.set_limits(kind, name, self._limits(kind, limits, f"{kind} limits"))
        self._sync()
        self.save()

    def clear_limit(self, kind: str, name: str, limit: str) -> None:
        """Remove one limit of a user or vhost."""
        (self.require_user if kind == "user" else self.require_vhost)(name)
        if limit not in LIMIT_NAMES[kind]:
            raise ConfigError(f"{limit!r} is not a {kind} limit", not_found=True)
        table = self.database.user_limits if kind == "user" else self.database.vhost_limits
        limits = {key: value for key, value in table.get(name, {}).items() if key != limit}
        self.database.set_limits(kind, name, limits)
        self._sync()
        self.save()

    # -- parameters ----------------------------------------------------------------------

    def set_parameter(self, component: str, vhost: str, name: str, value: Any) -> None:
        """``PUT /api/parameters/{component}/{vhost}/{name}``: kept for the
        component (vhost limits and operator policies have their own calls)."""
        self.require_vhost(vhost)
        check_name("parameter", name)
        if component in (VHOST_LIMITS, OPERATOR_POLICY, POLICY):
            raise ConfigError(f"component {component!r} is set through its own endpoint")
        self._check_parameter(component, name, value)
        self.parameters[component, vhost, name] = value
        self.save()

    def clear_parameter(self, component: str, vhost: str, name: str) -> None:
        """``DELETE /api/parameters/{component}/{vhost}/{name}``."""
        if self.parameters.pop((component, vhost, name), ...) is ...:
            raise ConfigError(f"no parameter {component}/{vhost}/{name}", not_found=True)
        self.save()

    def _check_parameter(self, component: str, name: str, value: Any, where: str = "") -> None:
        """:raises ConfigError: *component* refuses *value* (RabbitMQ's texts, one a line)."""
        errors = self.components.errors(component, name, value)
        if errors:
            raise ConfigError(where + "\n".join(errors))

    def parameter_entries(self, component: Optional[str] = None, vhost: Optional[str] = None) -> list[dict[str, Any]]:
        """Runtime parameters as ``/api/parameters`` lists them (URIs without
        their credentials)."""
        return [
            {**entry, "value": self.components.shown(entry["component"], entry["value"])}
            for entry in self._parameters()
            if component in (None, entry["component"]) and vhost in (None, entry["vhost"])
        ]


@dataclass
class _Checked:
    """The parts of a definitions file beyond the users database, checked."""

    vhost_limits: list[tuple[str, dict[str, int]]] = field(default_factory=list)
    policies: list[tuple[Policy, bool]] = field(default_factory=list)
    parameters: list[tuple[str, str, str, Any]] = field(default_factory=list)
    global_parameters: list[tuple[str, Any]] = field(default_factory=list)
    exchanges: list[dict[str, Any]] = field(default_factory=list)
    queues: list[dict[str, Any]] = field(default_factory=list)
    bindings: list[dict[str, Any]] = field(default_factory=list)

