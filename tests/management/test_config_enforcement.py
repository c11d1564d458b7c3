"""Topic permissions and vhost/user limits refuse what they should, with
RabbitMQ's codes and texts: the same cases against this broker and against
a private RabbitMQ 3.10 node, driven by pika."""

from __future__ import annotations

import itertools
import os
import re
from typing import TYPE_CHECKING, Any, Callable

import pika
import pika.exceptions
from twisted.internet.defer import inlineCallbacks
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from txamqp09.testing.broker import LoopbackBroker
from txamqp09.testing.rabbitmq import CLI_USER, rabbitmq_missing, shared_rabbitmq

_TestCase: Any = TestCase if TYPE_CHECKING else object
_names = itertools.count()


class EnforcementCases(_TestCase):
    """The cases; subclasses say how to configure the broker they run against."""

    port: int

    def add_user(self, vhost: str, user: str, password: str) -> None:
        """Create *vhost* and *user* with all permissions on it."""
        raise NotImplementedError

    def set_topic_permissions(self, vhost: str, user: str, exchange: str, write: str, read: str) -> None:
        raise NotImplementedError

    def set_limit(self, kind: str, name: str, limit: str, value: int) -> None:
        raise NotImplementedError

    def fresh(self) -> tuple[str, str]:
        """A new vhost and user (password ``pw``) with all permissions."""
        number = f"{os.getpid()}-{next(_names)}"
        vhost, user = f"enforce-{number}", f"enforcer-{number}"
        self.add_user(vhost, user, "pw")
        return vhost, user

    def connect(self, vhost: str, user: str) -> pika.BlockingConnection:
        connection = pika.BlockingConnection(
            pika.ConnectionParameters("127.0.0.1", self.port, vhost, pika.PlainCredentials(user, "pw"),
                                      heartbeat=0)
        )
        self.opened.append(connection)
        return connection

    def close_all(self) -> Any:
        """Close what the test opened (in a thread: pika blocks)."""
        return deferToThread(lambda: [c.close() for c in self.opened if c.is_open])

    def in_thread(self, work: Callable[[], Any]) -> Any:
        """Run *work* in a thread; close its connections afterwards."""
        self.opened: list[pika.BlockingConnection] = []
        self.addCleanup(self.close_all)
        return deferToThread(work)

    @inlineCallbacks
    def test_topic_permissions_on_publish_and_bind(self) -> Any:
        vhost, user = self.fresh()
        self.set_topic_permissions(vhost, user, "amq.topic", "^{username}\\.", "^allowed\\.")

        def scenario() -> list[Any]:
            connection = self.connect(vhost, user)
            channel = connection.channel()
            channel.confirm_delivery()
            queue = channel.queue_declare("", exclusive=True).method.queue
            channel.basic_publish("amq.topic", f"{user}.x", b"mine")
            channel.queue_bind(queue, "amq.topic", "allowed.#")
            results: list[Any] = []
            try:
                channel.queue_bind(queue, "amq.topic", "secret.#")
            except pika.exceptions.ChannelClosedByBroker as error:
                results.append((error.reply_code, error.reply_text))
            channel = connection.channel()
            channel.confirm_delivery()
            try:
                channel.basic_publish("amq.topic", "someone.else", b"theirs")
            except pika.exceptions.ChannelClosedByBroker as error:
                results.append((error.reply_code, error.reply_text))
            # A direct exchange is not subject to topic permissions.
            channel = connection.channel()
            channel.basic_publish("amq.direct", "someone.else", b"fine")
            channel.queue_declare("", exclusive=True)
            return results

        results = yield self.in_thread(scenario)
        self.assertEqual(results, [
            (403, f"ACCESS_REFUSED - access to topic 'secret.#' in exchange 'amq.topic' in vhost "
                  f"'{vhost}' refused for user '{user}'"),
            (403, f"ACCESS_REFUSED - access to topic 'someone.else' in exchange 'amq.topic' in vhost "
                  f"'{vhost}' refused for user '{user}'"),
        ])

    @inlineCallbacks
    def test_vhost_queue_limit(self) -> Any:
        vhost, user = self.fresh()
        self.set_limit("vhost", vhost, "max-queues", 1)

        def scenario() -> Any:
            channel = self.connect(vhost, user).channel()
            channel.queue_declare("first")
            channel.queue_declare("first")  # a redeclaration is no new queue
            try:
                channel.queue_declare("second")
            except pika.exceptions.ChannelClosedByBroker as error:
                return error.reply_code, error.reply_text
            return None

        refused = yield self.in_thread(scenario)
        self.assertEqual(refused, (406, f"PRECONDITION_FAILED - cannot declare queue 'second': "
                                        f"queue limit in vhost '{vhost}' (1) is reached"))

    @inlineCallbacks
    def test_vhost_and_user_connection_limits(self) -> Any:
        vhost, user = self.fresh()
        self.set_limit("vhost", vhost, "max-connections", 1)
        other_vhost, other_user = self.fresh()
        self.set_limit("user", other_user, "max-connections", 1)

        def second(vhost: str, user: str) -> Any:
            self.connect(vhost, user)
            try:
                self.connect(vhost, user)
            except pika.exceptions.ConnectionClosedByBroker as error:
                return error.reply_code, error.reply_text
            except pika.exceptions.ProbableAccessDeniedError as error:
                # pika's guess carries the broker's connection.close as text.
                found = re.search(r'\((\d+)\) "(.*)"$', str(error.args[0]))
                assert found is not None, error
                return int(found.group(1)), found.group(2)
            return None

        refused = yield self.in_thread(lambda: second(vhost, user))
        self.assertEqual(refused, (530, f"NOT_ALLOWED - access to vhost '{vhost}' refused for user "
                                        f"'{user}': connection limit (1) is reached"))
        refused = yield self.in_thread(lambda: second(other_vhost, other_user))
        self.assertEqual(refused, (530, f"NOT_ALLOWED - connection refused for user '{other_user}': "
                                        "user connection limit (1) is reached"))

    @inlineCallbacks
    def test_user_channel_limit(self) -> Any:
        vhost, user = self.fresh()
        self.set_limit("user", user, "max-channels", 2)

        def scenario() -> Any:
            connection = self.connect(vhost, user)
            connection.channel()
            connection.channel()
            try:
                connection.channel()
            except (pika.exceptions.ConnectionClosedByBroker, pika.exceptions.ChannelClosedByBroker) as error:
                return error.reply_code, error.reply_text
            return None

        refused = yield self.in_thread(scenario)
        self.assertEqual(refused, (530, f"NOT_ALLOWED - number of channels opened for user '{user}' has "
                                        "reached the maximum allowed user limit of (2)"))


