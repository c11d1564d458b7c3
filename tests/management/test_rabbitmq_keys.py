"""The same requests against a private RabbitMQ 3.10 (rabbitmq_management) and
this broker: this broker's JSON keys include RabbitMQ's for the same objects.

Keys that describe the Erlang VM or RabbitMQ's internals are listed in
:data:`ERLANG_ONLY` (docs/management.rst lists them too).
"""

from __future__ import annotations

from typing import Any, Callable, Optional
from urllib.parse import quote

from twisted.internet import reactor
from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.trial.unittest import TestCase

from txamqp09.client.connection import connect
from txamqp09.testing.rabbitmq import rabbitmq_missing, shared_rabbitmq
from txamqp09.testing.waiting import eventually
from tests.management.support import Answer, ManagementBroker, http_request

#: Keys about the Erlang VM, Mnesia, RabbitMQ's queue index and clustering.
ERLANG_ONLY = frozenset({
    "garbage_collection", "reductions", "reductions_details", "backing_queue_status",
    "recoverable_slaves", "erlang_full_version", "statistics_db_event_queue",
    "gc_num", "gc_num_details", "gc_bytes_reclaimed", "gc_bytes_reclaimed_details",
    "context_switches", "context_switches_details", "proc_used", "proc_used_details", "proc_total",
    "run_queue", "net_ticktime", "metrics_gc_queue_length", "ra_open_file_metrics",
    "io_read_count", "io_read_count_details", "io_read_bytes", "io_read_bytes_details",
    "io_read_avg_time", "io_read_avg_time_details", "io_write_count", "io_write_count_details",
    "io_write_bytes", "io_write_bytes_details", "io_write_avg_time", "io_write_avg_time_details",
    "io_sync_count", "io_sync_count_details", "io_sync_avg_time", "io_sync_avg_time_details",
    "io_seek_count", "io_seek_count_details", "io_seek_avg_time", "io_seek_avg_time_details",
    "io_reopen_count", "io_reopen_count_details", "mnesia_ram_tx_count", "mnesia_ram_tx_count_details",
    "mnesia_disk_tx_count", "mnesia_disk_tx_count_details", "msg_store_read_count",
    "msg_store_read_count_details", "msg_store_write_count", "msg_store_write_count_details",
    "queue_index_write_count", "queue_index_write_count_details", "queue_index_read_count",
    "queue_index_read_count_details", "disk_reads", "disk_reads_details", "disk_writes",
    "disk_writes_details", "ssl_opts", "cowboy_opts",
})
#: Nested objects whose keys are compared too.
NESTED = ("message_stats", "object_totals", "queue_totals", "churn_rates", "connection_details",
          "channel_details", "queue", "sample_retention_policies")
QUEUE, EXCHANGE = "keys-q", "keys-x"


def missing_keys(ours: Any, theirs: Any, where: str = "") -> list[str]:
    """RabbitMQ's keys that this broker's answer lacks (Erlang-only ones aside)."""
    if not isinstance(theirs, dict) or not isinstance(ours, dict):
        return []
    missing = [f"{where}{key}" for key in theirs if key not in ours and key not in ERLANG_ONLY]
    for key in NESTED:
        if key in theirs and key in ours:
            missing += missing_keys(ours[key], theirs[key], f"{where}{key}.")
    return missing


def history_shapes(body: Any, where: str = "") -> dict[str, tuple[tuple[str, ...], int, bool]]:
    """Each ``*_details`` object of *body* (and of its :data:`NESTED` objects):
    its keys, how many samples it has, and whether every sample is a
    ``{"sample", "timestamp"}`` object with a timestamp on the range's grid."""
    shapes: dict[str, tuple[tuple[str, ...], int, bool]] = {}
    if not isinstance(body, dict):
        return shapes
    for key, value in body.items():
        if key.endswith("_details") and isinstance(value, dict) and key not in ERLANG_ONLY:
            samples = value.get("samples", [])
            on_grid = all(set(sample) == {"sample", "timestamp"} for sample in samples) and len(
                {later["timestamp"] - earlier["timestamp"] for later, earlier in zip(samples, samples[1:])}) <= 1
            shapes[f"{where}{key}"] = (tuple(sorted(value)), len(samples), on_grid)
        elif key in NESTED:
            shapes.update(history_shapes(value, f"{where}{key}."))
    return shapes


