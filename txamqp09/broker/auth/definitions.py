"""RabbitMQ definitions files: load users, vhosts and permissions, export them again.

``rabbitmqctl export_definitions`` (or the management UI's export) writes a
JSON object whose ``users``, ``vhosts`` and ``permissions`` lists this module
reads into a :class:`~txamqp09.broker.auth.users.UserDatabase`. Every other
top-level key (``queues``, ``exchanges``, ``bindings``, ``policies``,
``parameters``, ``topic_permissions``, version fields ...) and every field of
an entry this module does not interpret (a user's ``limits``, a vhost's
``metadata``) is kept as it was and written back by :meth:`Definitions.to_json`,
so a file survives a load and an export unchanged, with three normalisations:

* user ``tags`` written as a comma-separated string (RabbitMQ before 3.9) are
  exported as a list;
* a user without ``hashing_algorithm`` (RabbitMQ before 3.6, which means MD5)
  is exported with ``"hashing_algorithm": "rabbit_password_hashing_md5"``;
* a user given a clear-text ``password`` (handy in hand-written files) is
  exported with its SHA-256 ``password_hash`` instead.

Two keys of our own carry the 0-8/0-9 access realms; RabbitMQ ignores them::

    "access_realms": [
      {"vhost": "/", "name": "/data/billing",
       "exchanges": ["billing.*"], "queues": ["billing.*", "invoices"]}
    ],
    "realm_grants": [
      {"user": "billing-app", "vhost": "/", "realm": "/data/billing",
       "rights": ["passive", "active", "write", "read", "exclusive"]}
    ]
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from txamqp09.broker.auth.passwords import PasswordHash, hash_password
from txamqp09.broker.auth.permissions import Permission, Permissions
from txamqp09.broker.auth.realms import AccessRealm, Right
from txamqp09.broker.auth.users import (
    TopicPermissions,
    User,
    UserDatabase,
    VirtualHost,
    check_limits,
)

__all__ = ["Definitions", "DefinitionsError", "definition_entries", "load_definitions"]

_USER_FIELDS = ("name", "password_hash", "hashing_algorithm", "tags", "password", "limits")


class DefinitionsError(ValueError):
    """A definitions file cannot be loaded; the text says where and why."""


@dataclass
class Definitions:
    """A loaded definitions file: the security database and everything else in it.

    :ivar database: users, vhosts, permissions, realms and grants.
    :ivar other: the top-level entries this module does not interpret, in order.
    :ivar layout: the file's top-level keys in their original order.
    :ivar source: the parsed object as read, for a full import
        (:meth:`txamqp09.broker.runtime.RuntimeConfig.import_definitions`).
    """

    database: UserDatabase
    other: dict[str, Any] = field(default_factory=dict)
    layout: list[str] = field(default_factory=list)
    source: Mapping[str, Any] = field(default_factory=dict)

    #: The top-level keys this class reads into the users database.
    SECTIONS: ClassVar[tuple[str, ...]] = ("users", "vhosts", "permissions", "topic_permissions",
                                           "access_realms", "realm_grants")

    @classmethod
    def from_json(cls, data: Mapping[str, Any], database: UserDatabase | None = None) -> Definitions:
        """Read a parsed definitions object (into *database*, merged with what
        it holds, if given).

        :raises DefinitionsError: a required field is missing or a value is invalid.
        """
        if not isinstance(data, Mapping):
            raise DefinitionsError("definitions must be a JSON object")
        if database is None:
            database = UserDatabase()
        for key, reader in _READERS.items():
            for where, entry in definition_entries(data, key):
                try:
                    reader(database, entry)
                except (KeyError, TypeError, ValueError) as error:
                    raise DefinitionsError(f"{where}: {_describe(error)}") from None
        other = {key: value for key, value in data.items() if key not in _READERS}
        return cls(database, other, list(data), data)

    def to_json(self) -> dict[str, Any]:
        """The definitions as a JSON-ready object, in the original key order."""
        ours = {key: writer(self.database) for key, writer in _WRITERS.items()}
        keys = self.layout + [key for key in ours if key not in self.layout and ours[key]]
        return {key: ours[key] if key in ours else self.other[key] for key in keys}

    def dumps(self) -> str:
        """The definitions as JSON text."""
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"

    def write(self, path: str | Path) -> None:
        """Export the definitions to ``path``."""
        Path(path).write_text(self.dumps(), encoding="utf-8")


def load_definitions(path: str | Path) -> Definitions:
    """Load a definitions file (what ``--definitions FILE`` does).

    :raises DefinitionsError: the file is not valid JSON or not valid definitions.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise DefinitionsError(f"cannot read definitions from {path}: {error}") from None
    return Definitions.from_json(data)


def _describe(error: Exception) -> str:
    if isinstance(error, KeyError):
        return f"missing field {error.args[0]!r}"
    return str(error)


