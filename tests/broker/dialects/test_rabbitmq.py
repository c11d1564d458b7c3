"""The differential harness: every probe of :mod:`tests.broker.dialects.probes`, run
with pika against this broker and against a private RabbitMQ 3.10 node,
must get the same outcome (code, scope and text, names normalised).

The few probes where this broker answers otherwise, on purpose, are in
:data:`EXPLAINED` with the reason; ``docs/broker.rst`` lists each of them
under its probe name, and the test checks that the difference is still
there (an explanation that no longer applies must go).

One RabbitMQ node serves the whole run (it takes 5-10 s to start); the
tests skip with a reason when RabbitMQ is not installed.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from tests.broker.dialects.probes import PROBES, Outcome, run_probe
from txamqp09.testing.broker import LoopbackBroker
from txamqp09.testing.rabbitmq import rabbitmq_missing, shared_rabbitmq

_DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "broker.rst")

#: Probes where this broker differs from RabbitMQ 3.10 on purpose, and why.
EXPLAINED: dict[str, str] = {
    "channel_flow_pause": (
        "channel.flow active=false pauses deliveries to the channel; RabbitMQ refuses it with 540"
    ),
    "basic_publish_immediate": (
        "immediate is served (basic.return 313 when no consumer takes the message at once); "
        "RabbitMQ refuses it with 540"
    ),
    "basic_qos_prefetch_size": "prefetch-size is honoured; RabbitMQ refuses it with 540",
    "basic_recover_without_requeue": (
        "basic.recover requeue=false redelivers to the same consumer; RabbitMQ refuses it with 540"
    ),
    "frame_unknown_method": (
        "an unknown method id closes the connection with 503 naming the class and method; "
        "RabbitMQ drops the connection without connection.close"
    ),
    "frame_tune_ok_channel_max_zero": (
        "tune-ok's channel_max 0 (no limit of the client's own) leaves the server's limit; "
        "RabbitMQ drops the connection"
    ),
    "frame_tune_ok_frame_max_zero": (
        "tune-ok's frame_max 0 (no limit of the client's own) leaves the server's limit; "
        "RabbitMQ drops the connection"
    ),
    "frame_tune_ok_channel_max_above_servers": (
        "a tune-ok above the server's limits is closed with 530 saying which; RabbitMQ drops "
        "the connection"
    ),
    "frame_login_unknown_mechanism": (
        "a refused login is closed with 403 saying why; RabbitMQ closes the socket without "
        "connection.close, after a pause, unless the client announced authentication_failure_close"
    ),
    "frame_login_malformed_plain_response": (
        "a malformed PLAIN response is closed with 403 saying what is wrong; RabbitMQ closes the "
        "socket without connection.close"
    ),
    "reply_to_in_a_transaction": (
        "a reply published in a transaction reaches its requester at tx.commit, with the "
        "transaction; RabbitMQ delivers it at once, even when the transaction is rolled back"
    ),
    "reply_to_declare_malformed_reply_name": (
        "a reply name the broker did not make is not found (404); RabbitMQ's channel fails to "
        "decode it and closes the connection with 541 INTERNAL_ERROR"
    ),
    "frame_tune_ok_frame_max_too_small": (
        "a frame_max below 4096 is closed with 530 saying so; RabbitMQ drops the connection"
    ),
}

#: Probes where code and scope are RabbitMQ's but the text is not: RabbitMQ
#: prints Erlang terms (the frame's octets, ``{frame_too_large,N,M}``).
EXPLAINED_TEXTS: dict[str, str] = {
    name: "RabbitMQ's text prints Erlang terms; this broker's says what is wrong in words"
    for name in (
        "frame_bad_frame_end", "frame_unknown_type", "frame_above_frame_max",
        "frame_body_longer_than_announced",
    )
}
EXPLAINED_TEXTS["basic_publish_expiration_beyond_64_bits"] = (
    "RabbitMQ's text breaks the line inside the Erlang term (its pretty-printer wraps long "
    "lines); this broker's keeps the term on one line"
)


class DifferentialTests(TestCase):
    """One test per probe: this broker's outcome equals RabbitMQ's."""

    skip = rabbitmq_missing()
    timeout = 120

    def setUp(self) -> None:
        self.rabbitmq_port = shared_rabbitmq().port
        self.broker = LoopbackBroker()
        self.port = self.broker.start()
        self.addCleanup(self.broker.stop)

    @inlineCallbacks
    def outcomes(self, name: str) -> Any:
        """(RabbitMQ's outcome, this broker's outcome) of probe *name*."""
        probe = PROBES[name]
        theirs = yield deferToThread(run_probe, probe, self.rabbitmq_port)
        ours = yield deferToThread(run_probe, probe, self.port)
        return theirs, ours

    @inlineCallbacks
    def check(self, name: str) -> Any:
        theirs: Outcome
        ours: Outcome
        theirs, ours = yield self.outcomes(name)
        if name in EXPLAINED or name in EXPLAINED_TEXTS:
            self.assertNotEqual(
                theirs, ours, f"{name} no longer differs from RabbitMQ: drop its explanation"
            )
            if name in EXPLAINED_TEXTS:
                self.assertEqual((theirs.scope, theirs.code), (ours.scope, ours.code), name)
            with open(_DOCS) as docs:
                self.assertIn(f"``{name}``", docs.read(), "docs/broker.rst must list the difference")
        else:
            self.assertEqual(theirs, ours, f"{name}: RabbitMQ {theirs} / this broker {ours}")


def _test_for(name: str) -> Callable[[DifferentialTests], Deferred[Any]]:
    def test(self: DifferentialTests) -> Deferred[Any]:
        return self.check(name)  # type: ignore[no-any-return]

    test.__name__ = f"test_{name}"
    test.__doc__ = f"Probe {name}: the same outcome as RabbitMQ 3.10 (or an explained difference)."
    return test


for _name in PROBES:
    setattr(DifferentialTests, f"test_{_name}", _test_for(_name))


class ExplainedTests(TestCase):
    """The list of explained differences names real probes."""

    def test_explained_probes_exist(self) -> None:
        self.assertLessEqual(set(EXPLAINED) | set(EXPLAINED_TEXTS), set(PROBES))
