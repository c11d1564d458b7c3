"""RabbitMQ definitions files: loading, exporting, and the security database they fill."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from tests.broker.auth.test_passwords import RABBITMQ_MD5_OF_SIMON, RABBITMQ_SHA256_OF_1
from txamqp09.broker.auth.definitions import (
    Definitions,
    DefinitionsError,
    load_definitions,
)
from txamqp09.broker.auth.passwords import MD5, SHA256
from txamqp09.broker.auth.permissions import Permission, Permissions
from txamqp09.broker.auth.realms import Right
from txamqp09.broker.auth.users import UserDatabase

#: Shaped like `rabbitmqctl export_definitions` from RabbitMQ 3.12, plus our realm keys.
EXPORT: dict[str, Any] = {
    "rabbit_version": "3.12.13",
    "rabbitmq_version": "3.12.13",
    "product_name": "RabbitMQ",
    "product_version": "3.12.13",
    "users": [
        {
            "name": "admin",
            "password_hash": RABBITMQ_SHA256_OF_1,
            "hashing_algorithm": "rabbit_password_hashing_sha256",
            "tags": ["administrator"],
            "limits": {},
        },
        {
            "name": "billing-app",
            "password_hash": RABBITMQ_MD5_OF_SIMON,
            "hashing_algorithm": "rabbit_password_hashing_md5",
            "tags": [],
            "limits": {"max-connections": 10},
        },
        {
            "name": "cert-only",
            "password_hash": "",
            "hashing_algorithm": "rabbit_password_hashing_sha256",
            "tags": ["monitoring", "policymaker"],
            "limits": {},
        },
    ],
    "vhosts": [
        {
            "name": "/",
            "description": "Default virtual host",
            "tags": [],
            "metadata": {"description": "Default virtual host", "tags": []},
            "default_queue_type": "classic",
        },
        {
            "name": "billing",
            "description": "",
            "tags": ["prod"],
            "metadata": {"description": "", "tags": ["prod"]},
        },
    ],
    "permissions": [
        {"user": "admin", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"},
        {"user": "billing-app", "vhost": "billing", "configure": "^billing\\.", "write": "^(billing\\.|amq\\.default$)", "read": ""},
        {"user": "cert-only", "vhost": "/", "configure": "", "write": "", "read": "^metrics$"},
    ],
    "topic_permissions": [
        {"user": "billing-app", "vhost": "billing", "exchange": "amq.topic", "write": "^billing", "read": ".*"}
    ],
    "parameters": [],
    "global_parameters": [{"name": "cluster_name", "value": "rabbit@broker-1"}],
    "policies": [
        {"vhost": "billing", "name": "ttl", "pattern": "^billing\\.", "apply-to": "queues", "definition": {"message-ttl": 60000}, "priority": 0}
    ],
    "queues": [
        {"name": "billing.invoices", "vhost": "billing", "durable": True, "auto_delete": False, "arguments": {"x-queue-type": "classic"}}
    ],
    "exchanges": [
        {"name": "billing.events", "vhost": "billing", "type": "topic", "durable": True, "auto_delete": False, "internal": False, "arguments": {}}
    ],
    "bindings": [
        {"source": "billing.events", "vhost": "billing", "destination": "billing.invoices", "destination_type": "queue", "routing_key": "invoice.#", "arguments": {}}
    ],
    "access_realms": [
        {"vhost": "billing", "name": "/data/billing", "exchanges": ["billing.*"], "queues": ["billing.*"]}
    ],
    "realm_grants": [
        {"user": "billing-app", "vhost": "billing", "realm": "/data/billing", "rights": ["passive", "active", "write", "exclusive"]}
    ],
}


class LoadTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.database = Definitions.from_json(EXPORT).database

    def test_users_with_tags_and_hashes(self) -> None:
        self.assertEqual(list(self.database.users), ["admin", "billing-app", "cert-only"])
        self.assertTrue(self.database.users["admin"].password_hash.verify("1"))
        self.assertTrue(self.database.users["billing-app"].password_hash.verify("simon"))
        self.assertFalse(self.database.users["cert-only"].password_hash.usable)
        self.assertEqual(self.database.users["cert-only"].tags, ("monitoring", "policymaker"))

    def test_permissions(self) -> None:
        billing = self.database.permissions_for("billing-app", "billing")
        assert billing is not None
        self.assertTrue(billing.allows(Permission.CONFIGURE, "billing.invoices"))
        self.assertFalse(billing.allows(Permission.CONFIGURE, "payroll"))
        self.assertTrue(billing.allows(Permission.WRITE, ""))
        self.assertFalse(billing.allows(Permission.READ, "billing.invoices"))
        self.assertIsNone(self.database.permissions_for("billing-app", "/"))

    def test_realms_and_grants(self) -> None:
        self.assertEqual(list(self.database.realms_of("billing")), ["/data/billing"])
        self.assertEqual(list(self.database.realms_of("/")), ["/data"])
        self.assertEqual(
            self.database.realm_rights("billing-app", "billing", "/data/billing"),
            {Right.PASSIVE, Right.ACTIVE, Right.WRITE, Right.EXCLUSIVE},
        )

    def test_export_gives_the_same_json(self) -> None:
        exported = Definitions.from_json(EXPORT).to_json()
        self.assertEqual(exported, EXPORT)
        self.assertEqual(list(exported), list(EXPORT))

    def test_file_round_trip(self) -> None:
        source = Path(self.mktemp())
        source.write_text(json.dumps(EXPORT), encoding="utf-8")
        target = Path(self.mktemp())
        load_definitions(source).write(target)
        self.assertEqual(json.loads(target.read_text(encoding="utf-8")), EXPORT)

    def test_changes_show_in_the_export(self) -> None:
        definitions = Definitions.from_json(EXPORT)
        definitions.database.delete_user("cert-only")
        exported = definitions.to_json()
        self.assertNotIn("cert-only", [user["name"] for user in exported["users"]])
        self.assertNotIn("cert-only", [entry["user"] for entry in exported["permissions"]])


class LegacyTests(SynchronousTestCase):
    """Older RabbitMQ exports and hand-written files load, normalised."""

    def test_comma_separated_tags_and_missing_algorithm(self) -> None:
        data = {"users": [{"name": "old", "password_hash": RABBITMQ_MD5_OF_SIMON, "tags": "administrator,management"}]}
        exported = Definitions.from_json(data).to_json()["users"][0]
        self.assertEqual(exported["tags"], ["administrator", "management"])
        self.assertEqual(exported["hashing_algorithm"], MD5)

    def test_clear_text_password_is_hashed(self) -> None:
        data = {"users": [{"name": "dev", "password": "s3cret", "tags": []}]}
        definitions = Definitions.from_json(data)
        self.assertTrue(definitions.database.users["dev"].password_hash.verify("s3cret"))
        exported = definitions.to_json()["users"][0]
        self.assertNotIn("password", exported)
        self.assertEqual(exported["hashing_algorithm"], SHA256)

    def test_no_realm_keys_added_when_there_are_none(self) -> None:
        self.assertEqual(Definitions.from_json({"vhosts": [{"name": "/"}]}).to_json(), {"vhosts": [{"name": "/"}]})


class ErrorTests(SynchronousTestCase):
    """Bad files are refused with the place and the reason."""

    def assertRefused(self, change: Any, *words: str) -> None:
        data = copy.deepcopy(EXPORT)
        change(data)
        with self.assertRaises(DefinitionsError) as caught:
            Definitions.from_json(data)
        for word in words:
            self.assertIn(word, str(caught.exception))

    def test_missing_name(self) -> None:
        self.assertRefused(lambda data: data["users"][1].pop("name"), "users[1]", "missing field 'name'")

    def test_permission_for_unknown_vhost(self) -> None:
        self.assertRefused(lambda data: data["permissions"][0].update(vhost="nowhere"), "permissions[0]", "nowhere")

    def test_invalid_regex(self) -> None:
        self.assertRefused(lambda data: data["permissions"][0].update(read="(unclosed"), "permissions[0]", "read permission")

    def test_unknown_right(self) -> None:
        self.assertRefused(lambda data: data["realm_grants"][0]["rights"].append("sudo"), "realm_grants[0]", "sudo")

    def test_bad_realm_name(self) -> None:
        self.assertRefused(lambda data: data["access_realms"][0].update(name="billing"), "access_realms[0]", "/data or /admin")

    def test_wrong_types(self) -> None:
        self.assertRefused(lambda data: data.update(users={}), "users must be a list")
        self.assertRefused(lambda data: data["vhosts"].append("x"), "vhosts[2] must be an object")
        self.assertRefused(lambda data: data["users"][0].update(tags=[1]), "users[0]", "tags")
        self.assertRefused(lambda data: data["users"][0].update(name=7), "users[0]", "name must be a string")

    def test_unreadable_file(self) -> None:
        path = Path(self.mktemp())
        path.write_text("{not json", encoding="utf-8")
        with self.assertRaises(DefinitionsError) as caught:
            load_definitions(path)
        self.assertIn(str(path), str(caught.exception))


class DatabaseTests(SynchronousTestCase):
    def test_default_database_is_rabbitmqs(self) -> None:
        database = UserDatabase.default()
        self.assertEqual(list(database.vhosts), ["/"])
        self.assertTrue(database.users["guest"].password_hash.verify("guest"))
        self.assertEqual(database.permissions_for("guest", "/"), Permissions(".*", ".*", ".*"))

    def test_deleting_a_vhost_forgets_what_refers_to_it(self) -> None:
        database = Definitions.from_json(EXPORT).database
        database.delete_vhost("billing")
        self.assertIsNone(database.permissions_for("billing-app", "billing"))
        self.assertEqual(database.grants, {})
        self.assertEqual(list(database.realms_of("billing")), ["/data"])

    def test_unknown_names_are_refused(self) -> None:
        database = UserDatabase.default()
        with self.assertRaises(ValueError):
            database.set_permissions("nobody", "/", Permissions("", "", ""))
        with self.assertRaises(ValueError):
            database.grant("guest", "nowhere", "/data", [Right.READ])
        with self.assertRaises(ValueError):
            database.delete_user("nobody")