def definition_entries(data: Mapping[str, Any], key: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """The entries of list *key* of *data*, each with where it is (``users[2]``).

    :raises DefinitionsError: the list or an entry is not what it should be.
    """
    entries = data.get(key, [])
    if not isinstance(entries, list):
        raise DefinitionsError(f"{key} must be a list")
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise DefinitionsError(f"{key}[{index}] must be an object")
        yield f"{key}[{index}]", entry


def _extra(entry: Mapping[str, Any], known: tuple[str, ...]) -> dict[str, Any]:
    return {key: value for key, value in entry.items() if key not in known}


def _text(entry: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = entry[key] if default is None else entry.get(key, default)
    if not isinstance(value, str):
        raise TypeError(f"{key} must be a string, not {value!r}")
    return value


def _tags(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(tag.strip() for tag in value.split(",") if tag.strip())
    if isinstance(value, list) and all(isinstance(tag, str) for tag in value):
        return tuple(value)
    raise ValueError("tags must be a list of strings or a comma-separated string")


def _read_user(database: UserDatabase, entry: Mapping[str, Any]) -> None:
    if "password" in entry:
        hashed = hash_password(_text(entry, "password"))
    else:
        algorithm = entry.get("hashing_algorithm")
        hashed = PasswordHash.from_definition(_text(entry, "password_hash", ""), algorithm)
    tags = _tags(entry.get("tags", []))
    user = database.put_user(User(_text(entry, "name"), hashed, tags, _extra(entry, _USER_FIELDS)))
    limits = entry.get("limits") or {}
    database.set_limits("user", user.name, check_limits("user", limits))


def _read_vhost(database: UserDatabase, entry: Mapping[str, Any]) -> None:
    limits = entry.get("limits")
    known = ("name", "limits") if isinstance(limits, Mapping) else ("name",)
    vhost = database.add_vhost(VirtualHost(_text(entry, "name"), _extra(entry, known)))
    if isinstance(limits, Mapping):
        database.set_limits("vhost", vhost.name, check_limits("vhost", limits))


def _read_permission(database: UserDatabase, entry: Mapping[str, Any]) -> None:
    permissions = Permissions(*(_text(entry, permission.value) for permission in Permission))
    database.set_permissions(_text(entry, "user"), _text(entry, "vhost"), permissions)


def _read_topic_permission(database: UserDatabase, entry: Mapping[str, Any]) -> None:
    permissions = TopicPermissions(
        _text(entry, "exchange"), _text(entry, "write", ".*"), _text(entry, "read", ".*")
    )
    database.set_topic_permissions(_text(entry, "user"), _text(entry, "vhost"), permissions)


def _read_realm(database: UserDatabase, entry: Mapping[str, Any]) -> None:
    realm = AccessRealm(
        _text(entry, "name"), _patterns(entry, "exchanges"), _patterns(entry, "queues")
    )
    database.add_realm(_text(entry, "vhost"), realm)


def _patterns(entry: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{key} must be a list of names or patterns")
    return tuple(value)


def _read_grant(database: UserDatabase, entry: Mapping[str, Any]) -> None:
    rights = [Right(right) for right in entry["rights"]]
    database.grant(_text(entry, "user"), _text(entry, "vhost"), _text(entry, "realm"), rights)


def _write_users(database: UserDatabase) -> list[dict[str, Any]]:
    return [
        {
            "name": user.name,
            "password_hash": user.password_hash.to_definition(),
            "hashing_algorithm": user.password_hash.algorithm,
            "tags": list(user.tags),
            "limits": dict(database.user_limits.get(user.name, {})),
            **user.extra,
        }
        for user in database.users.values()
    ]


def _write_vhosts(database: UserDatabase) -> list[dict[str, Any]]:
    return [
        {"name": vhost.name, **vhost.extra, **_limits_entry(database.vhost_limits.get(vhost.name))}
        for vhost in database.vhosts.values()
    ]


def _limits_entry(limits: Mapping[str, int] | None) -> dict[str, Any]:
    """A vhost's ``limits`` field: only when it has some (a file's empty list stays as it was)."""
    return {"limits": dict(limits)} if limits else {}


def _write_permissions(database: UserDatabase) -> list[dict[str, Any]]:
    return [
        {"user": user, "vhost": vhost, **{p.value: getattr(perms, p.value) for p in Permission}}
        for (user, vhost), perms in database.permissions.items()
    ]


def _write_topic_permissions(database: UserDatabase) -> list[dict[str, Any]]:
    return [
        {"user": user, "vhost": vhost, "exchange": exchange, "write": topic.write, "read": topic.read}
        for (user, vhost, exchange), topic in database.topic_permissions.items()
    ]


def _write_realms(database: UserDatabase) -> list[dict[str, Any]]:
    return [
        {"vhost": vhost, "name": realm.name, "exchanges": list(realm.exchanges), "queues": list(realm.queues)}
        for vhost, realms in database.realms.items()
        for realm in realms.values()
    ]


def _write_grants(database: UserDatabase) -> list[dict[str, Any]]:
    return [
        {"user": user, "vhost": vhost, "realm": realm, "rights": [right.value for right in Right if right in rights]}
        for (user, vhost, realm), rights in database.grants.items()
    ]


# Order matters when reading: vhosts and users before what refers to them.
_READERS: dict[str, Callable[[UserDatabase, Mapping[str, Any]], None]] = {
    "users": _read_user,
    "vhosts": _read_vhost,
    "permissions": _read_permission,
    "topic_permissions": _read_topic_permission,
    "access_realms": _read_realm,
    "realm_grants": _read_grant,
}

_WRITERS: dict[str, Callable[[UserDatabase], list[dict[str, Any]]]] = {
    "users": _write_users,
    "vhosts": _write_vhosts,
    "permissions": _write_permissions,
    "topic_permissions": _write_topic_permissions,
    "access_realms": _write_realms,
    "realm_grants": _write_grants,
}
