"""The private RabbitMQ helper, offline: what it would start, and with what."""

from __future__ import annotations

import os
import socket
import threading

from twisted.trial.unittest import SynchronousTestCase

from txamqp09.testing import rabbitmq
from txamqp09.testing.rabbitmq import (
    CLI_USER,
    RabbitMQ,
    TLSFiles,
    erlang_term,
    free_port,
    rabbitmq_missing,
    shared_rabbitmq,
)


class HelperTests(SynchronousTestCase):
    def test_missing_installation_is_a_reason(self) -> None:
        self.patch(rabbitmq, "RABBITMQ_BIN", "/no/such/dir")
        reason = rabbitmq_missing()
        assert reason is not None
        self.assertIn("install the Debian package rabbitmq-server", reason)

    def test_free_port_is_on_loopback_and_free(self) -> None:
        port = free_port()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))

    def test_everything_stays_on_loopback_and_in_its_directory(self) -> None:
        base = self.mktemp()
        node = RabbitMQ(base, tls=TLSFiles("ca.pem", "cert.pem", "key.pem", require_peer_cert=True))
        env = node.environment()
        self.assertEqual((env["RABBITMQ_NODE_IP_ADDRESS"], env["ERL_EPMD_ADDRESS"]), ("127.0.0.1", "127.0.0.1"))
        self.assertIn("{127,0,0,1}", env["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"])
        self.assertIn("{127,0,0,1}", env["RABBITMQ_CTL_ERL_ARGS"])
        self.assertEqual(env["RUNNING_UNDER_SYSTEMD"], "true")
        self.assertEqual(len({node.port, node.tls_port, node.dist_port, node.epmd_port}), 4)
        for name in ("HOME", "RABBITMQ_MNESIA_BASE", "RABBITMQ_LOG_BASE", "RABBITMQ_CONFIG_FILE"):
            self.assertTrue(env[name].startswith(os.path.abspath(base)), name)
        node._write_files()
        with open(os.path.join(base, "rabbitmq.conf")) as config:
            lines = config.read().splitlines()
        self.assertIn(f"listeners.tcp.default = 127.0.0.1:{node.port}", lines)
        self.assertIn(f"listeners.ssl.default = 127.0.0.1:{node.tls_port}", lines)
        self.assertIn("ssl_options.fail_if_no_peer_cert = true", lines)

    def test_stop_without_start_leaves_the_node_startable(self) -> None:
        base = self.mktemp()
        node = RabbitMQ(base)
        node.stop()
        self.assertFalse(node.running)
        self.assertFalse(os.path.exists(base), "stop() wrote files of a node that never ran")
        node.stop()
        self.assertFalse(node.running)

    def test_the_log_is_copied_and_start_up_is_seen_in_it(self) -> None:
        read, write = os.pipe()
        started = threading.Event()
        log = self.mktemp()
        copying = threading.Thread(target=rabbitmq._copy_log, args=(os.fdopen(read, "rb"), log, started))
        copying.start()
        with os.fdopen(write, "wb", buffering=0) as output:
            output.write(b"  Starting broker...\n")
            output.write(b"2026-01-01 [info] <0.1.0> Server startup complete; 0 plugins started.\n")
            self.assertTrue(started.wait(30), "the start-up line was not noticed")
            output.write(b"later\n")
        copying.join(30)
        with open(log, "rb") as copied:
            self.assertEqual(copied.read().splitlines()[0::2], [b"  Starting broker...", b"later"])

    def test_erlang_terms_are_plain_ascii(self) -> None:
        self.assertEqual(erlang_term(42), "42")
        self.assertEqual(erlang_term('^a\\.b"é\n'), '<<"^a\\x{5c}.b\\x{22}\\x{e9}\\x{a}"/utf8>>')
        for value in (True, 1.5, b"bytes", None):
            with self.assertRaises(TypeError):
                erlang_term(value)  # type: ignore[arg-type]

    def test_a_node_that_exits_ends_the_wait(self) -> None:
        read, write = os.pipe()
        started = threading.Event()
        os.close(write)
        rabbitmq._copy_log(os.fdopen(read, "rb"), self.mktemp(), started)
        self.assertTrue(started.is_set())


class EvaluateTests(SynchronousTestCase):
    """Erlang expressions evaluated on the shared node through erl_call."""

    def setUp(self) -> None:
        missing = rabbitmq_missing()
        if missing:
            raise self.skipTest(missing)
        self.node = shared_rabbitmq()

    def test_value_of_the_last_expression(self) -> None:
        self.assertEqual(self.node.evaluate("X = 20, Y = 22, {answer, X + Y}."), "{answer, 42}")

    def test_node_state_is_read_and_changed(self) -> None:
        self.addCleanup(self.node.evaluate, "application:unset_env(rabbit, txamqp09_probe).")
        self.node.evaluate("application:set_env(rabbit, txamqp09_probe, 7).")
        self.assertEqual(self.node.evaluate("application:get_env(rabbit, txamqp09_probe)."), "{ok, 7}")

    def test_calls_pass_strings_as_binaries_and_integers_as_such(self) -> None:
        text = '^{username}\\.(x|"y")$ é ✓'
        self.assertEqual(self.node.call("erlang", "byte_size", text), str(len(text.encode("utf-8"))))
        self.assertEqual(self.node.call("unicode", "characters_to_list", text).count(","), len(text) - 1)
        self.assertEqual(self.node.call("erlang", "max", 7, 41), "41")

    def test_rabbitmqctl_functions_change_the_node(self) -> None:
        vhost = f"call-{os.getpid()}"
        self.assertEqual(self.node.call("rabbit_vhost", "add", vhost, CLI_USER), "ok")
        self.addCleanup(self.node.call, "rabbit_vhost", "delete", vhost, CLI_USER)
        self.assertEqual(self.node.call("rabbit_vhost", "exists", vhost), "true")

    def test_an_error_answer_is_an_error(self) -> None:
        with self.assertRaises(rabbitmq.RabbitMQError) as caught:
            self.node.call("rabbit_auth_backend_internal", "set_permissions",
                           "nobody-here", "/", ".*", ".*", ".*", CLI_USER)
        self.assertIn("no_such_user", str(caught.exception))
        with self.assertRaises(rabbitmq.RabbitMQError) as caught:
            self.node.call("rabbit_vhost_limit", "parse_set", "/", "{not json", CLI_USER)
        self.assertIn("JSON", str(caught.exception))

    def test_a_failing_expression_is_an_error(self) -> None:
        with self.assertRaises(rabbitmq.RabbitMQError) as caught:
            self.node.evaluate("erlang:error(deliberate).")
        self.assertIn("deliberate", str(caught.exception))
