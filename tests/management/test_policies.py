"""Policies and operator policies applied to queues and exchanges (the model)."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import TestCase

from tests.broker.model.support import World
from txamqp09.broker.model.policy import Policy, PolicyError, check_definition, merge_operator
from txamqp09.broker.runtime import queue_policy_fields


def policy(name: str, pattern: str, definition: dict[str, Any], priority: int = 0,
           apply_to: str = "all", operator: bool = False) -> Policy:
    body = {"pattern": pattern, "definition": definition, "priority": priority, "apply-to": apply_to}
    return Policy.from_json("/", name, body, operator=operator)


class PolicyCheckTests(TestCase):
    """Definitions are checked with RabbitMQ's rules and texts."""

    def test_unknown_key_is_refused_by_name(self) -> None:
        with self.assertRaises(PolicyError) as caught:
            check_definition({"message-ttl": 5, "max-lenght": 3})
        self.assertEqual(str(caught.exception), '[<<"max-lenght">>] are not recognised policy settings')

    def test_bad_values_are_refused(self) -> None:
        for definition, text in [
            ({"message-ttl": -1}, "-1 is not a valid message TTL"),
            ({"message-ttl": "10"}, '<<"10">> is not a valid message TTL'),
            ({"expires": 0}, "0 is not a valid queue expiry"),
            ({"overflow": "drop-tail"}, '<<"drop-tail">> is not a valid overflow value'),
            ({"max-length": True}, "True is not a valid maximum length"),
            ({"queue-version": 3}, "3 is not a valid queue-version value"),
            ({"max-age": "7days"}, '<<"7days">> is not a valid max age'),
        ]:
            with self.assertRaises(PolicyError) as caught:
                check_definition(definition)
            self.assertEqual(str(caught.exception), text)

    def test_empty_definition_and_operator_keys(self) -> None:
        self.assertRaises(PolicyError, check_definition, {})
        self.assertRaises(PolicyError, check_definition, {"dead-letter-exchange": "dlx"}, True)
        self.assertEqual(check_definition({"max-length": 5}, True), {"max-length": 5})

    def test_pattern_priority_and_apply_to_are_checked(self) -> None:
        self.assertRaises(PolicyError, policy, "p", "(unclosed", {"max-length": 1})
        self.assertRaises(PolicyError, policy, "p", "q", {"max-length": 1}, apply_to="topics")
        self.assertRaises(PolicyError, Policy.from_json, "/", "p", {"pattern": "q", "definition": {"max-length": 1}, "priority": "high"})
        self.assertRaises(PolicyError, Policy.from_json, "/", "p", {"pattern": "q"})

    def test_operator_merge_takes_the_lower_value(self) -> None:
        self.assertEqual(
            merge_operator({"max-length": 10, "message-ttl": 100, "overflow": "reject-publish"},
                           {"max-length": 5, "message-ttl": 500, "expires": 9000}),
            {"max-length": 5, "message-ttl": 100, "overflow": "reject-publish", "expires": 9000},
        )


