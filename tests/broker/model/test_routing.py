"""Exchange routing rules without sockets: topic wildcards, headers, e2e bindings."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from tests.broker.support import message
from txamqp09.broker.model import Client, VirtualHost
from txamqp09.broker.model.routing import TopicTrie, freeze, headers_match
from txamqp09.wire.errors import PreconditionFailed

#: (binding key, routing key, matches) as RabbitMQ decides them.
TOPIC_CASES = [
    ("a.b.c", "a.b.c", True),
    ("a.b.c", "a.b", False),
    ("a.*.c", "a.b.c", True),
    ("a.*.c", "a.c", False),
    ("a.*.c", "a.b.b.c", False),
    ("a.#", "a", True),
    ("a.#", "a.b.c", True),
    ("a.#", "ab", False),
    ("#", "", True),
    ("#", "a.b", True),
    ("*", "", False),
    ("*", "a", True),
    ("*", "a.b", False),
    ("", "", True),
    ("", "a", False),
    ("#.a", "a", True),
    ("#.a", "b.b.a", True),
    ("#.a", "a.b", False),
    ("a.#.b", "a.b", True),
    ("a.#.b", "a.x.y.b", True),
    ("a.#.b", "a.x.y.c", False),
    ("*.#", "", False),
    ("*.#", "a", True),
    ("#.#", "", True),
    ("#.*.#", "a.b", True),
    ("a..b", "a..b", True),
    ("a.*.b", "a..b", True),
    ("a.*", "a.", True),
    ("*.*", "a", False),
]


class TopicTrieTests(SynchronousTestCase):
    def test_rabbitmq_semantics(self) -> None:
        """Each binding key matches exactly the routing keys RabbitMQ matches."""
        for binding_key, routing_key, expected in TOPIC_CASES:
            trie = TopicTrie()
            trie.add(binding_key, "q")
            self.assertEqual(
                trie.match(routing_key) == ("q",), expected, f"{binding_key!r} vs {routing_key!r}"
            )

    def test_destination_once(self) -> None:
        """A destination bound by several matching keys is found once."""
        trie = TopicTrie()
        for key in ("a.*", "*.b", "#", "a.b"):
            trie.add(key, "q")
        trie.add("a.#", "r")
        self.assertEqual(sorted(trie.match("a.b")), ["q", "r"])

    def test_remove_prunes(self) -> None:
        """Removing a binding stops its matches and leaves others in place."""
        trie = TopicTrie()
        trie.add("a.*.c", "q")
        trie.add("a.*.c", "q")
        trie.add("a.#", "r")
        trie.remove("a.*.c", "q")
        self.assertEqual(sorted(trie.match("a.b.c")), ["q", "r"])
        trie.remove("a.*.c", "q")
        self.assertEqual(trie.match("a.b.c"), ("r",))
        trie.remove("a.#", "r")
        self.assertEqual(trie.match("a.b.c"), ())

    def test_many_hashes_stay_cheap(self) -> None:
        """Patterns of many ``#`` against long keys finish (visited states are shared)."""
        trie = TopicTrie()
        trie.add(".".join(["#"] * 30) + ".z", "q")
        self.assertEqual(trie.match(".".join(["a"] * 200)), ())
        self.assertEqual(trie.match(".".join(["a"] * 200) + ".z"), ("q",))


class HeadersMatchTests(SynchronousTestCase):
    def test_all_and_any(self) -> None:
        arguments = {"format": b"pdf", "type": b"report"}
        self.assertTrue(headers_match("all", arguments, {"format": b"pdf", "type": b"report", "x": 1}))
        self.assertFalse(headers_match("all", arguments, {"format": b"pdf"}))
        self.assertTrue(headers_match("any", arguments, {"format": b"pdf"}))
        self.assertFalse(headers_match("any", arguments, {"format": b"zip"}))

    def test_x_arguments(self) -> None:
        """x- arguments are ignored, except by all-with-x and any-with-x."""
        arguments = {"x-match": "all", "x-tag": 1, "a": 1}
        self.assertTrue(headers_match("all", arguments, {"a": 1}))
        self.assertFalse(headers_match("all-with-x", arguments, {"a": 1}))
        self.assertTrue(headers_match("all-with-x", arguments, {"a": 1, "x-tag": 1}))
        self.assertTrue(headers_match("any-with-x", {"x-tag": 1}, {"x-tag": 1}))
        self.assertFalse(headers_match("any", {"x-tag": 1}, {"x-tag": 1}))

    def test_empty_arguments(self) -> None:
        """No arguments: all matches every message, any matches none (as RabbitMQ)."""
        self.assertTrue(headers_match("all", {"x-match": "all"}, {}))
        self.assertFalse(headers_match("any", {"x-match": "any"}, {"a": 1}))

    def test_void_matches_presence(self) -> None:
        self.assertTrue(headers_match("all", {"a": None}, {"a": b"anything"}))
        self.assertFalse(headers_match("all", {"a": None}, {"b": 1}))

    def test_types_matter(self) -> None:
        """true is not 1, and 1 is not "1"; str and longstr bytes compare equal."""
        self.assertFalse(headers_match("all", {"a": True}, {"a": 1}))
        self.assertFalse(headers_match("all", {"a": 1}, {"a": b"1"}))
        self.assertTrue(headers_match("all", {"a": "x"}, {"a": b"x"}))

    def test_freeze_distinguishes_tables(self) -> None:
        self.assertEqual(freeze({"a": [1, {"b": b"c"}]}), freeze({"a": [1, {"b": b"c"}]}))
        self.assertNotEqual(freeze({"a": 1}), freeze({"a": True}))


class ExchangeRoutingTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.vhost = VirtualHost("/")
        self.client = Client("c")

    def queue(self, name: str) -> object:
        return self.vhost.declare_queue(name, self.client)

    def route(self, exchange: str, routing_key: str = "", **options: object) -> list[str]:
        source = self.vhost.exchange(exchange)
        found = source.route(message(routing_key=routing_key, **options))  # type: ignore[arg-type]
        if source.exchange_bindings:
            found = self.vhost.follow(source, found, message(routing_key=routing_key))
        return sorted(queue.name for queue in found)

    def test_default_exchange(self) -> None:
        self.queue("q")
        self.assertEqual(self.route("", "q"), ["q"])
        self.assertEqual(self.route("", "other"), [])

    def test_direct_binds_once_per_queue(self) -> None:
        self.queue("q")
        self.vhost.bind_queue("q", "amq.direct", "k", {}, self.client)
        self.vhost.bind_queue("q", "amq.direct", "k", {"x": 1}, self.client)
        self.assertEqual(self.route("amq.direct", "k"), ["q"])
        self.vhost.unbind_queue("q", "amq.direct", "k", {}, self.client)
        self.assertEqual(self.route("amq.direct", "k"), ["q"])
        self.vhost.unbind_queue("q", "amq.direct", "k", {"x": 1}, self.client)
        self.assertEqual(self.route("amq.direct", "k"), [])

    def test_fanout(self) -> None:
        for name in ("a", "b"):
            self.queue(name)
            self.vhost.bind_queue(name, "amq.fanout", name, {}, self.client)
        self.assertEqual(self.route("amq.fanout", "whatever"), ["a", "b"])

    def test_topic_cache_follows_bindings(self) -> None:
        self.queue("q")
        self.assertEqual(self.route("amq.topic", "a.b"), [])
        self.vhost.bind_queue("q", "amq.topic", "a.*", {}, self.client)
        self.assertEqual(self.route("amq.topic", "a.b"), ["q"])
        self.vhost.unbind_queue("q", "amq.topic", "a.*", {}, self.client)
        self.assertEqual(self.route("amq.topic", "a.b"), [])

    def test_headers_exchange(self) -> None:
        self.queue("pdf")
        self.queue("any")
        self.vhost.bind_queue("pdf", "amq.headers", "", {"format": b"pdf", "x-match": b"all"}, self.client)
        self.vhost.bind_queue("any", "amq.match", "", {"a": 1, "b": 2, "x-match": b"any"}, self.client)
        self.assertEqual(self.route("amq.headers", headers={"format": b"pdf"}), ["pdf"])
        self.assertEqual(self.route("amq.headers", headers={"format": b"zip"}), [])
        self.assertEqual(self.route("amq.match", headers={"b": 2}), ["any"])

    def test_headers_bad_x_match(self) -> None:
        self.queue("q")
        self.assertRaises(
            PreconditionFailed,
            self.vhost.bind_queue, "q", "amq.headers", "", {"x-match": b"most"}, self.client,
        )

    def test_exchange_to_exchange_with_cycle(self) -> None:
        """A cycle of exchanges ends, and a queue reached twice gets the message once."""
        self.vhost.declare_exchange("e1", "fanout")
        self.vhost.declare_exchange("e2", "fanout")
        self.vhost.declare_exchange("e3", "topic")
        self.queue("q")
        self.queue("r")
        self.vhost.bind_exchange("e2", "e1", "", {})
        self.vhost.bind_exchange("e1", "e2", "", {})
        self.vhost.bind_exchange("e3", "e2", "", {})
        self.vhost.bind_queue("q", "e1", "", {}, self.client)
        self.vhost.bind_queue("q", "e2", "", {}, self.client)
        self.vhost.bind_queue("r", "e3", "k.*", {}, self.client)
        self.assertEqual(self.route("e1", "k.1"), ["q", "r"])
        self.assertEqual(self.route("e1", "other"), ["q"])
        self.vhost.unbind_exchange("e3", "e2", "", {})
        self.assertEqual(self.route("e1", "k.1"), ["q"])
