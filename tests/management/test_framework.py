"""The API framework: lists, routing, authentication, errors, health checks."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from twisted.internet.defer import inlineCallbacks
from twisted.logger import LogLevel, formatEvent
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.broker.auth import UserDatabase
from txamqp09.broker.auth.cred import AMQPUser
from txamqp09.management.api import ApiError, ApiRequest, Basic, Router, listing, split_path
from txamqp09.broker import oplog
from tests.broker.test_oplog import LogCapture
from tests.management.support import ManagementTestCase


def _request(query: dict[str, str]) -> ApiRequest:
    database = UserDatabase.default()
    return ApiRequest(AMQPUser(database, "guest"), "GET", {}, query, {}, b"", None)  # type: ignore[arg-type]


ROWS = [
    {"name": "beta", "vhost": "/", "messages": 2, "nested": {"a": 1, "b": 2}},
    {"name": "alpha", "vhost": "/", "messages": 10, "nested": {"a": 3, "b": 4}},
    {"name": "Gamma", "vhost": "v", "messages": 1, "nested": {"a": 5, "b": 6}},
]


class ListingTests(SynchronousTestCase):
    """RabbitMQ's list parameters."""

    def test_default_sort_is_vhost_then_name(self) -> None:
        self.assertEqual([row["name"] for row in listing(_request({}), ROWS)], ["alpha", "beta", "Gamma"])

    def test_sort_and_reverse(self) -> None:
        rows = listing(_request({"sort": "messages", "sort_reverse": "true"}), ROWS)
        self.assertEqual([row["messages"] for row in rows], [10, 2, 1])

    def test_sort_by_nested_key(self) -> None:
        rows = listing(_request({"sort": "nested.b", "sort_reverse": "true"}), ROWS)
        self.assertEqual([row["name"] for row in rows], ["Gamma", "alpha", "beta"])

    def test_columns_keep_only_those_fields(self) -> None:
        rows = listing(_request({"columns": "name,vhost,nested.a"}), ROWS)
        self.assertEqual(rows[0], {"name": "alpha", "vhost": "/", "nested": {"a": 3}})

    def test_pages_have_rabbitmqs_shape(self) -> None:
        page = listing(_request({"page": "2", "page_size": "2"}), ROWS)
        self.assertEqual(
            page,
            {"filtered_count": 3, "item_count": 1, "items": [ROWS[2]], "page": 2, "page_count": 2,
             "page_size": 2, "total_count": 3},
        )

    def test_name_filter_ignores_case_and_regex_filters(self) -> None:
        page = listing(_request({"page": "1", "name": "GAM"}), ROWS)
        self.assertEqual([row["name"] for row in page["items"]], ["Gamma"])
        page = listing(_request({"page": "1", "name": "^a|^b", "use_regex": "true"}), ROWS)
        self.assertEqual([row["name"] for row in page["items"]], ["alpha", "beta"])
        self.assertEqual(page["total_count"], 3)
        self.assertEqual(page["filtered_count"], 2)

    def assertRefused(self, query: dict[str, str], error: str, reason: str) -> None:
        refusal = self.assertRaises(ApiError, listing, _request(query), ROWS)
        self.assertEqual((refusal.status, refusal.error, refusal.reason), (400, error, reason))

    def test_bad_pages_are_refused_with_rabbitmqs_texts(self) -> None:
        self.assertRefused(
            {"page": "0"}, "invalid_pagination_parameters",
            "Invalid pagination parameters: page number 0, page size undefined",
        )
        self.assertRefused(
            {"page": "1", "page_size": "1000"}, "invalid_pagination_parameters",
            "Invalid pagination parameters: page number 1, page size 1000",
        )
        self.assertRefused({"page": "5"}, "page_out_of_range", "Page out of range, page: 5 page size: 100, len: 3")
        self.assertRefused({"page": "x"}, "bad_request", "Pagination parameters are invalid")

    def test_basic_rows_expand_only_the_page_when_sorting_on_their_columns(self) -> None:
        expanded: list[str] = []

        def expand(row: dict[str, Any]) -> dict[str, Any]:
            expanded.append(row["name"])
            return row

        rows = [Basic(row, name=row["name"], vhost=row["vhost"]) for row in ROWS]
        page = listing(_request({"page": "1", "page_size": "1", "columns": "name"}), rows, expand=expand)
        self.assertEqual((page["items"], expanded), ([{"name": "alpha"}], ["alpha"]))
        expanded.clear()
        everything = listing(_request({"page": "1", "sort": "messages"}), rows, expand=expand)
        self.assertEqual(sorted(expanded), ["Gamma", "alpha", "beta"])
        self.assertEqual([row["messages"] for row in everything["items"]], [1, 2, 10])
        self.assertEqual(len(listing(_request({}), rows, expand=expand)), 3)

    def test_a_regex_that_does_not_compile_is_refused(self) -> None:
        self.assertRefused({"page": "1", "name": "(", "use_regex": "true"}, "bad_request",
                           "Pagination parameters are invalid")


