"""``amqp09ctl`` end to end: the command run as a process against a broker
started by the test, its output, errors and exit codes."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pika
import pika.exceptions
from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.threads import deferToThread
from twisted.internet.utils import getProcessOutputAndValue

from tests.management.test_config_api import ConfigTestCase

ROOT = str(Path(__file__).resolve().parents[2])


@inlineCallbacks
def run_ctl(url: str, home: str, *arguments: str, stdin: bytes = b"", **environment: str) -> Any:
    """(stdout, stderr, exit code) of ``amqp09ctl ARGUMENTS`` run as a process
    against the API at *url*, with *home* as its home directory."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": ROOT, "AMQP09CTL_URL": url, "HOME": home,
           **environment}
    argv = ["-m", "txamqp09.ctl", *arguments]
    if stdin:
        argv = ["-c", "import sys, io; sys.stdin = io.TextIOWrapper(io.BytesIO(%r)); "
                "from txamqp09.ctl import main; sys.exit(main(sys.argv[1:]))" % stdin, *arguments]
    out, err, code = yield getProcessOutputAndValue(sys.executable, argv, env=env, path=ROOT, reactor=reactor)
    return out.decode(), err.decode(), code


class CtlTests(ConfigTestCase):
    """Each test runs amqp09ctl commands as a user would."""

    def ctl(self, *arguments: str, stdin: bytes = b"", **environment: str) -> Any:
        """(stdout, stderr, exit code) of ``amqp09ctl ARGUMENTS``."""
        return run_ctl(self.broker.url, os.path.abspath(self.mktemp()), *arguments, stdin=stdin, **environment)

    @inlineCallbacks
    def test_users_vhosts_and_permissions(self) -> Any:
        out, err, code = yield self.ctl("add_user", "ann", "s3cret")
        self.assertEqual((code, err), (0, 'Adding user "ann" ...\n'))
        self.assertTrue(self.config.database.users["ann"].password_hash.verify("s3cret"))
        yield self.ctl("set_user_tags", "ann", "monitoring", "policymaker")
        self.assertEqual(self.config.database.users["ann"].tags, ("monitoring", "policymaker"))
        self.assertTrue(self.config.database.users["ann"].password_hash.verify("s3cret"))
        yield self.ctl("change_password", "ann", "n3w")
        self.assertTrue(self.config.database.users["ann"].password_hash.verify("n3w"))
        self.assertEqual(self.config.database.users["ann"].tags, ("monitoring", "policymaker"))
        _, _, code = yield self.ctl("add_vhost", "shop", "--description", "the shop")
        self.assertEqual(code, 0)
        _, _, code = yield self.ctl("-p", "shop", "set_permissions", "ann", "^ann-", ".*", ".*")
        self.assertEqual(code, 0)
        out, _, code = yield self.ctl("-q", "list_users")
        self.assertEqual(out.splitlines(), ["user   tags", "ann    [monitoring, policymaker]",
                                            "guest  [administrator]"])
        out, _, _ = yield self.ctl("--formatter", "json", "-p", "shop", "list_permissions")
        self.assertEqual(json.loads(out), [{"user": "ann", "configure": "^ann-", "write": ".*", "read": ".*"}])
        out, _, _ = yield self.ctl("-q", "list_user_permissions", "ann")
        self.assertEqual(out.split(), ["vhost", "configure", "write", "read", "shop", "^ann-", ".*", ".*"])
        out, _, _ = yield self.ctl("-q", "list_vhosts", "name", "description")
        self.assertEqual(out.splitlines(), ["name  description", "/", "shop  the shop"])
        # The user logs in over HTTP with what amqp09ctl set.
        out, _, code = yield self.ctl("--user", "ann", "--password", "n3w", "-q", "list_vhosts")
        self.assertEqual(code, 0)
        yield self.ctl("-p", "shop", "clear_permissions", "ann")
        self.assertIsNone(self.config.database.permissions_for("ann", "shop"))
        yield self.ctl("delete_user", "ann")
        yield self.ctl("delete_vhost", "shop")
        self.assertNotIn("ann", self.config.database.users)
        self.assertNotIn("shop", self.config.database.vhosts)

    @inlineCallbacks
    def test_errors_are_one_line_with_an_exit_code(self) -> Any:
        out, err, code = yield self.ctl("-q", "delete_user", "nobody")
        self.assertEqual((out, err, code), ("", "Error: 404 Not Found\n", 1))
        _, err, code = yield self.ctl("-q", "set_policy", "p", ".*", '{"max-lenght": 1}')
        self.assertEqual(code, 1)
        self.assertEqual(err, 'Error: 400 Validation failed policy: [<<"max-lenght">>] are not recognised '
                              'policy settings\n')
        _, err, code = yield self.ctl("-q", "set_policy", "p", ".*", "{not json")
        self.assertEqual(code, 64)
        self.assertEqual(len(err.splitlines()), 1)
        _, err, code = yield self.ctl("--password", "wrong", "-q", "list_users")
        self.assertEqual((code, err), (1, "Error: 401 Login failed\n"))
        _, err, code = yield self.ctl("-q", "list_users", AMQP09CTL_URL="http://127.0.0.1:1")
        self.assertEqual((code, err), (69, (
            "Error: cannot reach the management API at http://127.0.0.1:1 ($AMQP09CTL_URL): [Errno 111] "
            "Connection refused; give the address of a broker's --management listener with --url or "
            "AMQP09CTL_URL\n"
        )))
        _, _, code = yield self.ctl("no_such_command")
        self.assertEqual(code, 64)
        self.assertEqual(self.config.policies(), [])

    @inlineCallbacks
    def test_policies_limits_parameters_and_queues(self) -> Any:
        connection = yield deferToThread(pika.BlockingConnection, pika.ConnectionParameters(
            "127.0.0.1", self.broker.amqp_port, "/", pika.PlainCredentials("guest", "guest")))
        self.addCleanup(deferToThread, connection.close)
        channel = yield deferToThread(connection.channel)
        yield deferToThread(channel.queue_declare, "tmp.jobs")
        for n in range(3):
            yield deferToThread(channel.basic_publish, "", "tmp.jobs", b"m%d" % n)
        yield deferToThread(channel.queue_declare, "tmp.jobs", passive=True)
        _, err, code = yield self.ctl("-q", "set_policy", "--apply-to", "queues", "--priority", "2",
                                      "cap", "^tmp\\.", '{"max-length": 2}')
        self.assertEqual((code, err), (0, ""))
        out, _, _ = yield self.ctl("-q", "list_queues", "name", "messages", "policy")
        self.assertEqual(out.splitlines(), ["name      messages  policy", "tmp.jobs  2         cap"])
        out, _, _ = yield self.ctl("-q", "list_policies")
        self.assertEqual(out.splitlines()[1].split(), ["/", "cap", "^tmp\\.", "queues", '{"max-length":2}', "2"])
        yield self.ctl("set_vhost_limits", '{"max-queues": 5, "max-connections": 10}')
        self.assertEqual(self.config.database.vhost_limits["/"], {"max-queues": 5, "max-connections": 10})
        yield self.ctl("set_user_limits", "guest", '{"max-channels": 8}')
        self.assertEqual(self.config.database.user_limits["guest"], {"max-channels": 8})
        yield self.ctl("clear_vhost_limits")
        self.assertNotIn("/", self.config.database.vhost_limits)
        yield self.ctl("set_parameter", "federation-upstream", "up", '{"uri": "amqp://127.0.0.1"}')
        out, _, _ = yield self.ctl("-q", "list_parameters")
        self.assertEqual(out.splitlines()[1].split(), ["federation-upstream", "up", '{"uri":"amqp://127.0.0.1"}'])
        yield self.ctl("clear_parameter", "federation-upstream", "up")
        self.assertEqual(self.config.parameters, {})
        yield self.ctl("set_topic_permissions", "guest", "amq.topic", "^a", "^b")
        self.assertIn(("guest", "/", "amq.topic"), self.config.database.topic_permissions)
        _, _, code = yield self.ctl("purge_queue", "tmp.jobs")
        self.assertEqual((code, self.broker.factory.broker.vhosts["/"].queues["tmp.jobs"].message_count), (0, 0))
        _, _, code = yield self.ctl("clear_policy", "cap")
        self.assertIsNone(self.broker.factory.broker.vhosts["/"].queues["tmp.jobs"].policy)
        _, _, code = yield self.ctl("delete_queue", "tmp.jobs", "--if-empty")
        self.assertEqual(code, 0)
        self.assertNotIn("tmp.jobs", self.broker.factory.broker.vhosts["/"].queues)

    @inlineCallbacks
    def test_definitions_export_and_import(self) -> Any:
        yield self.ctl("add_vhost", "shop")
        yield self.ctl("-p", "shop", "set_policy", "ttl", "^q", '{"message-ttl": 1000}')
        out, _, code = yield self.ctl("export_definitions", "-")
        self.assertEqual(code, 0)
        exported = json.loads(out)
        self.assertEqual([p["name"] for p in exported["policies"]], ["ttl"])
        target = Path(self.mktemp()).absolute()
        yield self.ctl("export_definitions", str(target))
        self.assertEqual(json.loads(target.read_text()), exported)
        yield self.ctl("delete_vhost", "shop")
        exported["federation_upstreams"] = []
        _, err, code = yield self.ctl("import_definitions", "-", stdin=json.dumps(exported).encode())
        self.assertEqual(code, 0)
        self.assertIn("not applied: top-level key 'federation_upstreams'", err)
        self.assertEqual([p.name for p in self.config.policies("shop")], ["ttl"])

    @inlineCallbacks
    def test_an_unreachable_api_says_where_its_address_came_from(self) -> Any:
        """--url first, then $AMQP09CTL_URL, then the config file, then the default."""
        config_file = Path(self.mktemp()).absolute()
        config_file.write_text("[amqp09ctl]\nurl = http://127.0.0.1:2\n")
        for arguments, environment, source in [
            (["--url", "http://127.0.0.1:1"], {"AMQP09CTL_URL": "http://127.0.0.1:2"}, "--url"),
            (["--config", str(config_file)], {"AMQP09CTL_URL": ""}, f"url in {config_file}"),
        ]:
            _, err, code = yield self.ctl(*arguments, "-q", "list_vhosts", **environment)
            self.assertEqual(code, 69)
            self.assertIn(f"({source}): [Errno 111] Connection refused; give the address", err)

    @inlineCallbacks
    def test_help_lists_every_command_without_placeholders(self) -> Any:
        out, _, code = yield self.ctl("--help")
        self.assertEqual(code, 0)
        self.assertNotIn("{vhost}", out)
        self.assertIn("list_queues         list queues of the vhost (-p)", out)
        self.assertIn("--url URL", out)

    @inlineCallbacks
    def test_status_await_startup_config_file_and_connections(self) -> Any:
        config_file = Path(self.mktemp()).absolute()
        config_file.write_text(f"[amqp09ctl]\nurl = {self.broker.url}\nuser = guest\npassword = guest\n")
        out, _, code = yield self.ctl("--config", str(config_file), "status", AMQP09CTL_URL="")
        self.assertEqual(code, 0)
        self.assertTrue(out.startswith(f"Status of node {self.broker.node.name} ..."), out)
        _, _, code = yield self.ctl("await_startup")
        self.assertEqual(code, 0)
        connection = yield deferToThread(pika.BlockingConnection, pika.ConnectionParameters(
            "127.0.0.1", self.broker.amqp_port, "/", pika.PlainCredentials("guest", "guest")))
        out, _, _ = yield self.ctl("--formatter", "json", "list_connections", "name", "user", "vhost")
        (row,) = json.loads(out)
        self.assertEqual((row["user"], row["vhost"]), ("guest", "/"))
        lost = next(iter(self.broker.factory.connections)).whenLost()
        _, _, code = yield self.ctl("close_connection", row["name"], "go away")
        self.assertEqual(code, 0)
        yield lost
        with self.assertRaises(pika.exceptions.AMQPError):
            yield deferToThread(connection.channel)