class PolicyApplicationTests(TestCase):
    """Policies reach existing queues at once and new queues when declared."""

    def setUp(self) -> None:
        self.world = World()
        self.vhost = self.world.vhost

    def put(self, *policies: Policy, operator: bool = False) -> None:
        for item in policies:
            self.vhost.policies.put(item, operator=operator)
        self.vhost.apply_policies()

    def test_max_length_applies_to_an_existing_queue_at_once(self) -> None:
        self.world.declare("jobs")
        for n in range(5):
            self.world.publish("jobs", b"m%d" % n)
        self.put(policy("cap", "^jobs$", {"max-length": 2}))
        self.assertEqual(self.world.bodies("jobs"), [b"m3", b"m4"])
        self.world.publish("jobs", b"m5")
        self.assertEqual(self.world.bodies("jobs"), [b"m4", b"m5"])
        self.assertEqual(queue_policy_fields(self.vhost.queues["jobs"]),
                         {"policy": "cap", "operator_policy": None, "effective_policy_definition": {"max-length": 2}})

    def test_message_ttl_policy_expires_messages_of_a_new_queue(self) -> None:
        self.put(policy("ttl", "^short", {"message-ttl": 1000}))
        self.world.declare("short-lived")
        self.world.publish("short-lived", b"gone")
        self.world.clock.advance(0.5)
        self.world.publish("short-lived", b"later")
        self.world.clock.advance(0.6)
        self.assertEqual(self.world.bodies("short-lived"), [b"later"])
        self.world.clock.advance(0.5)
        self.assertEqual(self.world.bodies("short-lived"), [])

    def test_highest_priority_wins_and_removal_falls_back(self) -> None:
        self.world.declare("q")
        low = policy("low", "^q", {"max-length": 1}, priority=1)
        high = policy("high", "^q", {"max-length": 3}, priority=5)
        self.put(low, high)
        self.assertEqual(self.vhost.queues["q"].policy, "high")
        self.assertEqual(self.vhost.queues["q"].max_length, 3)
        self.vhost.policies.remove("high")
        self.vhost.apply_policies()
        self.assertEqual((self.vhost.queues["q"].policy, self.vhost.queues["q"].max_length), ("low", 1))
        self.vhost.policies.remove("low")
        self.vhost.apply_policies()
        self.assertEqual((self.vhost.queues["q"].policy, self.vhost.queues["q"].max_length), (None, None))

    def test_operator_policy_lower_value_wins(self) -> None:
        self.world.declare("q")
        self.put(policy("user", ".*", {"max-length": 10, "overflow": "reject-publish"}))
        self.put(policy("ops", ".*", {"max-length": 2}, operator=True), operator=True)
        queue = self.vhost.queues["q"]
        self.assertEqual(queue_policy_fields(queue), {
            "policy": "user", "operator_policy": "ops",
            "effective_policy_definition": {"max-length": 2, "overflow": "reject-publish"},
        })
        for n in range(4):
            self.world.publish("q", b"m%d" % n)
        self.assertEqual(self.world.bodies("q"), [b"m0", b"m1"])

    def test_queue_arguments_take_precedence(self) -> None:
        self.world.declare("q", {"x-max-length": 4, "x-overflow": "reject-publish", "x-message-ttl": 60000})
        self.put(policy("p", ".*", {"max-length": 10, "overflow": "drop-head", "message-ttl": 1000}))
        queue = self.vhost.queues["q"]
        # The lower of argument and policy for limits; the argument for the rest.
        self.assertEqual((queue.max_length, queue.overflow, queue.settings.message_ttl), (4, "reject-publish", 1000))

    def test_apply_to_and_dead_lettering_from_a_policy(self) -> None:
        self.world.declare("dead")
        self.vhost.declare_exchange("dlx", "fanout")
        self.vhost.bind_queue("dead", "dlx", "", {}, self.world.client)
        self.put(policy("only-exchanges", ".*", {"alternate-exchange": "ae"}, apply_to="exchanges"),
                 policy("dl", "^work$", {"dead-letter-exchange": "dlx", "max-length": 1}, apply_to="classic_queues"))
        self.world.declare("work")
        self.world.publish("work", b"first")
        self.world.publish("work", b"second")
        self.assertEqual(self.world.bodies("dead"), [b"first"])
        self.assertEqual(self.vhost.exchanges["dlx"].alternate, "ae")
        self.assertEqual(self.vhost.queues["work"].policy, "dl")
        self.assertIsNone(self.vhost.queues["dead"].policy)

    def test_declared_alternate_exchange_wins_over_a_policy(self) -> None:
        self.vhost.declare_exchange("x", "direct", arguments={"alternate-exchange": "mine"})
        self.put(policy("ae", ".*", {"alternate-exchange": "theirs"}, apply_to="exchanges"))
        self.assertEqual(self.vhost.exchanges["x"].alternate, "mine")
        self.assertEqual(self.vhost.exchanges["x"].policy, "ae")