class RouterTests(SynchronousTestCase):
    """Patterns, verbs, decoding."""

    def setUp(self) -> None:
        self.router = Router()
        self.router.add("GET", "/api/queues/{vhost}", lambda request: "vhost")
        self.router.add("GET", "/api/queues/{vhost}/{name}", lambda request: "queue")
        self.router.add("DELETE", "/api/queues/{vhost}/{name}", lambda request: "delete", tag="administrator")
        self.router.add("GET", "/api/health/checks/alarms", lambda request: "alarms")
        self.router.add("GET", "/api/{a}/checks/alarms", lambda request: "never")

    def test_parameters_are_decoded_segments(self) -> None:
        handler, tag, args = self.router.resolve("GET", split_path("/api/queues/%2F/a%20b"))
        self.assertEqual((handler(None), tag, args), ("queue", "management", {"vhost": "/", "name": "a b"}))

    def test_literal_segments_win(self) -> None:
        handler, _, _ = self.router.resolve("GET", split_path("/api/health/checks/alarms"))
        self.assertEqual(handler(None), "alarms")

    def test_unknown_path_is_404_and_wrong_verb_405(self) -> None:
        missing = self.assertRaises(ApiError, self.router.resolve, "GET", split_path("/api/nope"))
        self.assertEqual((missing.status, missing.body()), (404, {"error": "Object Not Found", "reason": "Not Found"}))
        verb = self.assertRaises(ApiError, self.router.resolve, "POST", split_path("/api/queues/%2F/q"))
        self.assertEqual(verb.status, 405)
        self.assertEqual(verb.headers["Allow"], "DELETE, GET")

    def test_tags_follow_rabbitmqs_rules(self) -> None:
        self.router.authorise(("administrator",), "monitoring")
        self.router.authorise(("monitoring",), "monitoring")
        refused = self.assertRaises(ApiError, self.router.authorise, ("policymaker",), "monitoring")
        self.assertEqual(refused.body(), {"error": "not_authorised", "reason": "Not monitor user"})
        refused = self.assertRaises(ApiError, self.router.authorise, (), "management")
        self.assertEqual(refused.body(), {"error": "not_authorised", "reason": "Not management user"})
        refused = self.assertRaises(ApiError, self.router.authorise, ("monitoring",), "administrator")
        self.assertEqual(refused.reason, "Not administrator user")

    def test_the_same_route_twice_is_an_error(self) -> None:
        self.assertRaises(ValueError, self.router.add, "GET", "/api/queues/{vhost}", lambda request: None)


