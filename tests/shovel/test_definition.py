"""Shovel definitions: checked as RabbitMQ 3.10 checks them, with its texts
(taken from its management API's answers), read, and shown without credentials."""

from __future__ import annotations

from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import TestCase

from tests.management.support import ManagementTestCase
from txamqp09.links.redaction import hide_passwords, redacted
from txamqp09.links.uri import LinkUri, LocalAddress
from txamqp09.shovel.definition import ShovelDefinition, shovel_errors
from txamqp09.shovel.service import ShovelService

OK = {"src-uri": "amqp://", "src-queue": "a", "dest-uri": "amqp://", "dest-queue": "b"}

#: Values, and the reasons RabbitMQ 3.10.8 gave for refusing them (after
#: "Validation failed", one line each; its HTML escaping of < and > undone).
REFUSED: list[tuple[dict[str, Any], list[str]]] = [
    ({"src-uri": "amqp://", "dest-uri": "amqp://"}, ["Must specify 'src-exchange' or 'src-queue'"]),
    ({**OK, "src-exchange": "x", "dest-exchange": "y"},
     ["Cannot specify 'src-exchange' and 'src-queue'", "Cannot specify 'dest-exchange' and 'dest-queue'"]),
    ({"src-queue": "a", "dest-queue": "b"}, ['Key "dest-uri" not found in s', 'Key "src-uri" not found in s']),
    ({**OK, "src-uri": "foo://x", "dest-uri": ["amqp://", "bar"]}, [
        '"bar" not a valid URI: {{unable_to_parse_uri,no_scheme},"bar"}',
        '"foo://x" not a valid URI: {{unexpected_uri_scheme,"foo"},"foo://x"}',
    ]),
    ({"src-uri": "amqp://", "src-queue": "a", "dest-uri": "amqp://", "ack-mode": "maybe", "reconnect-delay": "x",
      "src-delete-after": "sometimes", "src-prefetch-count": "1", "bogus": 1}, [
        'Unrecognised terms [{<<"bogus">>,1}] in s',
        'src-delete-after should be a number greater than or equal to 0, "never" or "queue-length", '
        'actually was <<"sometimes">>',
        'src-prefetch-count should be a number, actually was <<"1">>',
        'ack-mode should be one of [<<"no-ack">>,<<"on-publish">>,<<"on-confirm">>], actually was <<"maybe">>',
        'reconnect-delay should be a number, actually was <<"x">>',
    ]),
    ({"src-uri": "amqp://", "src-queue": "a", "dest-uri": "amqp://", "ack-mode": "no-ack", "src-delete-after": 5},
     ["Cannot specify 'no-ack' and numerical 'delete-after'"]),
    ({"src-uri": 5, "src-queue": 5, "dest-uri": "amqp://", "dest-add-forward-headers": "yes",
      "dest-publish-properties": {"delivery_mode": "x", "foo": 1}}, [
        'Unrecognised terms [{<<"foo">>,1}] in dest-publish-properties',
        'delivery_mode should be a number, actually was <<"x">>',
        'dest-add-forward-headers should be boolean, actually was <<"yes">>',
        "src-queue should be binary, actually was 5",
        "src-uri should be list, actually was 5",
    ]),
]


class ValidationTests(TestCase):
    """:func:`shovel_errors` against RabbitMQ's answers."""

    def test_valid_definitions(self) -> None:
        self.assertEqual(shovel_errors("s", OK), [])
        full = {
            "src-uri": ["amqp://u:p@h1:5672/v", "amqps://h2?heartbeat=5"], "src-exchange": "x",
            "src-exchange-key": "k", "src-prefetch-count": 10, "src-delete-after": "queue-length",
            "dest-uri": "amqp://", "dest-exchange": "y", "dest-exchange-key": "k2",
            "dest-add-forward-headers": True, "dest-add-timestamp-header": False,
            "dest-publish-properties": {"delivery_mode": 2, "app_id": "shovel"},
            "ack-mode": "on-publish", "reconnect-delay": 1.5,
        }
        self.assertEqual(shovel_errors("s", full), [])

    def test_refusals_word_by_word(self) -> None:
        for value, reasons in REFUSED:
            self.assertEqual(shovel_errors("s", value), reasons, value)

    def test_not_an_object(self) -> None:
        self.assertEqual(shovel_errors("s", "text"), ['s not a list <<"text">>'])