class Target:
    """One broker's API and AMQP port, driven the same way."""

    def __init__(self, url: str, amqp_port: int) -> None:
        self.url = url
        self.amqp_port = amqp_port

    def request(self, method: str, path: str, body: Any = None) -> Any:
        return http_request(self.url, method, path, body)

    @inlineCallbacks
    def prepare(self, test: TestCase) -> Any:
        """A queue, a topic exchange, a binding, 3 messages, a consumer holding 2 of them."""
        yield self.request("DELETE", f"/api/queues/%2F/{QUEUE}")
        yield self.request("PUT", f"/api/queues/%2F/{QUEUE}", {"durable": False, "arguments": {"x-max-length": 100}})
        yield self.request("PUT", f"/api/exchanges/%2F/{EXCHANGE}", {"type": "topic", "durable": False})
        yield self.request("POST", f"/api/bindings/%2F/e/{EXCHANGE}/q/{QUEUE}", {"routing_key": "a.#"})
        for number in range(3):
            yield self.request("POST", f"/api/exchanges/%2F/{EXCHANGE}/publish", {
                "routing_key": "a.b", "payload": f"m{number}", "payload_encoding": "string", "properties": {}})
        connection = yield connect(reactor, f"amqp://guest:guest@127.0.0.1:{self.amqp_port}/")
        test.addCleanup(connection.disconnect)
        channel = yield connection.channel()
        yield channel.basic_qos(2)
        yield channel.basic_consume(QUEUE, lambda message: None, consumer_tag="keys-consumer")

    def until(self, path: str, ready: Callable[[Any], bool], timeout: float = 30.0) -> Deferred[Any]:
        """GET *path* until *ready* accepts the body (RabbitMQ emits statistics every 5 s)."""

        async def ready_body() -> Optional[tuple[Any]]:
            answer: Answer = await self.request("GET", path)
            return (answer.body,) if answer.status == 200 and ready(answer.body) else None

        found = eventually(ready_body, reactor, timeout, interval=0.5, what=f"{self.url}{path} ready")
        return found.addCallback(lambda body: body[0])