class HttpTests(ManagementTestCase):
    """The API over HTTP on loopback."""

    @inlineCallbacks
    def test_whoami(self) -> Any:
        answer = yield self.broker.request("GET", "/api/whoami")
        self.assertEqual((answer.status, answer.body), (200, {"name": "guest", "tags": ["administrator"]}))
        self.assertEqual(answer.headers["content-type"], "application/json")

    @inlineCallbacks
    def test_wrong_or_missing_credentials_are_401_with_a_challenge(self) -> Any:
        """Wrong credentials: RabbitMQ's body and challenge; none: the challenge
        alone (RabbitMQ 3.10 answers with an empty body)."""
        for user, password, body in [("guest", "wrong", {"error": "not_authorized", "reason": "Login failed"}),
                                     ("nobody", "x", {"error": "not_authorized", "reason": "Login failed"}),
                                     (None, "", None)]:
            answer = yield self.broker.request("GET", "/api/whoami", user=user, password=password)
            self.assertEqual(answer.status, 401)
            self.assertEqual(answer.body, body)
            self.assertEqual(answer.headers["www-authenticate"], 'Basic realm="RabbitMQ Management"')

    @inlineCallbacks
    def test_authorization_headers_that_are_not_a_login(self) -> Any:
        """Another scheme is answered as no credentials; Basic credentials
        that do not decode are a bad request without a body (RabbitMQ's)."""
        for header, status, challenge in [("Digest username=guest", 401, 'Basic realm="RabbitMQ Management"'),
                                          ("Basic !!!", 400, None), ("Basic Z3Vlc3Q=", 400, None)]:
            answer = yield self.broker.request("GET", "/api/whoami", user=None, headers={"Authorization": header})
            self.assertEqual((answer.status, answer.raw, answer.headers.get("www-authenticate")),
                             (status, b"", challenge), header)
        answer = yield self.broker.request("GET", "/api/whoami", user=None, headers={"Authorization": "Bearer t"})
        self.assertEqual((answer.status, answer.body), (401, {"error": "not_authorized", "reason": "Login failed"}))

    @inlineCallbacks
    def test_a_user_without_management_tags_is_not_authorised(self) -> Any:
        self.broker.add_user("plain", "p")
        answer = yield self.broker.request("GET", "/api/whoami", user="plain", password="p")
        self.assertEqual((answer.status, answer.body), (401, {"error": "not_authorised", "reason": "Not management user"}))

    @inlineCallbacks
    def test_a_management_user_may_not_see_the_nodes(self) -> Any:
        self.broker.add_user("mg", "p", tags=("management",))
        answer = yield self.broker.request("GET", "/api/nodes", user="mg", password="p")
        self.assertEqual((answer.status, answer.body), (401, {"error": "not_authorised", "reason": "Not monitor user"}))
        self.broker.add_user("mon", "p", tags=("monitoring",))
        answer = yield self.broker.request("GET", "/api/nodes", user="mon", password="p")
        self.assertEqual(answer.status, 200)
        self.assertEqual([node["name"] for node in answer.body], [self.broker.node.name])

    @inlineCallbacks
    def test_unknown_paths_are_404_with_rabbitmqs_body(self) -> Any:
        for path in ["/api/nope", "/nothing", f"/api/nodes/{'other@host'}"]:
            answer = yield self.broker.request("GET", path)
            self.assertEqual((answer.status, answer.body), (404, {"error": "Object Not Found", "reason": "Not Found"}))

    @inlineCallbacks
    def test_a_fault_is_a_500_body_without_a_traceback(self) -> Any:
        def broken(request: ApiRequest) -> None:
            raise ZeroDivisionError("division by zero")

        self.broker.node_router = router = Router()
        router.add("GET", "/api/broken", broken)
        resource = self.broker.ports[1].factory.resource.children[b"api"]
        resource.router = router
        answer = yield self.broker.request("GET", "/api/broken")
        self.assertEqual(answer.status, 500)
        self.assertEqual(answer.body, {"error": "internal_error", "reason": "ZeroDivisionError: division by zero"})
        self.assertNotIn(b"Traceback", answer.raw)
        self.assertEqual(len(self.flushLoggedErrors(ZeroDivisionError)), 1)

    @inlineCallbacks
    def test_overview_lists_listeners_and_totals(self) -> Any:
        answer = yield self.broker.request("GET", "/api/overview")
        self.assertEqual(answer.status, 200)
        ports = {(listener["protocol"], listener["port"]) for listener in answer.body["listeners"]}
        self.assertEqual(ports, {("amqp", self.broker.amqp_port), ("http", self.broker.http_port)})
        self.assertEqual(answer.body["object_totals"]["queues"], 0)
        self.assertEqual(answer.body["object_totals"]["exchanges"], 6)

    @inlineCallbacks
    def test_health_checks(self) -> Any:
        answer = yield self.broker.request("GET", "/api/health/checks/alarms")
        self.assertEqual((answer.status, answer.body), (200, {"status": "ok"}))
        answer = yield self.broker.request("GET", f"/api/health/checks/port-listener/{self.broker.amqp_port}")
        self.assertEqual((answer.status, answer.body), (200, {"status": "ok", "port": self.broker.amqp_port}))
        answer = yield self.broker.request("GET", "/api/health/checks/port-listener/1")
        self.assertEqual(answer.status, 503)
        self.assertEqual(answer.body["reason"], "No active listener")
        self.assertEqual(sorted(answer.body["ports"]), sorted([self.broker.amqp_port, self.broker.http_port]))
        answer = yield self.broker.request("GET", "/api/health/checks/port-listener/x")
        self.assertEqual((answer.status, answer.body), (400, {"error": "bad_request", "reason": "Invalid port"}))

    @inlineCallbacks
    def test_memory_alarm_fails_the_alarm_checks(self) -> Any:
        self.broker.factory.throttle.blocked = True
        answer = yield self.broker.request("GET", "/api/health/checks/local-alarms")
        self.assertEqual(answer.status, 503)
        self.assertEqual(answer.body["alarms"], [{"node": self.broker.node.name, "resource": "memory"}])

    @inlineCallbacks
    def test_disk_alarm_fails_the_alarm_checks(self) -> Any:
        self.broker.factory.alarms.raise_alarm("disk")
        answer = yield self.broker.request("GET", "/api/health/checks/alarms")
        self.assertEqual(answer.status, 503)
        self.assertEqual(answer.body["reason"], "There are alarms in effect in the cluster")
        self.assertEqual(answer.body["alarms"], [{"node": self.broker.node.name, "resource": "disk"}])
        answer = yield self.broker.request("GET", "/api/nodes")
        self.assertEqual((answer.body[0]["disk_free_alarm"], answer.body[0]["mem_alarm"]), (True, False))
        self.broker.factory.alarms.clear_alarm("disk")
        answer = yield self.broker.request("GET", "/api/health/checks/alarms")
        self.assertEqual((answer.status, answer.body), (200, {"status": "ok"}))

    @inlineCallbacks
    def test_node_reports_the_bytes_its_store_takes(self) -> Any:
        answer = yield self.broker.request("GET", "/api/nodes")
        self.assertEqual(answer.body[0]["store_bytes"], 0)
        database = self.mktemp()
        with open(database, "wb") as written:
            written.write(b"d" * 100)
        with open(database + "-wal", "wb") as written:
            written.write(b"w" * 50)
        self.broker.node.store = SimpleNamespace(path=database)
        answer = yield self.broker.request("GET", "/api/nodes")
        self.assertEqual(answer.body[0]["store_bytes"], 150)

    @inlineCallbacks
    def test_aliveness_test_publishes_and_gets(self) -> Any:
        answer = yield self.broker.request("GET", "/api/aliveness-test/%2F")
        self.assertEqual((answer.status, answer.body), (200, {"status": "ok"}))
        vhost = self.broker.factory.broker.vhosts["/"]
        self.assertEqual(vhost.queues["aliveness-test"].message_count, 0)
        answer = yield self.broker.request("GET", "/api/aliveness-test/nohost")
        self.assertEqual((answer.status, answer.body), (404, {"error": "not_found", "reason": "vhost_not_found"}))