class OwnBrokerEnforcementTests(EnforcementCases, TestCase):
    """Against this broker, configured through its RuntimeConfig."""

    def setUp(self) -> None:
        self.server = LoopbackBroker()
        self.port = self.server.start()
        self.addCleanup(self.server.stop)
        self.config = self.server.factory.config

    def add_user(self, vhost: str, user: str, password: str) -> None:
        self.config.put_vhost(vhost)
        self.config.put_user(user, password=password)
        self.config.set_permissions(user, vhost, ".*", ".*", ".*")

    def set_topic_permissions(self, vhost: str, user: str, exchange: str, write: str, read: str) -> None:
        self.config.set_topic_permissions(user, vhost, exchange, write, read)

    def set_limit(self, kind: str, name: str, limit: str, value: int) -> None:
        self.config.set_limit(kind, name, limit, value)


class RabbitMQEnforcementTests(EnforcementCases, TestCase):
    """The same cases against a private RabbitMQ node, set up with the
    functions rabbitmqctl's commands call (through erl_call, which takes
    milliseconds where each rabbitmqctl run boots a CLI node)."""

    skip = rabbitmq_missing()

    def setUp(self) -> None:
        self.node = shared_rabbitmq()
        self.port = self.node.port

    def add_user(self, vhost: str, user: str, password: str) -> None:
        self.node.call("rabbit_vhost", "add", vhost, CLI_USER)
        self.addCleanup(self.node.call, "rabbit_vhost", "delete", vhost, CLI_USER)
        self.node.call("rabbit_auth_backend_internal", "add_user", user, password, CLI_USER)
        self.addCleanup(self.node.call, "rabbit_auth_backend_internal", "delete_user", user, CLI_USER)
        self.node.call("rabbit_auth_backend_internal", "set_permissions", user, vhost, ".*", ".*", ".*", CLI_USER)

    def set_topic_permissions(self, vhost: str, user: str, exchange: str, write: str, read: str) -> None:
        self.node.call("rabbit_auth_backend_internal", "set_topic_permissions",
                       user, vhost, exchange, write, read, CLI_USER)

    def set_limit(self, kind: str, name: str, limit: str, value: int) -> None:
        definition = f'{{"{limit}": {value}}}'
        if kind == "vhost":
            self.node.call("rabbit_vhost_limit", "parse_set", name, definition, CLI_USER)
        else:
            self.node.call("rabbit_auth_backend_internal", "set_user_limits", name, definition, CLI_USER)