def _ours(rows: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    return next(row for row in rows if all(row.get(key) == value for key, value in match.items()))


class KeyComparisonTests(TestCase):
    """For each endpoint, RabbitMQ's keys are a subset of this broker's."""

    skip = rabbitmq_missing()
    timeout = 180

    @inlineCallbacks
    def setUp(self) -> Any:
        node = shared_rabbitmq(management=True)
        assert node.management_port is not None
        self.theirs = Target(f"http://127.0.0.1:{node.management_port}", node.port)
        self.broker = ManagementBroker()
        yield self.broker.start()
        self.addCleanup(self.broker.stop)
        self.ours = Target(self.broker.url, self.broker.amqp_port)
        yield self.theirs.prepare(self)
        yield self.ours.prepare(self)
        # RabbitMQ lists channels and rates once its statistics arrived.
        yield self.theirs.until("/api/channels", lambda rows: any(row.get("consumer_count") for row in rows))
        yield self.theirs.until(f"/api/queues/%2F/{QUEUE}", lambda body: "message_stats" in body
                                and body.get("messages_unacknowledged") == 2)
        self.broker.node.stats.sample()

    @inlineCallbacks
    def compare(self, path: str, pick: Callable[[Any], Any] = lambda body: body) -> Any:
        theirs = yield self.theirs.request("GET", path)
        ours = yield self.ours.request("GET", path)
        self.assertEqual(ours.status, theirs.status, path)
        self.assertEqual(missing_keys(pick(ours.body), pick(theirs.body)), [], path)
        return ours.body

    @inlineCallbacks
    def test_single_objects(self) -> Any:
        for path in ["/api/overview", "/api/whoami", f"/api/queues/%2F/{QUEUE}", f"/api/exchanges/%2F/{EXCHANGE}",
                     "/api/health/checks/alarms", "/api/health/checks/local-alarms",
                     "/api/health/checks/virtual-hosts", "/api/aliveness-test/%2F", "/api/queues/%2F/nothing"]:
            yield self.compare(path)

    @inlineCallbacks
    def test_lists(self) -> Any:
        queue = lambda rows: _ours(rows, name=QUEUE)  # noqa: E731
        yield self.compare("/api/queues", queue)
        yield self.compare("/api/queues/%2F", queue)
        yield self.compare("/api/exchanges/%2F", lambda rows: _ours(rows, name=EXCHANGE))
        yield self.compare("/api/bindings/%2F", lambda rows: _ours(rows, source=EXCHANGE))
        yield self.compare(f"/api/queues/%2F/{QUEUE}/bindings", lambda rows: rows[-1])
        yield self.compare(f"/api/exchanges/%2F/{EXCHANGE}/bindings/source", lambda rows: rows[0])
        yield self.compare("/api/consumers", lambda rows: _ours(rows, consumer_tag="keys-consumer"))
        yield self.compare("/api/connections", lambda rows: rows[0])
        yield self.compare("/api/channels", lambda rows: _ours(rows, consumer_count=1))
        yield self.compare("/api/nodes", lambda rows: rows[0])
        yield self.compare("/api/queues?page=1&page_size=10&name=keys", lambda page: page)
        yield self.compare("/api/queues?page=1&page_size=10&name=keys", lambda page: page["items"][0])

    @inlineCallbacks
    def test_sample_histories(self) -> Any:
        """``*_details`` with ``samples``, ``avg_rate`` and ``avg`` as RabbitMQ 3.10 answers."""
        rates = "msg_rates_age=60&msg_rates_incr=5&lengths_age=30&lengths_incr=10"
        for path, pick in [
            (f"/api/overview?{rates}", lambda body: body),
            (f"/api/queues/%2F/{QUEUE}?{rates}", lambda body: body),
            (f"/api/queues?{rates}", lambda rows: _ours(rows, name=QUEUE)),
            (f"/api/exchanges/%2F/{EXCHANGE}?{rates}", lambda body: body),
            (f"/api/vhosts/%2F?{rates}&data_rates_age=20&data_rates_incr=5", lambda body: body),
            ("/api/connections?data_rates_age=20&data_rates_incr=5", lambda rows: rows[0]),
            (f"/api/channels?{rates}", lambda rows: _ours(rows, consumer_count=1)),
            ("/api/nodes?node_stats_age=20&node_stats_incr=10", lambda rows: rows[0]),
        ]:
            theirs = yield self.theirs.request("GET", path)
            ours = yield self.ours.request("GET", path)
            self.assertEqual(ours.status, theirs.status, path)
            their_shapes, our_shapes = history_shapes(pick(theirs.body)), history_shapes(pick(ours.body))
            self.assertTrue(any(shape[1] for shape in their_shapes.values()), path)
            self.assertEqual({key: our_shapes.get(key) for key in their_shapes}, their_shapes, path)
        theirs = yield self.theirs.request("GET", "/api/overview?msg_rates_age=0&msg_rates_incr=5")
        ours = yield self.ours.request("GET", "/api/overview?msg_rates_age=0&msg_rates_incr=5")
        self.assertEqual((ours.status, ours.body), (theirs.status, theirs.body))

    @inlineCallbacks
    def test_binding_properties_keys(self) -> Any:
        """Bindings with arguments declared over AMQP get RabbitMQ's properties_key."""
        tables = [{"x-match": "any", "a": 1, "b": "s"}, {"n": {"k": [1, "v"], "f": 2.5}}, {"big": 5000000000, "t": True}]
        keys = []
        for target in (self.theirs, self.ours):
            connection = yield connect(reactor, f"amqp://guest:guest@127.0.0.1:{target.amqp_port}/")
            self.addCleanup(connection.disconnect)
            channel = yield connection.channel()
            for number, table in enumerate(tables):
                yield channel.queue_bind(queue=QUEUE, exchange="amq.headers", routing_key=f"k{number}", arguments=table)
            answer = yield target.request("GET", f"/api/queues/%2F/{QUEUE}/bindings")
            keys.append(sorted(row["properties_key"] for row in answer.body if row["source"] == "amq.headers"))
        self.assertEqual(len(keys[0]), 3)
        self.assertEqual(keys[1], keys[0])

    @inlineCallbacks
    def test_definitions_import_keeps_an_existing_entity_that_differs(self) -> Any:
        """RabbitMQ 3.10 keeps the existing queue, imports the rest and answers
        204; this broker does the same and names the queue it kept (200)."""
        definitions = {"queues": [
            {"name": QUEUE, "vhost": "/", "durable": False, "auto_delete": False, "arguments": {"x-max-length": 5}},
            {"name": "keys-after", "vhost": "/", "durable": True, "auto_delete": False, "arguments": {}},
        ]}
        answers = []
        for target in (self.theirs, self.ours):
            imported = yield target.request("POST", "/api/definitions", definitions)
            self.addCleanup(target.request, "DELETE", "/api/queues/%2F/keys-after")
            kept = yield target.request("GET", f"/api/queues/%2F/{QUEUE}")
            after = yield target.request("GET", "/api/queues/%2F/keys-after")
            answers.append((imported, kept.body["arguments"], after.status))
        (their_import, their_kept, their_after), (our_import, our_kept, our_after) = answers
        self.assertEqual(their_import.status, 204)
        self.assertEqual((our_kept, our_after), (their_kept, their_after))
        self.assertEqual((their_kept, their_after), ({"x-max-length": 100}, 200))
        self.assertEqual(our_import.status, 200)
        self.assertIn(QUEUE, " ".join(our_import.body["unsupported"]))

    @inlineCallbacks
    def test_channel_and_connection_by_name(self) -> Any:
        for target in (self.theirs, self.ours):
            answer = yield target.request("GET", "/api/channels")
            target.channel = quote(_ours(answer.body, consumer_count=1)["name"], safe="")  # type: ignore[attr-defined]
        theirs = yield self.theirs.request("GET", f"/api/channels/{self.theirs.channel}")  # type: ignore[attr-defined]
        ours = yield self.ours.request("GET", f"/api/channels/{self.ours.channel}")  # type: ignore[attr-defined]
        self.assertEqual(missing_keys(ours.body, theirs.body), [])
        self.assertEqual(missing_keys(ours.body["consumer_details"][0], theirs.body["consumer_details"][0]), [])

    @inlineCallbacks
    def test_get_and_publish_answers(self) -> Any:
        answers = []
        for target in (self.theirs, self.ours):
            published = yield target.request("POST", f"/api/exchanges/%2F/{EXCHANGE}/publish", {
                "routing_key": "a.b", "payload": "x", "payload_encoding": "string",
                "properties": {"content_type": "text/plain"}})
            got = yield target.request("POST", f"/api/queues/%2F/{QUEUE}/get", {
                "count": 1, "ackmode": "ack_requeue_true", "encoding": "auto"})
            answers.append((published, got))
        (their_publish, their_get), (our_publish, our_get) = answers
        self.assertEqual(our_publish.body, their_publish.body)
        self.assertEqual(missing_keys(our_get.body[0], their_get.body[0]), [])
        # RabbitMQ writes empty properties as [] (an empty Erlang list).
        self.assertEqual(our_get.body[0]["properties"], their_get.body[0]["properties"] or {})

    @inlineCallbacks
    def test_login_refusals(self) -> Any:
        """Wrong or missing credentials: the same status, body and challenge
        (or none) as RabbitMQ."""
        for user, password, headers in [("guest", "wrong", None), ("nobody", "x", None), (None, "", None),
                                         (None, "", {"Authorization": "Digest username=guest"}),
                                         (None, "", {"Authorization": "Basic !!!"}),
                                         (None, "", {"Authorization": "Basic Z3Vlc3Q="}),
                                         (None, "", {"Authorization": "Bearer t"})]:
            answers = []
            for target in (self.theirs, self.ours):
                answer = yield http_request(target.url, "GET", "/api/whoami", user=user, password=password,
                                            headers=headers)
                answers.append((answer.status, answer.body, answer.headers.get("www-authenticate")))
            self.assertEqual(answers[1], answers[0], (user, password, headers))

    @inlineCallbacks
    def test_error_bodies(self) -> Any:
        for method, path, body, same_reason in [
            ("PUT", f"/api/queues/nohost/{QUEUE}", {}, True),
            ("PUT", "/api/queues/%2F/" + "a" * 256, {}, True),
            ("PUT", f"/api/queues/%2F/{QUEUE}", {"durable": True}, False),
            ("GET", "/api/queues?page=0", None, True),
            ("GET", "/api/queues?page=1&page_size=1000", None, True),
            ("GET", "/api/queues?page=1&name=(&use_regex=true", None, True),
            ("GET", "/api/queues?page=99", None, False),  # the lengths differ
            ("GET", "/api/queues/%2F/nothing", None, True),
            ("PUT", f"/api/queues/%2F/{QUEUE}", None, False),
        ]:
            theirs = yield self.theirs.request(method, path, body)
            ours = yield self.ours.request(method, path, body)
            self.assertEqual(ours.status, theirs.status, path)
            self.assertEqual(ours.body["error"], theirs.body["error"], path)
            if same_reason:
                self.assertEqual(ours.body["reason"], theirs.body["reason"].strip(), path)