class OperatorLogTests(ManagementTestCase):
    """What the API's requests and refused logins write to the log."""

    @inlineCallbacks
    def test_requests_are_debug_lines(self) -> Any:
        """Nothing at info or above (a UI tab polls every few seconds); one
        debug line per request with --log-level debug."""
        log = LogCapture(self)
        yield self.broker.request("GET", "/api/overview")
        self.assertEqual(
            [formatEvent(event) for event in log.events
             if event["log_level"] >= LogLevel.info and "/api/overview" in formatEvent(event)],
            [],
        )
        oplog.set_level("debug")
        yield self.broker.request("GET", "/api/overview?columns=node")
        yield self.broker.request("GET", "/api/whoami", user=None)
        self.assertEqual(log.lines(), [
            "debug: http request from 127.0.0.1 (user 'guest'): GET /api/overview?columns=node answered 200",
            "debug: http request from 127.0.0.1 (user (none)): GET /api/whoami answered 401",
        ])

    @inlineCallbacks
    def test_refused_logins_are_logged_as_amqp_ones_are(self) -> Any:
        log = LogCapture(self)
        oplog.set_level("warn")
        self.broker.add_user("app", "secret", tags=("management",))
        yield self.broker.request("GET", "/api/whoami", user="guest", password="wrong")
        yield self.broker.request("GET", "/api/whoami", user="nobody", password="x")
        yield self.broker.request("GET", "/api/whoami", user="app", password="secret")
        self.assertEqual(log.lines(), [
            "warn: login refused: user 'guest' from 127.0.0.1 using HTTP basic auth (management API): "
            "unknown user or wrong password",
            "warn: login refused: user 'nobody' from 127.0.0.1 using HTTP basic auth (management API): "
            "unknown user or wrong password",
        ])
