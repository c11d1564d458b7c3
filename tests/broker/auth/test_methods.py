"""The per-method permission table, applied by AccessGuard, against RabbitMQ's table."""

from __future__ import annotations

import re
from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.broker.auth.cred import AMQPUser
from txamqp09.broker.auth.methods import METHOD_RULES, AccessGuard
from txamqp09.broker.auth.permissions import Permission, Permissions
from txamqp09.broker.auth.security import Security
from txamqp09.broker.auth.users import UserDatabase
from txamqp09.wire import _amqp0_9 as amqp0_9
from txamqp09.wire import _amqp0_9_1 as amqp0_9_1
from txamqp09.wire.errors import AccessRefused, PreconditionFailed

C, W, R = Permission.CONFIGURE, Permission.WRITE, Permission.READ

#: (method, the (permission, resource name) pairs RabbitMQ's access-control table requires).
CASES: list[tuple[Any, list[tuple[Permission, str]]]] = [
    (amqp0_9_1.ExchangeDeclare(exchange="x"), [(C, "x")]),
    (amqp0_9_1.ExchangeDeclare(exchange="x", arguments={"alternate-exchange": b"ae"}), [(C, "x"), (W, "ae"), (R, "x")]),
    (amqp0_9_1.ExchangeDeclare(exchange="x", passive=True, arguments={"alternate-exchange": b"ae"}), []),
    (amqp0_9_1.ExchangeDelete(exchange="x"), [(C, "x")]),
    (amqp0_9_1.ExchangeBind(destination="d", source="s"), [(W, "d"), (R, "s")]),
    (amqp0_9_1.ExchangeUnbind(destination="d", source="s"), [(W, "d"), (R, "s")]),
    (amqp0_9_1.QueueDeclare(queue="q"), [(C, "q")]),
    (amqp0_9_1.QueueDeclare(queue="q", arguments={"x-dead-letter-exchange": b"dlx"}), [(C, "q"), (W, "dlx"), (R, "q")]),
    (amqp0_9_1.QueueDeclare(queue="q", passive=True), []),
    (amqp0_9_1.QueueDelete(queue="q"), [(C, "q")]),
    (amqp0_9_1.QueueBind(queue="q", exchange="x"), [(W, "q"), (R, "x")]),
    (amqp0_9_1.QueueUnbind(queue="q", exchange="x"), [(W, "q"), (R, "x")]),
    (amqp0_9_1.QueuePurge(queue="q"), [(R, "q")]),
    (amqp0_9_1.BasicPublish(exchange="x"), [(W, "x")]),
    (amqp0_9_1.BasicPublish(exchange=""), [(W, "amq.default")]),
    (amqp0_9_1.BasicGet(queue="q"), [(R, "q")]),
    (amqp0_9_1.BasicConsume(queue="q"), [(R, "q")]),
    (amqp0_9.FilePublish(exchange="x"), [(W, "x")]),
    (amqp0_9.StreamConsume(queue="q"), [(R, "q")]),
    (amqp0_9.MessageTransfer(destination="x"), [(W, "x")]),
    (amqp0_9.MessageGet(queue="q"), [(R, "q")]),
    (amqp0_9_1.BasicQos(prefetch_count=1), []),
    (amqp0_9_1.BasicAck(delivery_tag=1), []),
    (amqp0_9_1.ChannelOpen(), []),
]


def all_but(permission: Permission, name: str) -> Permissions:
    """Everything, except ``permission`` on exactly ``name``."""
    expressions = {p: ".*" for p in Permission}
    expressions[permission] = f"^(?!{re.escape(name)}$)"
    return Permissions(*expressions.values())


def exactly(needed: list[tuple[Permission, str]]) -> Permissions:
    """Only ``needed``: each permission on exactly the names listed for it."""
    expressions = []
    for permission in Permission:
        names = [re.escape(name) for p, name in needed if p is permission]
        expressions.append(f"^({'|'.join(names)})$" if names else "")
    return Permissions(*expressions)


class MethodTableTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.database = UserDatabase.default()
        self.database.add_user("app", "pw")
        self.security = Security(self.database, Clock())
        self.guard = self.open()

    def open(self) -> AccessGuard:
        self.database.set_permissions("app", "/", Permissions("", "", ""))
        return self.security.open_vhost(AMQPUser(self.database, "app"), "/", tickets=False)

    def permit(self, permissions: Permissions) -> None:
        self.database.set_permissions("app", "/", permissions)

    def test_each_needed_permission_is_checked(self) -> None:
        for method, needed in CASES:
            for permission, name in needed:
                self.permit(all_but(permission, name))
                with self.assertRaises(AccessRefused, msg=f"{method} without {permission} on {name}") as caught:
                    self.guard.check(1, method)
                error = caught.exception
                self.assertIn(f"{name!r} in vhost '/' refused for user 'app'", error.reply_text)
                self.assertIn(f"{method.NAME} needs {permission.value} permission", error.reply_text)
                self.assertEqual((error.reply_code, error.hard), (403, False))
                self.assertEqual((error.class_id, error.method_id), (method.CLASS_ID, method.METHOD_ID))

    def test_nothing_more_is_needed(self) -> None:
        for method, needed in CASES:
            self.permit(exactly(needed))
            self.guard.check(1, method)

    def test_every_rule_is_covered_by_a_case(self) -> None:
        self.assertEqual(set(METHOD_RULES) - {"file.consume", "stream.publish", "message.consume"}, {m.NAME for m, n in CASES if n})

    def test_resolved_queue_name_is_checked_instead_of_the_empty_one(self) -> None:
        self.permit(exactly([(W, "amq.gen-1"), (R, "x")]))
        self.guard.check(1, amqp0_9_1.QueueBind(queue="", exchange="x"), queue="amq.gen-1")
        with self.assertRaises(AccessRefused):
            self.guard.check(1, amqp0_9_1.QueueBind(queue="", exchange="x"), queue="amq.gen-2")

    def test_exchange_argument_must_be_a_string(self) -> None:
        self.permit(Permissions(".*", ".*", ".*"))
        method = amqp0_9_1.ExchangeDeclare(exchange="x", arguments={"alternate-exchange": 5})
        with self.assertRaises(PreconditionFailed) as caught:
            self.guard.check(1, method)
        self.assertEqual(
            caught.exception.full_text,
            "invalid type 'signedint' for arg 'alternate-exchange' in exchange 'x' in vhost '/'; "
            "it must be a string naming an exchange, not 5",
        )

    def test_string_arguments_as_str(self) -> None:
        self.permit(exactly([(C, "q"), (W, "dlx"), (R, "q")]))
        self.guard.check(1, amqp0_9_1.QueueDeclare(queue="q", arguments={"x-dead-letter-exchange": "dlx"}))

    def test_publish_fast_path_checks_the_same(self) -> None:
        for permissions in [Permissions("", "^x$", ""), Permissions(".*", "^y$", ".*"), Permissions("", "^amq\\.default$", "")]:
            self.permit(permissions)
            for exchange in ["x", "y", ""]:
                outcomes = []
                for check in [
                    lambda name=exchange: self.guard.check(1, amqp0_9_1.BasicPublish(exchange=name)),
                    lambda name=exchange: self.guard.check_publish(1, 0, name),
                ]:
                    try:
                        check()
                    except AccessRefused as error:
                        outcomes.append((error.reply_text, error.class_id, error.method_id))
                    else:
                        outcomes.append(None)
                self.assertEqual(outcomes[0], outcomes[1])

    def test_publish_checks_follow_changes(self) -> None:
        """The database counts its changes: server channels re-check remembered publishes then."""
        self.permit(Permissions("", "^x$", ""))
        self.guard.check_publish(1, 0, "x")
        generation = self.database.generation
        self.permit(Permissions("", "^y$", ""))
        self.assertGreater(self.database.generation, generation)
        with self.assertRaises(AccessRefused):
            self.guard.check_publish(1, 0, "x")
        self.database.delete_user("app")
        with self.assertRaises(AccessRefused):
            self.guard.check_publish(1, 0, "y")