class DefinitionTests(TestCase):
    """:meth:`ShovelDefinition.from_json`."""

    def test_defaults(self) -> None:
        definition = ShovelDefinition.from_json(OK)
        self.assertEqual(
            (definition.ack_mode, definition.prefetch_count, definition.delete_after, definition.reconnect_delay,
             definition.dest_exchange, definition.dest_exchange_key, definition.src_uris),
            ("on-confirm", 1000, "never", 5.0, None, None, (LinkUri("amqp://"),)),
        )

    def test_old_names(self) -> None:
        definition = ShovelDefinition.from_json({
            **OK, "prefetch-count": 7, "delete-after": 3, "add-forward-headers": True,
            "publish-properties": {"priority": 1},
        })
        self.assertEqual(
            (definition.prefetch_count, definition.delete_after, definition.add_forward_headers,
             definition.publish_properties),
            (7, 3, True, {"priority": 1}),
        )


class LocalUriTests(TestCase):
    """A URI without a host reaches this broker, logged in as its direct logins say."""

    def setUp(self) -> None:
        self.asked: list[Any] = []

    def direct(self, user: Any) -> tuple[str, str]:
        self.asked.append(user)
        return (user or "none", "one/time+secret")

    def login(self, uri: str, direct: bool = True) -> tuple[str, str, str, int, str]:
        local = LocalAddress("127.0.0.1", 5999, self.direct if direct else None)
        parameters = LinkUri(uri).parameters(local)
        return (parameters.username, parameters.password, parameters.host, parameters.port, parameters.virtual_host)

    def test_without_a_user(self) -> None:
        self.assertEqual(self.login("amqp:///v%2Fx?heartbeat=5"), ("none", "one/time+secret", "127.0.0.1", 5999, "v/x"))
        self.assertEqual(self.asked, [None])

    def test_a_user_without_a_password(self) -> None:
        self.assertEqual(self.login("amqp://ann%40home@"), ("ann@home", "one/time+secret", "127.0.0.1", 5999, "/"))
        self.assertEqual(self.asked, ["ann@home"])

    def test_a_user_and_a_password_log_in_as_given(self) -> None:
        self.assertEqual(self.login("amqp://ann:pw@/v"), ("ann", "pw", "127.0.0.1", 5999, "v"))
        self.assertEqual(self.asked, [])

    def test_without_direct_logins_as_guest(self) -> None:
        self.assertEqual(self.login("amqp://", direct=False), ("guest", "guest", "127.0.0.1", 5999, "/"))

    def test_a_host_is_not_this_broker(self) -> None:
        self.assertEqual(self.login("amqp://h:1"), ("guest", "guest", "h", 1, "/"))
        self.assertEqual(self.asked, [])


class RedactionTests(TestCase):
    """URIs as logs and the API show them."""

    def test_redacted(self) -> None:
        self.assertEqual(redacted("amqp://user:secret@host:5673/v%2Fx?heartbeat=5"), "amqp://host:5673/v%2Fx")
        self.assertEqual(redacted("amqp://"), "amqp://")
        self.assertEqual(redacted("amqps://u:p@[::1]/"), "amqps://[::1]/")

    def test_passwords_hidden_in_text(self) -> None:
        self.assertEqual(hide_passwords('{"uri": "amqp://u:s3cr%2Ft@h/v", "b": "AMQPS://x:y@h"} amqp://h'),
                         '{"uri": "amqp://u:***@h/v", "b": "AMQPS://x:***@h"} amqp://h')


class ApiTests(ManagementTestCase):
    """``PUT /api/parameters/shovel/...`` checks; ``GET`` hides passwords
    (once the shovel service has plugged its component in)."""

    @inlineCallbacks
    def setUp(self) -> Any:
        yield super().setUp()
        ShovelService(self.broker.factory.config, reactor, lambda: None)

    @inlineCallbacks
    def test_put_refused_with_rabbitmqs_reason(self) -> Any:
        value, reasons = REFUSED[1]
        answer = yield self.broker.request("PUT", "/api/parameters/shovel/%2F/s", {"value": value})
        self.assertEqual((answer.status, answer.body),
                         (400, {"error": "bad_request", "reason": "Validation failed\n\n" + "\n".join(reasons) + "\n"}))
        self.assertEqual(self.broker.factory.config.parameters, {})

    @inlineCallbacks
    def test_get_hides_credentials(self) -> Any:
        value = {**OK, "src-uri": ["amqp://u:secret@127.0.0.1:1/v"], "dest-uri": "amqp://u:secret@127.0.0.1:2"}
        answer = yield self.broker.request("PUT", "/api/parameters/shovel/%2F/s", {"value": value})
        self.assertEqual(answer.status, 201)
        listed = yield self.broker.request("GET", "/api/parameters/shovel")
        one = yield self.broker.request("GET", "/api/parameters/shovel/%2F/s")
        self.assertNotIn(b"secret", listed.raw + one.raw)
        self.assertEqual(one.body["value"]["src-uri"], ["amqp://127.0.0.1:1/v"])
        self.assertEqual(one.body["value"]["dest-uri"], "amqp://127.0.0.1:2")
        self.assertEqual(self.broker.factory.config.parameters["shovel", "/", "s"], value)
